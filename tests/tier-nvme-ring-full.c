// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * NVMe tier: the completion thread's ring-wait counters (ring_wait_ns,
 * and of it ring_wait_full_ns, the waits begun with queue_depth payload
 * I/Os in flight), which bench/nvme-tier reports as the share of a run
 * the ring was full as the tier sees it, against the disk's busy share.
 *   1. One block (one I/O) in flight at a time (batches of 1, queue
 *      depth 4): the thread waits (ring_wait_ns grows) but never with
 *      the queue full (ring_wait_full_ns does not move).
 *   2. Six threads read their blocks back at once in batches of 1 to 24,
 *      more owners than the queue holds blocks, five rounds: every block
 *      comes back byte-identical with its layout id and result 0, the
 *      reads add up, and the queue was full for part of the time:
 *      0 < ring_wait_full_ns <= ring_wait_ns <= the phase's wall time
 *      (one thread waits at a time).
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define AREA (4096 + PAYLOAD) /* headroom + payload */
#define NTHREADS 6
#define PER_THREAD 24
#define NBLOCKS (NTHREADS * PER_THREAD)
#define QD 4
#define ROUNDS 5

struct reader {
	pthread_t thread;
	pthread_barrier_t *start;
	struct tier_nvme *t;
	int id;
	unsigned int batch;
	unsigned char *src; /* PER_THREAD areas, as written */
	unsigned char *dst; /* PER_THREAD areas, read back */
	uint32_t slots[PER_THREAD];
	int failures; /* ios whose result or bytes were not the written ones */
};

static uint64_t hash_of(int id, int j)
{
	return 0x9100 + (uint64_t)id * 100 + (uint64_t)j;
}

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		memcpy(p + i, &seed, 8);
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Read blocks [from, from + n) of r's into dst and check each. */
static void read_check(struct reader *r, int from, unsigned int n)
{
	struct tier_nvme_io io[PER_THREAD];

	for (unsigned int k = 0; k < n; k++) {
		int b = from + (int)k;

		memset(r->dst + (size_t)b * AREA + 4096, 0, PAYLOAD);
		io[k] = (struct tier_nvme_io){
			.hash = hash_of(r->id, b),
			.slot = r->slots[b],
			.buf = r->dst + (size_t)b * AREA + 4096,
			.headroom = true,
		};
	}
	tier_nvme_read_batch(r->t, io, n);
	for (unsigned int k = 0; k < n; k++) {
		int b = from + (int)k;

		r->failures += io[k].result != 0 || io[k].length != PAYLOAD ||
			       io[k].layout_id != (uint64_t)r->id + 1 ||
			       memcmp(r->dst + (size_t)b * AREA + 4096,
				      r->src + (size_t)b * AREA + 4096,
				      PAYLOAD) != 0;
	}
}

/* ROUNDS times every block, back to front in batches of r->batch. */
static void *read_all(void *arg)
{
	struct reader *r = arg;

	pthread_barrier_wait(r->start);
	for (int round = 0; round < ROUNDS; round++) {
		for (int end = PER_THREAD; end > 0;) {
			unsigned int n = (unsigned int)end < r->batch ?
						 (unsigned int)end :
						 r->batch;

			end -= (int)n;
			read_check(r, end, n);
		}
	}
	return NULL;
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	static const unsigned int batches[NTHREADS] = { 1, 2, 4, 7, 12, 24 };
	size_t bytes = (size_t)NTHREADS * 2 * PER_THREAD * AREA;
	struct tier_nvme_stats s0, s1;
	struct reader r[NTHREADS];
	pthread_barrier_t start;
	unsigned char *mem = NULL;
	struct tier_nvme *t;
	uint64_t t0, wall;
	char path[256];

	if (!dir)
		dir = "/var/tmp";
	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-ring-full-%d", dir,
		 getpid());
	mem = t_page_alloc(bytes);
	struct tier_nvme_config cfg = {
		.path = path,
		.capacity_bytes = NT_CAPACITY(NBLOCKS, PAYLOAD),
		.payload_bytes = PAYLOAD,
		.queue_depth = QD,
		.reg_base = mem,
		.reg_len = bytes,
		.reformat = true,
	};
	t = nt_open(cfg, NULL, NULL);
	t_assert_eq(pthread_barrier_init(&start, NULL, NTHREADS), 0);

	/* every thread's blocks written, one batch each */
	for (int i = 0; i < NTHREADS; i++) {
		struct tier_nvme_io io[PER_THREAD];

		r[i] = (struct reader){
			.start = &start,
			.t = t,
			.id = i,
			.batch = batches[i],
			.src = mem + (size_t)i * 2 * PER_THREAD * AREA,
		};
		r[i].dst = r[i].src + (size_t)PER_THREAD * AREA;
		for (int b = 0; b < PER_THREAD; b++) {
			fill(r[i].src + (size_t)b * AREA + 4096, PAYLOAD,
			     hash_of(i, b));
			io[b] = (struct tier_nvme_io){
				.hash = hash_of(i, b),
				.layout_id = (uint64_t)i + 1,
				.buf = r[i].src + (size_t)b * AREA + 4096,
				.length = PAYLOAD,
				.headroom = true,
			};
		}
		t_assert_eq(tier_nvme_write_batch(t, io, PER_THREAD), 0);
		for (int b = 0; b < PER_THREAD; b++)
			r[i].slots[b] = io[b].slot;
	}

	/* 1. one block (one I/O) in flight at a time: never full */
	tier_nvme_get_stats(t, &s0);
	for (int b = 0; b < PER_THREAD; b++)
		read_check(&r[0], b, 1);
	tier_nvme_get_stats(t, &s1);
	t_assert_eq(r[0].failures, 0);
	t_assert_eq(s1.reads - s0.reads, PER_THREAD);
	t_assert(s1.ring_wait_ns > s0.ring_wait_ns);
	t_assert_eq(s1.ring_wait_full_ns, s0.ring_wait_full_ns);

	/* 2. six owners, up to 24 blocks each, a queue of 4 */
	tier_nvme_get_stats(t, &s0);
	t0 = now_ns();
	for (int i = 0; i < NTHREADS; i++)
		t_assert_eq(pthread_create(&r[i].thread, NULL, read_all, &r[i]),
			    0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(r[i].thread, NULL);
	wall = now_ns() - t0;
	tier_nvme_get_stats(t, &s1);
	for (int i = 0; i < NTHREADS; i++)
		t_assert_eq(r[i].failures, 0);
	t_assert_eq(s1.reads - s0.reads, (uint64_t)ROUNDS * NBLOCKS);
	t_assert_eq(s1.read_errors, 0);
	t_assert_eq(s1.checksum_failures, 0);
	t_assert(s1.ring_wait_full_ns > s0.ring_wait_full_ns);
	t_assert(s1.ring_wait_full_ns - s0.ring_wait_full_ns <=
		 s1.ring_wait_ns - s0.ring_wait_ns);
	t_assert(s1.ring_wait_ns - s0.ring_wait_ns <= wall);

	tier_nvme_close(t);
	pthread_barrier_destroy(&start);
	unlink(path);
	free(mem);
	return T_PASS;
}
