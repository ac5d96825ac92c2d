/* SPDX-License-Identifier: MIT */
/*
 * kvmmctl calibrate runs kvmm-calibrate for the operator and makes its
 * profile usable:
 *   - build/kvmmctl calibrate passes through to build/kvmm-calibrate
 *     (where nvcc built it) and exits with its status: 0 on a GPU, 77
 *     without one (nothing written);
 *   - a copy of kvmmctl in a temporary directory, next to the emulated
 *     calibration (build/kernels/emu-calibrate, linked as kvmm-calibrate),
 *     with an empty $PATH: `calibrate --tiny --base h200 --out FILE
 *     --socket S` against a real kvmmd (--telemetry shm, --profile h200)
 *     exits 0, FILE loads with pol_cost_load(), and the comparison lines
 *     carry the daemon's status values and the file's; the restart
 *     command printed, run after stopping the daemon, starts a kvmmd whose
 *     status reports the new profile's host bandwidth;
 *   - a daemon with --telemetry off: "no cost model" and a restart
 *     command with --telemetry auto;
 *   - a kvmmctl alone with an empty $PATH: one line naming kvmm-calibrate
 *     and nvcc, exit 1, nothing written; with $PATH holding it, found;
 *   - a socket nobody answers on: exit 1 before measuring anything;
 *   - a kvmmd that refuses the status (kvmmctl run as uid 65534, as
 *     root): exit 1 before measuring, one line "kvmmctl: calibrate: ..."
 *     (it was "kvmmctl: status: ...");
 *     kvmm-calibrate's own usage error (2) and --help (0, the options
 *     explained) reach the operator.
 * Skips when the emulated calibration is not built.
 * timeout: 300
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/policy/cost_model.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

static char out[65536];
static char dir[40]; /* $TMPDIR/kvmm-ctlcal-XXXXXX: fits the commands */

/* A failing assertion exits: the temporary files go with it. */
static void remove_dir(void)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
}

/* sh -c "cmd >log 2>&1"; the output in out; the exit status. */
static int run(const char *dir, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int run(const char *dir, const char *fmt, ...)
{
	char cmd[4096], log[PATH_MAX];
	va_list ap;
	FILE *f;
	size_t n = 0;
	int rc, len;

	snprintf(log, sizeof(log), "%s/cmd.log", dir);
	va_start(ap, fmt);
	len = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	t_assert(len > 0 && (size_t)len < sizeof(cmd) - PATH_MAX - 16);
	snprintf(cmd + len, sizeof(cmd) - len, " >%s 2>&1", log);
	rc = system(cmd);
	t_assert(rc != -1 && WIFEXITED(rc));
	f = fopen(log, "r");
	t_assert(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	fclose(f);
	printf("$ %s\n%s(exit %d)\n", cmd, out, WEXITSTATUS(rc));
	return WEXITSTATUS(rc);
}

/* Nothing written: dir/name does not exist. */
static void not_written(const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	t_assert(access(path, F_OK) && errno == ENOENT);
}

/* The line of out that starts with prefix, or fail. */
static const char *line_of(const char *prefix)
{
	const char *l = out;

	while (l && *l) {
		if (!strncmp(l, prefix, strlen(prefix)))
			return l;
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	t_fail("no line starting with '%s'", prefix);
}

/* The line of out that starts with prefix, without its newline, in buf. */
static void copy_line(const char *prefix, char *buf, size_t len)
{
	const char *l = line_of(prefix), *nl = strchr(l, '\n');

	t_assert(nl && (size_t)(nl - l) < len);
	snprintf(buf, len, "%.*s", (int)(nl - l), l);
}

static void assert_close(double got, double want, double tol)
{
	if (fabs(got - want) > tol)
		t_fail("printed %.6f, expected %.6f", got, want);
}

/* A bandwidth row: kvmmd's rate now and by profile, the new one, ratio. */
static void check_row(const char *key, const char *how, uint64_t now,
		      uint64_t profile, double new_bw)
{
	char fmt[256], line[64];
	double p_now, p_prof, p_new, p_ratio;

	snprintf(line, sizeof(line), "  %s ", key);
	snprintf(
		fmt, sizeof(fmt),
		" %s kvmmd %%lf GB/s (its profile %%lf GB/s), new %%lf GB/s %s, %%lfx",
		key, how);
	if (sscanf(line_of(line), fmt, &p_now, &p_prof, &p_new, &p_ratio) != 4)
		t_fail("the %s row does not parse", key);
	assert_close(p_now, now / 1e9, 6e-4);
	assert_close(p_prof, profile / 1e9, 6e-4);
	assert_close(p_new, new_bw / 1e9, 6e-4);
	assert_close(p_ratio, new_bw / now, 1e-3 + 1e-3 * new_bw / now);
}

static void load(const char *path, struct pol_cost_model *m)
{
	char err[256] = "";

	if (pol_cost_load(path, m, err, sizeof(err)))
		t_fail("%s rejected: %s", path, err);
}

/*
 * A kvmmctl of another uid (65534) asks a kvmmd of root for its status
 * before measuring: refused (EPERM), one line that names calibrate (it
 * said "kvmmctl: status:" until 7 December, a command nobody ran), exit
 * 1, nothing written.  Root only (to be another uid): copies of kvmmctl
 * and the emulated kvmm-calibrate in a directory that uid can reach.
 */
static void status_refused(const char *ctl, const char *emu)
{
	const char *args[] = { "--socket-mode", "0666", NULL };
	const char *want = "admin commands need uid 0 or kvmmd's own; "
			   "this is uid 65534\n";
	struct td_daemon d;
	int rc;

	if (geteuid() != 0 || system("command -v setpriv >/dev/null")) {
		printf("calibrate as another uid skipped: needs root and setpriv\n");
		return;
	}
	t_ok(td_start(&d, args));
	t_ok(chmod(d.dir, 0711));
	t_ok(chmod(dir, 0711));
	t_assert_eq(
		run(dir,
		    "mkdir -m 0755 %s/uid && cp %s %s/uid/kvmmctl && cp %s %s/uid/kvmm-calibrate",
		    dir, ctl, dir, emu, dir),
		0);
	rc = run(
		dir,
		"setpriv --reuid 65534 --regid 65534 --clear-groups env PATH= %s/uid/kvmmctl --socket %s calibrate --tiny --out %s/uid.profile",
		dir, d.sock, dir);
	t_assert_eq(rc, 1);
	t_assert(!strncmp(out, "kvmmctl: calibrate: ", 20));
	t_assert(strlen(out) > strlen(want) &&
		 !strcmp(out + strlen(out) - strlen(want), want));
	t_assert(strchr(out, '\n') == out + strlen(out) - 1); /* one line */
	not_written("uid.profile");
	t_assert_eq(td_stop(&d), 0);
}

int main(void)
{
	const char *src = getenv("KVMM_SRC");
	char ctl[PATH_MAX], emu[PATH_MAX], kvmmd[PATH_MAX], real[PATH_MAX];
	char base[PATH_MAX], cal[PATH_MAX];
	char expect[PATH_MAX * 2], line[8192];
	const char *extra[] = { "--telemetry", "shm", "--profile", base, NULL };
	const char *off[] = { "--socket-mode", "0600", NULL };
	struct kvmm_status_reply st, st2;
	struct pol_cost_model m, mb;
	struct td_daemon d, d2;
	pid_t pid;
	int rc;

	src = src ? src : ".";
	td_build_path("kvmmctl", ctl, sizeof(ctl));
	td_build_path("kernels/emu-calibrate", emu, sizeof(emu));
	td_build_path("kvmm-calibrate", real, sizeof(real));
	snprintf(base, sizeof(base),
		 "%s/kvmm/policy/profiles/h200-llama3-8b.profile", src);
	if (access(emu, X_OK))
		t_skip("%s (kvmm-calibrate under the CUDA emulator) not built",
		       emu);
	if (access(base, R_OK))
		t_skip("%s not found", base);
	t_assert(realpath(emu, line) && strlen(line) < sizeof(emu));
	strcpy(emu, line);
	td_tmp_path("kvmm-ctlcal-XXXXXX", dir, sizeof(dir));
	t_assert(mkdtemp(dir));
	atexit(remove_dir);
	load(base, &mb);

	/* build/kvmmctl next to the real kvmm-calibrate, when nvcc built it */
	if (!access(real, X_OK)) {
		snprintf(cal, sizeof(cal), "%s/real.profile", dir);
		rc = run(dir, "%s calibrate --tiny --out %s", ctl, cal);
		if (rc == 77) {
			t_assert(strstr(
				out, "kvmm-calibrate: no usable CUDA device"));
			not_written("real.profile");
			printf("build/kvmm-calibrate: no GPU here, 77 passed through\n");
		} else {
			t_assert_eq(rc, 0);
			load(cal, &m);
			t_assert(m.bandwidth[POL_TIER_HOST] > 0);
		}
	} else {
		printf("%s not built (no nvcc): the emulated one stands in\n",
		       real);
	}

	/* dir/bin: a copy of kvmmctl next to the emulated kvmm-calibrate */
	t_assert_eq(
		run(dir,
		    "mkdir %s/bin %s/lone && cp %s %s/bin/ && cp %s %s/lone/ && ln -s %s %s/bin/kvmm-calibrate",
		    dir, dir, ctl, dir, ctl, dir, emu, dir),
		0);

	/* missing: one line naming what to build, exit 1, nothing written */
	rc = run(dir,
		 "PATH= %s/lone/kvmmctl calibrate --tiny --out %s/none.profile",
		 dir, dir);
	t_assert_eq(rc, 1);
	snprintf(
		expect, sizeof(expect),
		"kvmmctl: calibrate: kvmm-calibrate not found next to kvmmctl (%s/lone) or in $PATH: build it with `make`, which needs nvcc",
		dir);
	t_assert(!strncmp(out, expect, strlen(expect)));
	t_assert(strchr(out, '\n') == out + strlen(out) - 1); /* one line */
	not_written("none.profile");

	/* ... and found in $PATH */
	rc = run(
		dir,
		"PATH=/nonexistent:%s/bin %s/lone/kvmmctl calibrate --tiny --out %s/path.profile",
		dir, dir, dir);
	t_assert_eq(rc, 0);
	snprintf(cal, sizeof(cal), "%s/path.profile", dir);
	load(cal, &m);

	/* kvmm-calibrate's usage error and --help reach the operator */
	t_assert_eq(run(dir, "PATH= %s/bin/kvmmctl calibrate --frob", dir), 2);
	t_assert(strstr(out, "usage: kvmm-calibrate"));
	t_assert_eq(run(dir, "PATH= %s/bin/kvmmctl calibrate --help", dir), 0);
	t_assert(strstr(out, "usage: kvmm-calibrate"));
	t_assert(strstr(out, "--quick"));
	/* --json after the command is kvmmctl's refusal, as before it, not
	 * kvmm-calibrate's "bad option" */
	t_assert_eq(
		run(dir,
		    "PATH= %s/bin/kvmmctl calibrate --tiny --json --out %s/json.profile",
		    dir, dir),
		2);
	t_assert(strstr(
		out,
		"kvmmctl: calibrate has no --json output (the profile is the result)"));
	not_written("json.profile");

	/* a dead socket: refused before measuring */
	rc = run(
		dir,
		"PATH= %s/bin/kvmmctl --socket %s/nope.sock calibrate --tiny --out %s/dead.profile",
		dir, dir, dir);
	t_assert_eq(rc, 1);
	not_written("dead.profile");
	status_refused(ctl, emu);

	/* against a real kvmmd with a cost model */
	t_ok(td_start(&d, extra));
	snprintf(cal, sizeof(cal), "%s/cal.profile", dir);
	rc = run(
		dir,
		"PATH= %s/bin/kvmmctl calibrate --tiny --base %s --name ctl-test --out %s --socket %s",
		dir, base, cal, d.sock);
	t_assert_eq(rc, 0);
	load(cal, &m);
	t_assert(!strcmp(m.name, "ctl-test"));
	t_assert(m.bandwidth[POL_TIER_HOST] > 0);
	t_assert(m.bandwidth[POL_TIER_NVME] == mb.bandwidth[POL_TIER_NVME]);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pid, d.pid);
	t_assert(st.cost_host_bw_profile ==
		 (uint64_t)mb.bandwidth[POL_TIER_HOST]);
	snprintf(expect, sizeof(expect),
		 "kvmmd (pid %u) cost model compared with %s:\n", st.pid, cal);
	t_assert(strstr(out, expect));
	check_row("host_bandwidth", "measured", st.cost_host_bw,
		  st.cost_host_bw_profile, m.bandwidth[POL_TIER_HOST]);
	check_row("nvme_bandwidth", "from the base, not measured",
		  st.cost_nvme_bw, st.cost_nvme_bw_profile,
		  m.bandwidth[POL_TIER_NVME]);
	snprintf(expect, sizeof(expect),
		 "  also measured   gpu_bandwidth %.3f GB/s, ",
		 m.bandwidth[POL_TIER_GPU] / 1e9);
	t_assert(strstr(out, expect));
	snprintf(
		expect, sizeof(expect),
		"  kill -TERM %u && while kill -0 %u 2>/dev/null; do sleep 0.1; done\n",
		st.pid, st.pid);
	t_assert(strstr(out, expect));

	/* the restart line: kvmmd's own options, --profile the new file */
	t_assert(realpath(td_build_path("kvmmd", line, sizeof(line)), kvmmd));
	snprintf(expect, sizeof(expect), "  %s --foreground --backend host ",
		 kvmmd);
	copy_line(expect, line, sizeof(line));
	t_assert(strstr(line, " --gpu-mem 64M "));
	t_assert(strstr(line, " --telemetry shm "));
	t_assert(!strstr(line, base)); /* the old --profile is gone */
	snprintf(expect, sizeof(expect), " --profile %s", cal);
	t_assert(strstr(line, expect) &&
		 strlen(strstr(line, expect)) == strlen(expect));

	/* run it: the restarted daemon has the new profile's rates */
	t_assert_eq(td_stop(&d), 0);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		static char sh[sizeof(line) + 64];

		snprintf(sh, sizeof(sh), "exec %s 2>%s/restart.log", line + 2,
			 dir);
		execl("/bin/sh", "sh", "-c", sh, (char *)NULL);
		_exit(127);
	}
	d2 = d;
	d2.pid = pid;
	for (rc = -1; rc && waitpid(pid, NULL, WNOHANG) == 0;) {
		rc = td_status(&d2, &st2);
		if (rc)
			usleep(20000);
	}
	t_ok(rc);
	t_assert_eq(st2.pid, pid);
	t_assert(st2.cost_host_bw_profile ==
		 (uint64_t)m.bandwidth[POL_TIER_HOST]);
	printf("restarted kvmmd: host bandwidth %.3f GB/s (was %.3f), from %s\n",
	       st2.cost_host_bw_profile / 1e9, st.cost_host_bw_profile / 1e9,
	       cal);
	t_assert_eq(td_stop(&d2), 0);

	/* a daemon without a model (--telemetry off) */
	t_ok(td_start(&d, off));
	rc = run(dir,
		 "PATH= %s/bin/kvmmctl --socket %s calibrate --tiny --out %s",
		 dir, d.sock, cal);
	t_assert_eq(rc, 0);
	snprintf(
		expect, sizeof(expect),
		"kvmmd (pid %u) reports no cost model: it runs with --telemetry off",
		d.pid);
	t_assert(strstr(out, expect));
	t_assert(!strstr(out, "host_bandwidth"));
	snprintf(expect, sizeof(expect), "  %s --foreground ", kvmmd);
	copy_line(expect, line, sizeof(line));
	t_assert(strstr(line,
			" --socket-mode 0600 --telemetry auto --profile "));
	t_assert(!strstr(line, "--telemetry off")); /* dropped */
	t_assert_eq(td_stop(&d), 0);

	printf("ok\n");
	return 0;
}
