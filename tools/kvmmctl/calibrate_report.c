// SPDX-License-Identifier: MIT
/*
 * After `kvmmctl --socket PATH calibrate`: how the daemon's cost model
 * compares with the profile just measured, and how to adopt it.
 *
 * ADMIN_STATUS reports the host and NVMe bandwidths of kvmmd's --profile
 * model as telemetry has corrected them and as the profile gave them
 * (kvmm/include/kvmm/uapi.h); the new profile is read with the policy's
 * own loader, pol_cost_load(), so a file kvmmd would refuse is reported
 * here rather than at the next start.  The rates kvmmd does not report
 * (GPU copy bandwidth, latencies, msa_alpha) are listed from the profile
 * alone.
 *
 * kvmmd reads --profile only at start, so adopting the profile is a
 * restart.  The command printed is kvmmd's own command line from
 * /proc/PID/cmdline (its binary from /proc/PID/exe) with any --profile
 * replaced by the new file, so the restarted daemon keeps its other
 * options; when that is not readable (another user's or another pid
 * namespace's daemon) it says so and prints the option alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/policy/cost_model.h"
#include "tools/kvmmctl/kvmmctl.h"

#define CMDLINE_MAX 65536

/* Print s as one shell word (single-quoted when it needs to be). */
static void shell_word(const char *s)
{
	if (*s &&
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789_-+=/.,:@%") == strlen(s)) {
		fputs(s, stdout);
		return;
	}
	putchar('\'');
	for (; *s; s++)
		if (*s == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*s);
	putchar('\'');
}

/* The whole of /proc/pid/NAME (NUL-separated for cmdline); -errno. */
static ssize_t read_proc(uint32_t pid, const char *name, char *buf, size_t len)
{
	char path[64];
	size_t got = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/%s", pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got < len && (n = read(fd, buf + got, len - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			n = -errno;
			close(fd);
			return n;
		}
		got += (size_t)n;
	}
	close(fd);
	return got == len ? -E2BIG : (ssize_t)got;
}

/* Is arg (one of kvmmd's) the long option name, alone or "=value"? */
static bool is_option(const char *arg, const char *name, bool *with_value)
{
	size_t n = strlen(name);

	if (strncmp(arg, "--", 2) || strncmp(arg + 2, name, n))
		return false;
	*with_value = arg[2 + n] == '=';
	return !arg[2 + n] || *with_value;
}

/* /proc/pid/exe without " (deleted)" (a rebuilt binary), or false. */
static bool daemon_exe(uint32_t pid, char *buf, size_t len)
{
	static const char deleted[] = " (deleted)";
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	n = readlink(path, buf, len - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	if ((size_t)n > sizeof(deleted) - 1 &&
	    !strcmp(buf + n - (sizeof(deleted) - 1), deleted))
		buf[n - (sizeof(deleted) - 1)] = '\0';
	return true;
}

/*
 * kvmmd's command line with --profile (and, when it runs without a model,
 * --telemetry) dropped, then the new options.  -errno if the command line
 * cannot be read or is not kvmmd's.
 */
static int print_restart(uint32_t pid, const char *profile, bool no_model)
{
	static char args[CMDLINE_MAX];
	char exe[PATH_MAX];
	ssize_t len = read_proc(pid, "cmdline", args, sizeof(args));
	const char *base, *a;

	if (len <= 0)
		return len ? (int)len : -ESRCH;
	args[len - 1] = '\0';
	base = strrchr(args, '/');
	base = base ? base + 1 : args;
	if (strncmp(base, "kvmmd", 5))
		return -ESRCH; /* that pid is not a kvmmd seen from here */
	printf("  kill -TERM %u && while kill -0 %u 2>/dev/null; do sleep 0.1; done\n  ",
	       pid, pid);
	/* argv[0] may be relative to the directory kvmmd started in */
	shell_word(daemon_exe(pid, exe, sizeof(exe)) ? exe : args);
	for (a = args + strlen(args) + 1; a < args + len; a += strlen(a) + 1) {
		bool with_value;

		if (is_option(a, "profile", &with_value) ||
		    (no_model && is_option(a, "telemetry", &with_value))) {
			if (!with_value && a + strlen(a) + 1 < args + len)
				a += strlen(a) + 1; /* and its value */
			continue;
		}
		putchar(' ');
		shell_word(a);
	}
	if (no_model)
		fputs(" --telemetry auto", stdout);
	fputs(" --profile ", stdout);
	shell_word(profile);
	putchar('\n');
	return 0;
}

/* One bandwidth row: kvmmd now and by its profile, the new profile's. */
static void print_bw(const char *key, uint64_t now, uint64_t profile,
		     double new_bw, const char *how)
{
	printf("  %-15s kvmmd %.3f GB/s (its profile %.3f GB/s), new %.3f GB/s %s, %.3fx kvmmd's\n",
	       key, now / 1e9, profile / 1e9, new_bw / 1e9, how,
	       now ? new_bw / now : 0.0);
}

int calibrate_report(struct kvmmctl_ctx *ctx, const char *path)
{
	struct kvmm_status_reply st = { 0 };
	struct pol_cost_model m;
	char file[PATH_MAX], msg[256] = "";
	struct kvmm_conn *c;
	bool no_model;
	int err;

	if (!realpath(path, file)) {
		err = -errno;
		fprintf(stderr, "kvmmctl: calibrate: %s: %s\n", path,
			strerror(-err));
		return err;
	}
	err = pol_cost_load(file, &m, msg, sizeof(msg));
	if (err) {
		fprintf(stderr, "kvmmctl: calibrate: %s would not load: %s\n",
			file, msg[0] ? msg : strerror(-err));
		return err;
	}
	err = kvmmctl_connect(ctx, &c);
	if (err)
		return err;
	err = kvmmctl_fetch_status(c, &st, NULL, NULL);
	kvmm_disconnect(c);
	if (err) {
		fprintf(stderr, "kvmmctl: calibrate: %s\n",
			kvmmctl_strerror(ctx, err));
		return err;
	}
	no_model = !st.cost_host_bw;
	if (no_model) {
		printf("kvmmd (pid %u) reports no cost model: it runs with --telemetry off, so it reads no --profile and plans restores with the built-in reference\n",
		       st.pid);
	} else {
		printf("kvmmd (pid %u) cost model compared with %s:\n", st.pid,
		       file);
		print_bw("host_bandwidth", st.cost_host_bw,
			 st.cost_host_bw_profile, m.bandwidth[POL_TIER_HOST],
			 "measured");
		print_bw("nvme_bandwidth", st.cost_nvme_bw,
			 st.cost_nvme_bw_profile, m.bandwidth[POL_TIER_NVME],
			 "from the base, not measured");
		printf("  %-15s %llu restores folded into kvmmd's rates since it started\n",
		       "observations", (unsigned long long)st.cost_transfers);
	}
	printf("  %-15s gpu_bandwidth %.3f GB/s, gpu_latency %.3f us, host_latency %.3f us, msa_alpha %.4f (kvmmd does not report these)\n",
	       "also measured", m.bandwidth[POL_TIER_GPU] / 1e9,
	       m.latency[POL_TIER_GPU] * 1e6, m.latency[POL_TIER_HOST] * 1e6,
	       m.msa_alpha);
	printf("to adopt it, restart kvmmd with --profile%s (a running kvmmd keeps the model it started with):\n",
	       no_model ? " and telemetry on" : "");
	err = print_restart(st.pid, file, no_model);
	if (err) {
		printf("  kvmmd ... --profile ");
		shell_word(file);
		printf("\n  (with kvmmd's other options: its command line, /proc/%u/cmdline, is not readable here: %s)\n",
		       st.pid, strerror(-err));
	}
	return 0;
}
