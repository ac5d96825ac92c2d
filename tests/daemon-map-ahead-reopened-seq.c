// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * The map-ahead thread's extend of a sequence that the engine closed
 * while the thread waited for the sequence's parked extend to be
 * collected is not sent, not even when kvmmd has reopened the slot for
 * the engine's kvmm_seq_open() and libkvmm has not marked it open yet.
 *
 * kc_fetch() waits out another thread's collect with sock_lock let go;
 * the engine's extend it waited for failed (-EDQUOT, parked for the
 * quota), the engine closed the sequence and opened a new one in the
 * same slot, and the thread's extend went out in between, after
 * SEQ_OPEN's reply and before kvmm_seq_open() set the slot open here.
 * kvmmd backed blocks of the new sequence that the reply, finding no
 * sequence, did not map: the engine's first extend of it was sent only
 * the blocks above and answered -ENODATA; when the thread's extend
 * parked instead, kvmmd marked the new sequence extending with no
 * thread here collecting it, and the engine's extend was -EBUSY
 * (tests/daemon-fuzz phase 4 with revocations, seed 1: "an extend of a
 * fresh sequence answered -EBUSY right after another sequence's extend
 * failed -EDQUOT and was closed", and its -ENODATA twin).
 *
 * The interleaving is forced: the sequence is marked collecting while
 * the thread is kicked, so it waits in kc_seq_wait_collect() (found in
 * /proc: blocked on the collect condition); the mark goes without a
 * broadcast, the sequence is closed and SEQ_OPEN reopens the slot in
 * kvmmd alone, as kvmm_seq_open() does before it takes the lock; then
 * the thread is woken and runs until it sleeps in epoll_wait().  kvmmd
 * must hold no block of the new sequence, and once the slot is marked
 * open here as kvmm_seq_open() marks it, its first extend succeeds.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/client_seq.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define TPB TR_TPB
#define PPB 4 /* 2 layers, K and V */

/*
 * Is a thread of this process in the system call nr, on an address in
 * [lo, hi) when hi is not 0 (/proc/self/task/T/syscall: the number, then
 * the arguments in hex)?
 */
static bool thread_in(long nr, uintptr_t lo, uintptr_t hi)
{
	struct dirent *de;
	bool found = false;
	DIR *dir = opendir("/proc/self/task");

	t_assert(dir);
	while (!found && (de = readdir(dir))) {
		char path[300], line[256];
		unsigned long long arg0 = 0;
		long n = -1;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/syscall",
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f) &&
		    sscanf(line, "%ld %llx", &n, &arg0) >= 1)
			found = n == nr && (!hi || (arg0 >= lo && arg0 < hi));
		fclose(f);
	}
	closedir(dir);
	return found;
}

static bool in_epoll_wait(void)
{
#ifdef SYS_epoll_wait
	if (thread_in(SYS_epoll_wait, 0, 0))
		return true;
#endif
	return thread_in(SYS_epoll_pwait, 0, 0);
}

/* Poll cond() for up to 5 s. */
static void wait_until(bool (*cond)(void *), void *arg, const char *what)
{
	for (int i = 0; i < 5000; i++) {
		if (cond(arg))
			return;
		usleep(1000);
	}
	t_fail("the map-ahead thread never %s", what);
}

static bool waits_for_collect(void *arg)
{
	struct kvmm_conn *c = arg;
	uintptr_t cv = (uintptr_t)&c->collect_cond;

	return thread_in(SYS_futex, cv, cv + sizeof(c->collect_cond));
}

static bool sleeps(void *arg)
{
	(void)arg;
	return in_epoll_wait();
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "reopen" }; /* 1 ahead */
	struct kvmm_region_opts ro = tr_small_region;
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_seq_open_reply rep = { 0 };
	struct kvmm_status_reply st;
	uint64_t allocated;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;
	struct kc_seq *q;
	uint32_t seq;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	cs_open(&co, &ro, &c, &r, &seq);
	wait_until(sleeps, NULL, "slept");

	/* as if the engine's extend of seq waited to be collected: the
	 * thread, kicked, waits for it in kc_fetch() */
	pthread_mutex_lock(&c->lock);
	r->seqs[seq].collecting = true;
	kc_mapahead_kick(c);
	pthread_mutex_unlock(&c->lock);
	wait_until(waits_for_collect, c, "waited for the collect");

	/* the collect ended (the thread is not woken yet); the engine
	 * closes the sequence, and kvmm_seq_open()'s SEQ_OPEN reopens the
	 * slot in kvmmd before it is marked open here */
	pthread_mutex_lock(&c->lock);
	r->seqs[seq].collecting = false;
	pthread_mutex_unlock(&c->lock);
	t_ok(kvmm_seq_close(r, seq));
	t_ok(td_status(&d, &st));
	allocated = st.pages_allocated;
	ref.region_id = r->id;
	t_ok(kc_request(c, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), &rep,
			sizeof(rep), NULL));
	t_assert_eq(rep.seq_id, seq);

	/* the thread goes on, and sleeps again */
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->collect_cond);
	pthread_mutex_unlock(&c->lock);
	wait_until(sleeps, NULL, "slept again");
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_allocated, allocated); /* nothing backed */

	/* kvmm_seq_open() marks the slot open: the first extend is whole */
	pthread_mutex_lock(&c->lock);
	q = &r->seqs[seq];
	q->block_pages = calloc(r->max_blocks, sizeof(*q->block_pages));
	t_assert(q->block_pages);
	q->open = true;
	q->gen = rep.seq_gen;
	q->len = 0;
	q->backed = 0;
	pthread_mutex_unlock(&c->lock);
	t_ok(kvmm_seq_extend(r, seq, TPB));
	t_assert_eq(kvmm_seq_len(r, seq), TPB);
	memset((void *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0), 0x5a, 65536);
	t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, &st));
	td_stop_ok(&d);
	return T_PASS;
}
