// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * kvmmd --policy-state FILE keeps what asym learned across a restart.
 *
 *   - the first start finds no file and says so; 8 contents of 2 blocks
 *     published and read back are 32 block uses, each a life for asym;
 *     the stop saves the state (32,816 bytes) and the next start loads
 *     it: "32 block lives";
 *   - with KVMMD_TEST_POLICY_SAVE_MS the state is also saved while
 *     kvmmd runs (a crash loses at most that much), and ADMIN_STATUS,
 *     kvmmctl status and kvmmctl metrics say so: on, 32 lives loaded,
 *     the saves that worked and failed, the age of the last;
 *   - a damaged file is logged and not used, kvmmd starts and serves,
 *     and its stop writes a good file again, which the next start loads;
 *   - --cache-policy lru learns nothing: the file is not used or changed;
 *   - a FILE whose directory is missing (FILE.lock cannot be taken)
 *     refuses the start, exit 2 (it was a WARN, "nothing will be
 *     saved", and a run that saved nothing); a file that cannot be
 *     written once kvmmd runs (its directory removed) is a WARN at each
 *     save, counted as a failed save in the status, and the stop still
 *     ends cleanly;
 *   - a second kvmmd on the same FILE does not start (FILE.lock);
 *   - a run that used no block leaves the file as it is;
 *   - a periodic save still writing (KVMMD_TEST_POLICY_WRITE_DELAY_MS:
 *     a slow disk) makes the next ones skip, and the stop waits for it
 *     before its own save: one periodic save, then the stop's.  The
 *     test stops kvmmd once it said the write is in flight and a save
 *     was skipped, and kvmmd's stop says it waited.
 */
#include <sys/stat.h>

#include "tests/cache-common.h"
#include "tests/lib/wait.h"

#define NCONTENT 8
#define NB 2
#define STATE_BYTES 32816 /* header 32 + asym's 16 + 2 x 16 x 128 x 8 */

/* the slow write's delay, and what kvmmd says of it */
#define WRITE_DELAY_MS "3000"
#define SAVE_IN_FLIGHT "test knob: a periodic save writing, waiting 3000 ms"
#define SAVE_SKIPPED \
	"the last periodic save is still writing: this one and the next wait for it"
#define STOP_WAITS "the periodic save is still writing: waiting for it"

static const struct cc_contents contents = { .base = 0x9e5700,
					     .tag0 = 30,
					     .nb = NB };

static char state[128];
static char log[1 << 16];

static const char **args_for(const char **a, const char *policy,
			     const char *path)
{
	int n = 0;

	a[n++] = "--cache-block-pages";
	a[n++] = "4";
	a[n++] = "--cache-policy";
	a[n++] = policy;
	a[n++] = "--policy-state";
	a[n++] = path;
	a[n] = NULL;
	return a;
}

/* Publish every content, then read each back from the GPU tier. */
static void work(const char *sock)
{
	for (int k = 0; k < NCONTENT; k++)
		cc_write_content(sock, &contents, k);
	for (int k = 0; k < NCONTENT; k++)
		cc_read_content(sock, &contents, k, NB, 0);
}

/* A second kvmmd with --policy-state path: its exit status, its stderr
 * into out. */
static int second_kvmmd(const char *dir, const char *path, char *out,
			size_t cap)
{
	char bin[256], cmd[1024];
	FILE *f;
	size_t n;
	int st;

	td_build_path("kvmmd", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd),
		 "%s --foreground --backend host --socket %s/second.sock "
		 "--gpu-mem 64M --page-size 64K --telemetry off "
		 "--policy-state %s 2>%s/second.log",
		 bin, dir, path, dir);
	st = system(cmd);
	snprintf(cmd, sizeof(cmd), "%s/second.log", dir);
	f = fopen(cmd, "r");
	t_assert(f != NULL);
	n = fread(out, 1, cap - 1, f);
	out[n] = '\0';
	fclose(f);
	unlink(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static off_t file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) ? -1 : sb.st_size;
}

int main(void)
{
	char dir[64], bad[256];
	static char out[1 << 16];
	struct kvmm_status_reply st;
	const char *a[16];
	struct td_daemon d;
	FILE *f;

	td_tmp_path("kvmm-pstate-XXXXXX", dir, sizeof(dir));
	t_assert(mkdtemp(dir) != NULL);
	snprintf(state, sizeof(state), "%s/policy.state", dir);

	/* a first start, some work, a stop */
	cc_start(&d, args_for(a, "asym", state));
	work(d.sock);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(t_count(log, ": none yet: asym learns from the start"), 1);
	t_assert_eq(t_count(log,
			    ": saved what asym learned (stop, 32816 bytes)"),
		    1);
	t_assert_eq(file_size(state), STATE_BYTES);

	/* the restart loads it; the periodic save runs */
	setenv("KVMMD_TEST_POLICY_SAVE_MS", "100", 1);
	cc_start(&d, args_for(a, "asym", state));
	unsetenv("KVMMD_TEST_POLICY_SAVE_MS");
	cc_read_content(d.sock, &contents, 0, 0, -1); /* a new kvmmd: empty */
	work(d.sock); /* a save needs a block used since the start */
	td_wait_log(&d, "(periodic, 32816 bytes)", 20000);
	t_assert(td_read_log(&d, log, sizeof(log)) > 0);
	t_assert_eq(
		t_count(log,
			": loaded what asym learned before (32 block lives)"),
		1);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.policy_state, KVMM_POLICY_STATE_ON);
	t_assert_eq(st.policy_state_lives, 32);
	t_assert(st.policy_state_saves >= 1);
	t_assert_eq(st.policy_state_save_errors, 0);
	t_assert(st.policy_state_save_age_ms < 10000);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	t_assert(strstr(out,
			"policy state on: loaded 32 block lives at start; ") !=
		 NULL);
	t_assert(strstr(out, " failed), the last ") != NULL);
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	t_assert(
		strstr(out,
		       "\"policy_state\":{\"mode\":\"on\",\"loaded_lives\":32,") !=
		NULL);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	t_assert(strstr(out, "\nkvmm_policy_state_loaded_lives 32\n") != NULL);
	t_assert(
		strstr(out,
		       "\nkvmm_policy_state_saves_total{result=\"failed\"} 0\n") !=
		NULL);
	t_assert(strstr(out, "\nkvmm_policy_state_last_save_age_seconds ") !=
		 NULL);
	/* one file, one kvmmd */
	t_assert_eq(second_kvmmd(dir, state, out, sizeof(out)), 1);
	t_assert(strstr(out, ": another kvmmd keeps its state there (") !=
		 NULL);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	printf("restart: loaded the state of 32 block lives\n");

	/* damaged: not used, replaced at the stop */
	f = fopen(state, "r+");
	t_assert(f != NULL);
	t_assert_eq(fseek(f, 1000, SEEK_SET), 0);
	t_assert_eq(fputc(0x5a, f), 0x5a);
	t_assert_eq(fclose(f), 0);
	cc_start(&d, args_for(a, "asym", state));
	work(d.sock);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(t_count(log, ": damaged: not used, asym learns anew"), 1);
	t_assert_eq(t_count(log, "(stop, 32816 bytes)"), 1);
	cc_start(&d, args_for(a, "asym", state));
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	/* that run used no block: it leaves the file as it was (saved, a
	 * loaded state would weigh less than it was learned with) */
	t_assert_eq(t_count(log,
			    ": no block used since the start: left as it is"),
		    1);
	t_assert_eq(t_count(log, "saved what"), 0);
	t_assert_eq(
		t_count(log,
			": loaded what asym learned before (32 block lives)"),
		1);
	printf("damaged file: not used, then replaced\n");

	/* lru learns nothing: the file stays as it is */
	cc_start(&d, args_for(a, "lru", state));
	work(d.sock);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.policy_state, KVMM_POLICY_STATE_UNUSED);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(t_count(log, ": lru learns nothing to keep: not used"), 1);
	t_assert_eq(t_count(log, "saved what"), 0);
	t_assert_eq(file_size(state), STATE_BYTES);

	/* no directory for FILE.lock: the start is refused, exit 2 */
	snprintf(bad, sizeof(bad), "%s/no-such-dir/policy.state", dir);
	t_assert_eq(second_kvmmd(dir, bad, out, sizeof(out)), 2);
	t_assert(strstr(out, "/no-such-dir/policy.state: cannot lock ") !=
		 NULL);
	t_assert(strstr(out, "policy.state.lock: No such file or directory") !=
		 NULL);
	t_assert(strstr(out, "kvmmd: cannot start: an option is wrong") !=
		 NULL);
	t_assert(strstr(out, "nothing will be saved") == NULL);

	/* nowhere to write once it runs (the directory removed under it,
	 * its FILE.lock with it): a WARN at each save, a clean stop */
	snprintf(bad, sizeof(bad), "%s/gone", dir);
	t_ok(mkdir(bad, 0700));
	snprintf(bad, sizeof(bad), "%s/gone/policy.state", dir);
	setenv("KVMMD_TEST_POLICY_SAVE_MS", "50", 1);
	cc_start(&d, args_for(a, "asym", bad));
	unsetenv("KVMMD_TEST_POLICY_SAVE_MS");
	snprintf(out, sizeof(out), "%s.lock", bad);
	t_ok(unlink(out));
	snprintf(out, sizeof(out), "%s/gone", dir);
	t_ok(rmdir(out));
	work(d.sock);
	t_wait_until(20000, t_ok(td_status(&d, &st)),
		     st.policy_state_save_errors >= 1,
		     "no failed periodic save counted (%llu saves)",
		     (unsigned long long)st.policy_state_saves);
	t_assert_eq(st.policy_state_saves, 0);
	t_assert_eq(st.policy_state_save_age_ms, UINT64_MAX);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	t_assert(strstr(out, " failed), none yet\n") != NULL);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	/* without its directory nothing is written, each save fails */
	t_assert_eq(t_count(log, "cannot lock "), 0);
	t_assert_eq(t_count(log, "saving (stop): No such file or directory"),
		    1);
	t_assert(t_count(log, "saving (periodic): No such file or directory") >=
		 1);

	/*
	 * A slow periodic write: the timer skips, the stop waits for it.
	 * The stop comes once kvmmd said both (the write in flight, a save
	 * skipped), well within the write's WRITE_DELAY_MS, and kvmmd's
	 * "waiting for it" at the stop says the save was still in flight
	 * then: without it the test would not test the wait.
	 */
	setenv("KVMMD_TEST_POLICY_SAVE_MS", "100", 1);
	setenv("KVMMD_TEST_POLICY_WRITE_DELAY_MS", WRITE_DELAY_MS, 1);
	cc_start(&d, args_for(a, "asym", state));
	unsetenv("KVMMD_TEST_POLICY_SAVE_MS");
	unsetenv("KVMMD_TEST_POLICY_WRITE_DELAY_MS");
	work(d.sock);
	td_wait_log(&d, SAVE_IN_FLIGHT, 30000);
	td_wait_log(&d, SAVE_SKIPPED, 30000);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(t_count(log, SAVE_IN_FLIGHT), 1);
	t_assert_eq(t_count(log, SAVE_SKIPPED), 1);
	if (!t_count(log, STOP_WAITS))
		t_fail("the stop never said it waited for the periodic save (the stop did not wait, or the save ended first: a machine too loaded for %s ms?):\n%s",
		       WRITE_DELAY_MS, log);
	t_assert_eq(t_count(log, STOP_WAITS), 1);
	t_assert_eq(t_count(log, "(periodic, 32816 bytes)"), 1);
	t_assert_eq(t_count(log, "(stop, 32816 bytes)"), 1);
	t_assert(strstr(log, SAVE_SKIPPED) < strstr(log, STOP_WAITS));
	t_assert(strstr(log, STOP_WAITS) <
		 strstr(log, "(periodic, 32816 bytes)"));
	t_assert(strstr(log, "(periodic, 32816 bytes)") <
		 strstr(log, "(stop, 32816 bytes)"));
	t_assert_eq(file_size(state), STATE_BYTES);
	printf("a slow periodic save: the stop waited for it\n");

	unlink(state);
	snprintf(bad, sizeof(bad), "%s.lock", state);
	t_ok(unlink(bad));
	t_ok(rmdir(dir));
	return 0;
}
