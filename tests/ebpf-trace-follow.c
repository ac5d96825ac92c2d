// SPDX-License-Identifier: MIT
/*
 * Live `kvmmctl trace` follows the pins, not the maps it opened first:
 * a loader pins the known workload's 1009 accesses and a running
 * `kvmmctl --json trace --interval 1000` prints them; while it sleeps
 * (stopped, so the test does not race its interval) the loader is
 * replaced by a fresh one (a kvmmd restart), and its next refresh says
 * so on stderr and prints the new maps' 0 accesses, not the old 1009;
 * then the loader stops for good and the trace ends with exit 1 and a
 * message that the pins are gone, instead of printing frozen numbers.
 * Skips (77) without root or BPF.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/ebpf-common.h"
#include "tests/lib/bpf_test.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

/* The next line of the trace's output (NULL at its end). */
static char *next_line(FILE *f)
{
	static char line[1 << 17];

	return fgets(line, sizeof(line), f);
}

int main(void)
{
	static char err[4096];
	char kvmmctl[512], errpath[128], name[32];
	struct bpf_test b;
	struct tel *t;
	FILE *out, *ef;
	int fds[2], ws;
	char *line;
	size_t n;
	pid_t pid;

	bpf_test_init(&b, "follow");
	t = bpf_test_open(&b);
	ebpf_drive_process(NULL, 0);
	td_build_path("kvmmctl", kvmmctl, sizeof(kvmmctl));
	snprintf(name, sizeof(name), "kvmm-follow-%d.err", (int)getpid());
	td_tmp_path(name, errpath, sizeof(errpath));

	t_assert(!pipe(fds));
	fflush(NULL);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		if (!freopen(errpath, "w", stderr))
			_exit(126);
		close(fds[0]);
		close(fds[1]);
		execl(kvmmctl, "kvmmctl", "--json", "trace", "--interval",
		      "1000", "--count", "10", "--pin-root", b.pin,
		      (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	out = fdopen(fds[0], "r");
	t_assert(out);

	line = next_line(out);
	t_assert(line);
	t_assert(strstr(line, "\"accesses\":1009,"));
	printf("first refresh: 1009 accesses\n");

	/* kvmmd restarts while the trace sleeps */
	t_assert(!kill(pid, SIGSTOP));
	tel_close(t);
	t = bpf_test_open(&b);
	t_assert(!kill(pid, SIGCONT));
	line = next_line(out);
	t_assert(line);
	printf("after the restart: %.80s...\n", line);
	t_assert(strstr(line, "\"accesses\":0,"));

	/* and stops */
	t_assert(!kill(pid, SIGSTOP));
	tel_close(t);
	t_assert(!kill(pid, SIGCONT));
	t_assert(!next_line(out));
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	t_assert_eq(WEXITSTATUS(ws), 1);
	fclose(out);

	ef = fopen(errpath, "r");
	t_assert(ef);
	n = fread(err, 1, sizeof(err) - 1, ef);
	err[n] = 0;
	fclose(ef);
	unlink(errpath);
	printf("its stderr:\n%s", err);
	t_assert(strstr(err, "other maps are pinned in"));
	t_assert(strstr(err, "(kvmmd restarted)"));
	t_assert(strstr(err, "are gone"));
	printf("ok: kvmmctl trace follows a restart and ends when the pins "
	       "go\n");
	return 0;
}
