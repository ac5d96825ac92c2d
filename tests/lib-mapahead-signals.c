// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * libkvmm's map-ahead thread takes no process signal.  An engine connects
 * (map-ahead on) with no signal blocked, then blocks SIGTERM and waits for
 * it with sigwait() in a thread of its own, the usual design.  Every
 * thread of the process blocks SIGTERM then (/proc/self/task/TID/status:
 * SigBlk), and a SIGTERM sent to the process reaches the sigwait() thread.
 * The map-ahead thread used to inherit the caller's mask at connect: the
 * kernel could hand it the signal, whose default action killed the
 * engine (exit status 143) instead of letting it shut down.
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

static sigset_t term;

static void *waiter(void *arg)
{
	int sig = 0;

	(void)arg;
	if (sigwait(&term, &sig))
		return NULL;
	return (void *)(long)sig;
}

/* SigBlk of thread tid into *mask: 0, or -1 when unreadable. */
static int blocked_mask(const char *tid, unsigned long long *mask)
{
	char path[300], line[256];
	int ret = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigBlk: %llx", mask) == 1)
			ret = 0;
	fclose(f);
	return ret;
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_stats st = { .size = sizeof(st) };
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t seq;
	struct td_daemon d;
	struct dirent *e;
	int threads = 0;
	pthread_t t;
	void *got;
	DIR *dir;

	cc_start(&d, NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	/*
	 * Until the map-ahead thread runs, glibc keeps every signal blocked
	 * in it (it sets the mask it inherits at its start): wait until it
	 * has mapped a block ahead, so it is past that (the first extend
	 * maps one ahead itself, the second, within it, kicks the thread).
	 */
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, CC_TPB));
	t_ok(kvmm_seq_extend(r, seq, 2 * CC_TPB));
	for (int i = 0; i < 10000 && !st.map_ahead_blocks; i++) {
		t_ok(kvmm_get_stats(c, &st));
		usleep(1000);
	}
	t_assert_eq(st.map_ahead_blocks, 1);
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	t_ok(pthread_sigmask(SIG_BLOCK, &term, NULL));

	dir = opendir("/proc/self/task");
	t_assert(dir != NULL);
	while ((e = readdir(dir))) {
		unsigned long long mask;

		if (e->d_name[0] == '.')
			continue;
		t_ok(blocked_mask(e->d_name, &mask));
		if (!(mask & (1ull << (SIGTERM - 1))))
			t_fail("thread %s does not block SIGTERM (SigBlk %llx)",
			       e->d_name, mask);
		threads++;
	}
	closedir(dir);
	t_assert(threads >= 2); /* main, map-ahead */

	/* (not before: a thread in sigwait() unblocks what it waits for) */
	t_ok(pthread_create(&t, NULL, waiter, NULL));
	t_ok(kill(getpid(), SIGTERM));
	t_ok(pthread_join(t, &got));
	t_assert_eq((long)got, SIGTERM);
	kvmm_disconnect(c);
	cc_stop(&d);
	return 0;
}
