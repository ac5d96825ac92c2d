// SPDX-License-Identifier: MIT
/*
 * BPF test runs leave no pin roots behind (tests/lib/bpf_pins.h): a run
 * that fails (t_fail() exits) or that the runner's timeout stops
 * (SIGTERM) removes its /sys/fs/bpf/kvmm-NAME-PID; one killed outright
 * (SIGKILL) leaves it, and the next run's sweep removes it since its
 * process is gone, but leaves a root whose process lives and one a live
 * loader holds whatever its name says.  Each run is this binary again
 * (exec: a fresh process, as the runner starts them).
 * Skips (77) without root or BPF.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "tests/lib/bpf_pins.h"
#include "tests/lib/bpf_test.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

/* Telemetry pinned under root, attached to libkvmm's probes (this test
 * fires none of its own); skips if BPF cannot be loaded. */
static struct tel *open_on(const char *root)
{
	static char lib[512];
	const char *targets[] = {
		td_build_path("libkvmm.so.1", lib, sizeof(lib)), NULL
	};
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_BPF,
			      .pin_root = root,
			      .targets = targets,
			      .quiet = true };
	struct tel *t;
	int err = tel_open(&o, &t);

	if (err)
		t_skip("BPF unavailable: %s", strerror(-err));
	return t;
}

/* A run: pins, then fails or waits to be signalled. */
static int child(const char *how)
{
	struct bpf_test b;

	bpf_test_init(&b, "cleanup");
	open_on(b.pin);
	if (!strcmp(how, "fail"))
		t_fail("failing on purpose, pins in %s", b.pin);
	printf("ready\n");
	fflush(stdout);
	pause();
	return 0;
}

/* Start a run (how: fail or wait); its pid once its pins exist, or once
 * it exited (*status). */
static pid_t run(const char *how, int *status)
{
	char line[16] = "";
	int fds[2];
	pid_t pid;
	FILE *f;

	t_assert(!pipe(fds));
	fflush(NULL);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl("/proc/self/exe", "ebpf-pins-cleanup", how, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	t_assert(f);
	if (!fgets(line, sizeof(line), f) || strcmp(line, "ready\n")) {
		t_assert(waitpid(pid, status, 0) == pid);
	}
	fclose(f);
	return pid;
}

static bool exists(const char *path)
{
	struct stat st;

	return !stat(path, &st);
}

int main(int argc, char **argv)
{
	char root[128];
	struct bpf_test b;
	struct tel *t;
	pid_t pid;
	int ws = -1;

	if (argc == 2)
		return child(argv[1]);
	bpf_test_init(&b, "cleanup");
	t = open_on(b.pin); /* can this machine load BPF at all? */

	/* a failing run removes its root at exit */
	pid = run("fail", &ws);
	t_assert(WIFEXITED(ws));
	t_assert_eq(WEXITSTATUS(ws), T_FAIL);
	snprintf(root, sizeof(root), "/sys/fs/bpf/kvmm-cleanup-%d", (int)pid);
	t_assert(!exists(root));
	printf("ok: a failed run removed %s\n", root);

	/* so does one stopped by the runner's SIGTERM */
	pid = run("wait", &ws);
	snprintf(root, sizeof(root), "/sys/fs/bpf/kvmm-cleanup-%d", (int)pid);
	t_assert(exists(root));
	t_assert(!kill(pid, SIGTERM));
	t_assert(waitpid(pid, &ws, 0) == pid);
	t_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM);
	t_assert(!exists(root));
	printf("ok: a run stopped by SIGTERM removed %s\n", root);

	/* one killed outright leaves it to the next run's sweep */
	pid = run("wait", &ws);
	snprintf(root, sizeof(root), "/sys/fs/bpf/kvmm-cleanup-%d", (int)pid);
	t_assert(!kill(pid, SIGKILL));
	t_assert(waitpid(pid, &ws, 0) == pid);
	t_assert(exists(root));
	bpf_pins_sweep();
	t_assert(!exists(root));
	t_assert(exists(b.pin)); /* ours: this process lives */
	printf("ok: the sweep removed %s, left by a killed run\n", root);

	/* a root named for a dead process that a live loader holds stays */
	tel_close(t);
	t = open_on(root);
	bpf_pins_sweep();
	t_assert(exists(root));
	tel_close(t);
	t_assert(!exists(root));
	printf("ok: the sweep leaves a root a loader holds\n");
	return 0;
}
