// SPDX-License-Identifier: MIT
/*
 * A loader that starts while tel_pins_remove_stale() removes its pin root
 * waits for it instead of failing: the sweeper holds the root's flock
 * while it removes the root (so no loader takes pins it is removing).  A
 * child process does what the sweeper does, slowed down: takes the
 * flock, holds it 300 ms, removes the root, lets go; a BPF loader opened
 * meanwhile on that root starts on a fresh root once it is gone (in BPF
 * mode; kvmmd --telemetry bpf refused to start before, with -EBUSY).  A
 * root held for good is still refused, after the wait (about 1 s).
 * Skips (77) without root or BPF.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "ebpf/telemetry_shm.h"
#include "tests/lib/bpf_test.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

/* tel_pins_remove_stale(root) taking hold_ms (-1: holding it until
 * killed): 0 in the child, which writes a byte to ready once it holds
 * the root. */
static int slow_sweeper(const char *root, int hold_ms, int ready)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct timespec ts = { hold_ms / 1000, hold_ms % 1000 * 1000000L };

	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB))
		return 2;
	if (write(ready, "x", 1) != 1)
		return 3;
	if (hold_ms < 0)
		pause(); /* held for good */
	nanosleep(&ts, NULL);
	if (tel_pins_remove_all(root))
		return 4;
	close(fd);
	return 0;
}

static pid_t start_sweeper(const char *root, int hold_ms)
{
	int p[2];
	char c;
	pid_t pid;

	t_ok(pipe(p));
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		_exit(slow_sweeper(root, hold_ms, p[1]));
	}
	close(p[1]);
	t_assert(read(p[0], &c, 1) == 1);
	close(p[0]);
	return pid;
}

int main(void)
{
	static char lib[512];
	const char *targets[] = {
		td_build_path("libkvmm.so.1", lib, sizeof(lib)), NULL
	};
	struct bpf_test b;
	struct tel_opts o;
	struct tel *t;
	uint64_t t0, ms;
	pid_t pid;
	int ws, err;

	bpf_test_init(&b, "sweeprace");
	/* libkvmm's probes (this test fires none of its own) */
	o = (struct tel_opts){ .size = sizeof(o),
			       .mode = TEL_MODE_BPF,
			       .pin_root = b.pin,
			       .targets = targets,
			       .quiet = true };
	err = tel_open(&o, &t);
	if (err)
		t_skip("BPF unavailable: %s", strerror(-err));
	tel_close(t);

	/* a stale root under removal: the loader waits, then starts */
	t_assert(mkdir(b.pin, 0755) == 0);
	pid = start_sweeper(b.pin, 300);
	t0 = kvmm_tel_now_ns();
	err = tel_open(&o, &t);
	ms = (kvmm_tel_now_ns() - t0) / 1000000;
	printf("loader during a sweep: %s after %llu ms\n",
	       err ? strerror(-err) : "started", (unsigned long long)ms);
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	t_assert_eq(WEXITSTATUS(ws), 0);
	t_ok(err);
	t_assert_eq(tel_source(t), TEL_SOURCE_BPF);
	t_assert(ms >= 250);
	t_assert(access(tel_pin_dir(t), F_OK) == 0);
	tel_close(t);

	/* a root held for good: refused after the wait */
	t_assert(mkdir(b.pin, 0755) == 0);
	pid = start_sweeper(b.pin, -1);
	t0 = kvmm_tel_now_ns();
	t_assert_eq(tel_open(&o, &t), -EBUSY);
	ms = (kvmm_tel_now_ns() - t0) / 1000000;
	printf("loader on a held root: EBUSY after %llu ms\n",
	       (unsigned long long)ms);
	t_assert(ms >= 900 && ms < 5000);
	kill(pid, SIGKILL);
	t_assert(waitpid(pid, &ws, 0) == pid);
	return 0;
}
