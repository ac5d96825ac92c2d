/* SPDX-License-Identifier: MIT */
/*
 * Tests that start kvmmd inside the test process (kd_daemon_start, to look
 * at its telemetry and policy state afterwards) and drive it from one
 * client process: the test binary run again with the argument "client".
 */
#ifndef KVMM_TESTS_INPROC_DAEMON_H
#define KVMM_TESTS_INPROC_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmmd/kvmmd.h"
#include "tests/lib/test.h"

/* A fresh directory $TMPDIR/kvmm-NAME-PID (TMPDIR default /tmp) for the
 * socket (rmdir it after). */
static inline void inproc_mkdir(char *dir, size_t len, const char *name)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, len, "%s/kvmm-%s-%d", t && *t ? t : "/tmp", name,
		 (int)getpid());
	t_assert(mkdir(dir, 0700) == 0);
}

/*
 * kvmmd's configuration for these tests, d zeroed for kd_daemon_start():
 * host backend, 64 KiB pages, 64 MiB of GPU memory, in the foreground,
 * telemetry `mode`, its socket in dir and its BPF pins (if any) under
 * /sys/fs/bpf/kvmm-NAME-PID.
 */
static inline void inproc_config(struct kd_daemon *d, struct kd_config *cfg,
				 const char *dir, const char *name,
				 enum tel_mode mode)
{
	kd_config_defaults(cfg);
	snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s/kvmm.sock",
		 dir);
	cfg->backend = VMM_BACKEND_HOST;
	cfg->page_size = 64 * 1024;
	cfg->gpu_mem = 64 << 20;
	cfg->foreground = true;
	cfg->telemetry = mode;
	snprintf(cfg->telemetry_pin_root, sizeof(cfg->telemetry_pin_root),
		 "/sys/fs/bpf/kvmm-%s-%d", name, (int)getpid());
	memset(d, 0, sizeof(*d));
}

static inline void *inproc_loop_thread(void *arg)
{
	kd_daemon_run(arg);
	return NULL;
}

/*
 * Serve d on a thread while "argv0 client" runs against socket, assert
 * the client exited 0, then stop the loop (the timer tick wakes it) and
 * join it: afterwards d is only touched by the caller.
 */
static inline void inproc_run_client(struct kd_daemon *d, const char *socket)
{
	pthread_t th;
	pid_t pid;
	int ws;

	t_assert(pthread_create(&th, NULL, inproc_loop_thread, d) == 0);
	setenv("KVMM_SOCKET", socket, 1);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) { /* exec: a fork of a threaded process may deadlock */
		execl("/proc/self/exe", "client", "client", (char *)NULL);
		_exit(127);
	}
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	t_assert_eq(WEXITSTATUS(ws), 0);
	__atomic_store_n(&d->loop.stop, true, __ATOMIC_RELEASE);
	t_assert(pthread_join(th, NULL) == 0);
}

#endif
