/* SPDX-License-Identifier: MIT */
/*
 * Lending under threads (tests/lib-mapahead-lend-threads.c, and under
 * ThreadSanitizer tests/lib-tsan-lend.sh): LT_THREADS threads of one
 * connection with 2 blocks mapped ahead each grow a sequence each, by
 * LT_STEP << (thread) tokens at a time (the first slowest), to LT_BLOCKS
 * blocks, writing a pattern into every token they add; once all are done
 * they check it all, truncate to 0 and go again, LT_ROUNDS times.
 * kvmmd's quota is LT_THREADS * LT_BLOCKS blocks: the blocks needed,
 * exactly, so the slower threads' last extends find the quota held by
 * blocks mapped ahead of the sequences already grown, and take them back
 * (lend.c) while the others' ring extends, their fetches and the
 * map-ahead thread run.  Every extend must succeed and every token keep
 * its bytes.
 */
#ifndef KVMM_TESTS_LEND_THREADS_H
#define KVMM_TESTS_LEND_THREADS_H

#include <pthread.h>

#include "tests/lib/lend.h"

#define LT_THREADS 4
#define LT_BLOCKS 8
#define LT_ROUNDS 3
#define LT_STEP 32

static pthread_barrier_t lt_done;

struct lt_arg {
	struct kvmm_region *r;
	uint32_t seq;
	uint32_t idx;
	int err; /* the first failed extend's, or -EIO for a bad token */
	uint32_t at; /* the length it failed at */
};

static void *lt_worker(void *p)
{
	struct lt_arg *a = p;

	for (uint32_t round = 0; round < LT_ROUNDS; round++) {
		uint32_t tag = round * LT_THREADS + a->idx, len = 0;
		uint32_t step = LT_STEP << a->idx;

		while (!a->err && len < LT_BLOCKS * LD_TPB) {
			int err = kvmm_seq_extend(a->r, a->seq, len + step);

			if (err) {
				a->err = err;
				a->at = len + step;
				break;
			}
			ld_fill(a->r, a->seq, len, len + step, tag);
			len += step;
			if (kvmm_seq_len(a->r, a->seq) != len) {
				a->err = -EIO;
				a->at = len;
			}
		}
		/* the grown keep their blocks ahead until all are done */
		pthread_barrier_wait(&lt_done);
		if (!a->err && ld_intact(a->r, a->seq, len, tag) != len) {
			a->err = -EIO;
			a->at = ld_intact(a->r, a->seq, len, tag);
		}
		if (!a->err)
			a->err = kvmm_seq_truncate(a->r, a->seq, 0);
		pthread_barrier_wait(&lt_done);
	}
	return NULL;
}

/* The extends lt_run() makes. */
static inline uint64_t lt_extends(void)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < LT_THREADS; i++)
		n += LT_ROUNDS * (LT_BLOCKS * LD_TPB / (LT_STEP << i));
	return n;
}

/* Run the threads on c (map-ahead 2); returns, or the test fails. */
static inline void lt_run(struct kvmm_conn *c, struct kvmm_region *r)
{
	struct lt_arg a[LT_THREADS];
	pthread_t t[LT_THREADS];

	for (uint32_t i = 0; i < LT_THREADS; i++) {
		a[i] = (struct lt_arg){ .r = r, .idx = i };
		t_ok(kvmm_seq_open(r, &a[i].seq));
	}
	pthread_barrier_init(&lt_done, NULL, LT_THREADS);
	for (uint32_t i = 0; i < LT_THREADS; i++)
		t_assert_eq(pthread_create(&t[i], NULL, lt_worker, &a[i]), 0);
	for (uint32_t i = 0; i < LT_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&lt_done);
	for (uint32_t i = 0; i < LT_THREADS; i++)
		if (a[i].err)
			t_fail("thread %u: %s at length %u", i,
			       strerror(-a[i].err), a[i].at);
	for (uint32_t i = 0; i < LT_THREADS; i++)
		t_ok(kvmm_seq_close(r, a[i].seq));
	(void)c;
}

#endif
