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
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmmd/kvmmd.h"
#include "tests/lib/test.h"

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
