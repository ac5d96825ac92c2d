// SPDX-License-Identifier: MIT
/*
 * Built with -fsanitize=thread by tests/lib-tsan-lend.sh, with libkvmm's
 * sources: the map-ahead thread answering kvmmd's requests for blocks
 * ahead (ABI 1.20, lend.c's kc_give_ahead_ring()) while the engine's
 * thread extends over the ring and ends steps.  Two connections of this
 * process are two sessions of one uid: B (map-ahead 2) holds the quota
 * of $KVMM_SOCKET's kvmmd (32 blocks of 4 pages of 64 KiB: 8 sequences
 * of 2 blocks, 2 ahead each) and a thread of it grows one of them token
 * by token in 1 ms steps; A extends a sequence by 2 blocks, three times,
 * which kvmmd serves from B's blocks ahead, asked back.  Exit 0, or 1
 * with a reason (and ThreadSanitizer's own exit status when it reported
 * a race).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/lend.h"

#define NSEQ 8

static struct kvmm_conn *cb;
static struct kvmm_region *rb;
static uint32_t sb[NSEQ];
static int stop; /* atomics */

static void *engine(void *arg)
{
	uint32_t len = 2 * LD_TPB - 10;
	int err = 0;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		t_ok(kvmm_step_begin(cb));
		/* into its blocks ahead, past them once they went: short
		 * then, which is no failure here */
		if (!err && len < 8 * LD_TPB) {
			err = kvmm_seq_extend(rb, sb[0], ++len);
			if (err && err != -EDQUOT && err != -ENOMEM)
				t_fail("B's extend: %d", err);
		}
		usleep(1000);
		t_ok(kvmm_step_end(cb));
	}
	return NULL;
}

int main(void)
{
	struct kvmm_conn *ca;
	struct kvmm_region *ra;
	struct kvmm_stats st;
	pthread_t th;
	uint32_t sa;

	ld_connect(2, &cb, &rb);
	for (int i = 0; i < NSEQ; i++) {
		t_ok(kvmm_seq_open(rb, &sb[i]));
		t_ok(kvmm_seq_extend(rb, sb[i], 2 * LD_TPB - 10));
	}
	usleep(100 * 1000); /* the map-ahead thread fills the quota */
	t_assert(!pthread_create(&th, NULL, engine, NULL));
	ld_connect(0, &ca, &ra);
	for (int round = 0; round < 3; round++) {
		t_ok(kvmm_seq_open(ra, &sa));
		t_ok(kvmm_seq_extend(ra, sa, 2 * LD_TPB - 5));
		t_ok(kvmm_seq_close(ra, sa));
		/* B's map-ahead thread takes them back once its hold ends */
		usleep(300 * 1000);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	t_assert(!pthread_join(th, NULL));
	st = ld_stats(cb);
	printf("B gave %llu blocks on request\n",
	       (unsigned long long)st.blocks_lent_on_request);
	t_assert(st.blocks_lent_on_request >= 2);
	kvmm_disconnect(ca);
	for (int i = 0; i < NSEQ; i++)
		t_ok(kvmm_seq_close(rb, sb[i]));
	kvmm_disconnect(cb);
	return 0;
}
