// SPDX-License-Identifier: MIT
/*
 * Closing the fds clients send, off the event loop.  No command takes an
 * fd, so kvmmd closes any a request carries; but the last close of a
 * socket with SO_LINGER set and data still unsent waits for the linger
 * time, which the sender chose: done on the loop, one message stalled
 * every client for as long (found by a review: 5 s for a NOP).  One
 * thread of the process closes them in the order they came; it is
 * started at the first use and never stopped (it idles on a condition
 * variable, and exit takes it down with anything it still holds).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/kvmmd.h"
#include "vmm/vmm.h"

static struct {
	pthread_once_t once;
	pthread_mutex_t lock;
	pthread_cond_t more;
	bool running;
	int *fds; /* queued, oldest first */
	size_t n, cap;
} closer = {
	.once = PTHREAD_ONCE_INIT,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.more = PTHREAD_COND_INITIALIZER,
};

static void *closer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&closer.lock);
	for (;;) {
		while (!closer.n)
			pthread_cond_wait(&closer.more, &closer.lock);
		int fd = closer.fds[0];

		memmove(closer.fds, closer.fds + 1,
			--closer.n * sizeof(closer.fds[0]));
		pthread_mutex_unlock(&closer.lock);
		close(fd); /* may wait for a linger time */
		pthread_mutex_lock(&closer.lock);
	}
	return NULL;
}

static void closer_start(void)
{
	pthread_attr_t attr;
	pthread_t t;

	if (pthread_attr_init(&attr))
		return;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	closer.running = !pthread_create(&t, &attr, closer_main, NULL);
	pthread_attr_destroy(&attr);
	if (!closer.running)
		vmm_log(VMM_LOG_WARN,
			"no thread to close the fds clients send: closing them on the loop");
}

void kd_close_client_fds(const int *fds, unsigned int n)
{
	bool queued = false;

	if (!n)
		return;
	pthread_once(&closer.once, closer_start);
	pthread_mutex_lock(&closer.lock);
	if (closer.running && closer.n + n > closer.cap) {
		size_t cap = closer.cap ? closer.cap : 64;
		int *p;

		while (cap < closer.n + n)
			cap *= 2;
		p = realloc(closer.fds, cap * sizeof(*p));
		if (p) {
			closer.fds = p;
			closer.cap = cap;
		}
	}
	if (closer.running && closer.n + n <= closer.cap) {
		memcpy(closer.fds + closer.n, fds, n * sizeof(*fds));
		closer.n += n;
		pthread_cond_signal(&closer.more);
		queued = true;
	}
	pthread_mutex_unlock(&closer.lock);
	if (!queued) /* no thread, or no memory for the queue */
		for (unsigned int i = 0; i < n; i++)
			close(fds[i]);
}
