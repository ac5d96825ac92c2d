// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * kvmmd --policy-state FILE with two block sizes cached
 * (--cache-block-pages 4,2, --cache-policy asym): each size's policy
 * state is kept, tagged with its pages a block, in the one file.
 *
 *   - a file of one size's state (written by a run that cached 4-page
 *     blocks alone) loads into that size; the 2-page size has none yet;
 *   - the stop of that two-size run saves both sizes' states, each
 *     learned from its own model's traffic (the 4-page model's 8
 *     contents on top of the 32 lives loaded, the 2-page model's 3: 64
 *     and 12 block lives); the restart loads each into its size (one log
 *     line a size, their lives; ADMIN_STATUS' loaded lives are the sum),
 *     and kvmmctl policy-state (text and --json) describes each size's;
 *   - a restart that caches 4-page blocks alone loads that size's and
 *     skips the 2-page size's with a log line; one that names the sizes
 *     the other way round (2,4) gives each size its own all the same.
 */
#include "tests/cache-common.h"

#define NCONTENT 8
#define NCONTENT2 3
#define NB 2

static const struct cc_contents contents = { .base = 0x9e6700,
					     .tag0 = 40,
					     .nb = NB };

static char state[128];
static char log[1 << 16];

static const char **args_for(const char **a, const char *sizes)
{
	int n = 0;

	a[n++] = "--cache-block-pages";
	a[n++] = sizes;
	a[n++] = "--cache-policy";
	a[n++] = "asym";
	a[n++] = "--policy-state";
	a[n++] = state;
	a[n++] = "--host-mem";
	a[n++] = "4M";
	a[n] = NULL;
	return a;
}

/* The 2-page model (one layer): content k published by one process,
 * then found whole by a prefix open of another. */
static void small_model(const char *sock, int k)
{
	for (int role = 0; role < 2; role++) {
		pid_t p = fork();

		t_assert(p >= 0);
		if (p == 0) {
			struct kvmm_region_opts ro = cc_region_opts();
			uint64_t h[NB];
			struct kvmm_region *r;
			struct kvmm_conn *c;
			uint32_t seq, nb;

			for (int b = 0; b < NB; b++)
				h[b] = 0x5e1100ull * (k + 1) + b + 1;
			ro.layers = 1;
			c = cc_connect_lib(sock, "small-model");
			t_ok(kvmm_region_create(c, &ro, &r));
			if (!role) {
				t_ok(kvmm_seq_open(r, &seq));
				t_ok(kvmm_seq_extend(r, seq, NB * CC_TPB));
				t_assert_eq(kvmm_block_publish(r, seq, 0, NB, 0,
							       h),
					    NB);
			} else {
				t_ok(kvmm_seq_open_prefix(r, h, NB, &seq, &nb));
				t_assert_eq(nb, NB);
			}
			t_ok(kvmm_seq_close(r, seq));
			kvmm_region_destroy(r);
			kvmm_disconnect(c);
			_exit(0);
		}
		t_assert_eq(cc_wait_child(p), 0);
	}
}

/* The 4-page model's contents published and read back (32 lives). */
static void big_model(const char *sock)
{
	for (int k = 0; k < NCONTENT; k++)
		cc_write_content(sock, &contents, k);
	for (int k = 0; k < NCONTENT; k++)
		cc_read_content(sock, &contents, k, NB, 0);
}

/* kvmmd's log says each size loaded its own state (64 and 12 lives) */
static void assert_each_loaded(const char *log)
{
	t_assert_eq(
		t_count(log,
			": blocks of 4 pages: loaded what asym learned before (64 block lives)"),
		1);
	t_assert_eq(
		t_count(log,
			": blocks of 2 pages: loaded what asym learned before (12 block lives)"),
		1);
}

int main(void)
{
	struct kvmm_status_reply st;
	const char *a[16];
	struct td_daemon d;
	char dir[64], lock[160];

	td_tmp_path("kvmm-pstate-sizes-XXXXXX", dir, sizeof(dir));
	t_assert(mkdtemp(dir) != NULL);
	snprintf(state, sizeof(state), "%s/policy.state", dir);

	/* one size's state, as a run of one model wrote it */
	cc_start(&d, args_for(a, "4"));
	big_model(d.sock);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(t_count(log,
			    ": saved what asym learned (stop, 32816 bytes)"),
		    1);

	/* two sizes: the old file goes to the 4-page size */
	cc_start(&d, args_for(a, "4,2"));
	for (int k = 0; k < NCONTENT2; k++)
		small_model(d.sock, k);
	big_model(d.sock);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(
		t_count(log,
			": blocks of 4 pages: loaded what asym learned before (32 block lives)"),
		1);
	t_assert_eq(
		t_count(log,
			": blocks of 2 pages: none yet: asym learns from the start"),
		1);
	/* one save of both: two sections of 32816 bytes and the wrapper */
	t_assert_eq(t_count(log, ": saved what asym learned (stop, "), 1);
	t_assert_eq(t_count(log,
			    ": saved what asym learned (stop, 65680 bytes)"),
		    1);
	printf("an old file of one size: loaded into that size\n");

	/* the restart gives each size its own state back */
	cc_start(&d, args_for(a, "4,2"));
	t_ok(td_status(&d, &st));
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	assert_each_loaded(log);
	t_assert_eq(st.policy_state, KVMM_POLICY_STATE_ON);
	t_assert_eq(st.policy_state_lives, 64 + 12);
	/* used nothing: the file stays */
	t_assert_eq(t_count(log,
			    ": no block used since the start: left as it is"),
		    1);
	/* kvmmctl policy-state describes each size's */
	{
		static char out[1 << 16];
		char args[256];

		snprintf(args, sizeof(args), "policy-state %s", state);
		t_assert_eq(td_kvmmctl(d.sock, args, out, sizeof(out)), 0);
		t_assert(strstr(out, "blocks of 4 pages:\n") == out);
		t_assert(strstr(out, "\n\nblocks of 2 pages:\n") != NULL);
		t_assert_eq(t_count(out, ": asym, version "), 2);
		snprintf(args, sizeof(args), "--json policy-state %s", state);
		t_assert_eq(td_kvmmctl(d.sock, args, out, sizeof(out)), 0);
		t_assert(
			strstr(out,
			       "{\"sizes\":[{\"block_pages\":4,\"policy\":\"asym\",") ==
			out);
		t_assert(strstr(out,
				"]},{\"block_pages\":2,\"policy\":\"asym\",") !=
			 NULL);
	}
	printf("restart: each size's state loaded into it\n");

	/* the sizes named the other way round: each its own all the same */
	cc_start(&d, args_for(a, "2,4"));
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	assert_each_loaded(log);

	/* one size cached: the other's state skipped, said once */
	cc_start(&d, args_for(a, "4"));
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(
		t_count(log,
			": blocks of 2 pages are not cached (--cache-block-pages): their state is skipped"),
		1);
	t_assert_eq(
		t_count(log,
			": blocks of 4 pages: loaded what asym learned before (64 block lives)"),
		1);
	printf("a size no longer cached: its state skipped\n");

	unlink(state);
	snprintf(lock, sizeof(lock), "%s.lock", state);
	t_ok(unlink(lock));
	t_ok(rmdir(dir));
	return 0;
}
