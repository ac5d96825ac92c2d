// SPDX-License-Identifier: MIT
/*
 * Closing the fds clients send, off the event loop.  No command takes an
 * fd, so kvmmd closes any a request carries; but the last close of a
 * socket with SO_LINGER set and data still unsent waits for the linger
 * time, which the sender chose: done on the loop, one message stalled
 * every client for as long (found by a review: 5 s for a NOP).  So a
 * socket's linger is turned off first (its close resets the connection
 * at once: the sender gave it away), and one thread of the process
 * closes the fds in the order they came, for the kinds whose close may
 * still wait (a file on a FUSE or NFS mount flushes).  The thread is
 * started at the first use and never stopped (it idles on a condition
 * variable, and exit takes it down with anything it still holds).  Its
 * queue is bounded (KD_CLOSER_MAX): a close that blocks it must not let
 * fds pile up until kvmmd's fd table is full (then the kernel drops a
 * message's fds itself, in the loop's receive; found by a review),
 * so past it they are closed on the loop.
 */
#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/kvmmd.h"
#include "vmm/vmm.h"

#define KD_CLOSER_MAX 1024

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

/* A socket's close resets the connection instead of waiting for its
 * unsent data (SO_LINGER on, time 0); other fds are left as they are. */
static void no_linger(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int type;
	socklen_t len = sizeof(type);

	if (!getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len))
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

void kd_close_client_fds(const int *fds, unsigned int n)
{
	bool queued = false;

	if (!n)
		return;
	for (unsigned int i = 0; i < n; i++)
		no_linger(fds[i]);
	pthread_once(&closer.once, closer_start);
	pthread_mutex_lock(&closer.lock);
	if (closer.running && closer.n + n <= KD_CLOSER_MAX &&
	    closer.n + n > closer.cap) {
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
	if (closer.running && closer.n + n <= KD_CLOSER_MAX &&
	    closer.n + n <= closer.cap) {
		memcpy(closer.fds + closer.n, fds, n * sizeof(*fds));
		closer.n += n;
		pthread_cond_signal(&closer.more);
		queued = true;
	}
	pthread_mutex_unlock(&closer.lock);
	if (!queued) /* no thread, no memory, or the queue is full */
		for (unsigned int i = 0; i < n; i++)
			close(fds[i]);
}
