// SPDX-License-Identifier: MIT
/*
 * NVMe tier: batches from several threads at once share one queue (as
 * kvmmd's two migration workers do).  Four threads write and read back
 * their own blocks in batches of different sizes, with a queue depth
 * smaller than any thread's work, through registered and unregistered
 * memory, with and without headroom (header in line or in its own I/O):
 * every block comes back byte-identical with its layout id, and the
 * counters add up.  Then one slot's payload is corrupted on disk and the
 * threads read everything again at once: that block alone fails with
 * -EBADMSG, is counted once and dropped; every other read is served.
 * Last, two threads write the same hashes in opposite orders at once:
 * each hash is written once and the other writer gets it as a dedup hit
 * (no -EEXIST, no deadlock), as when batches ran one at a time.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define AREA (4096 + PAYLOAD) /* headroom + payload */
#define NTHREADS 4
#define PER_THREAD 16
#define NBLOCKS (NTHREADS * PER_THREAD)

struct worker {
	pthread_t thread;
	pthread_barrier_t *start;
	struct tier_nvme *t;
	int id;
	unsigned int batch;
	bool headroom;
	unsigned char *src; /* PER_THREAD areas */
	unsigned char *dst; /* PER_THREAD areas */
	uint32_t slots[PER_THREAD];
	bool write;
	uint64_t bad_hash; /* expected to fail the read, 0 = none */
	int failures; /* ios whose result was not the expected one */
	int bad_reads;
};

static uint64_t hash_of(int id, int j)
{
	return 0x5000 + (uint64_t)id * 100 + (uint64_t)j;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	size_t skip = w->headroom ? 4096 : 0;

	pthread_barrier_wait(w->start);
	for (int j = 0; j < PER_THREAD; j += (int)w->batch) {
		struct tier_nvme_io io[PER_THREAD];
		unsigned int n = PER_THREAD - j < (int)w->batch ?
					 (unsigned int)(PER_THREAD - j) :
					 w->batch;

		for (unsigned int k = 0; k < n; k++) {
			/* reads go back to front within the thread */
			int b = w->write ? j + (int)k :
					   PER_THREAD - 1 - j - (int)k;

			io[k] = (struct tier_nvme_io){
				.hash = hash_of(w->id, b),
				.layout_id = w->write ? (uint64_t)w->id + 1 : 0,
				.buf = (w->write ? w->src : w->dst) +
				       (size_t)b * AREA + skip,
				.length = w->write ? PAYLOAD : 0,
				.slot = w->write ? 0 : w->slots[b],
				.headroom = w->headroom,
			};
		}
		if (w->write)
			tier_nvme_write_batch(w->t, io, n);
		else
			tier_nvme_read_batch(w->t, io, n);
		for (unsigned int k = 0; k < n; k++) {
			int b = w->write ? j + (int)k :
					   PER_THREAD - 1 - j - (int)k;

			if (w->write) {
				w->slots[b] = io[k].slot;
				w->failures += io[k].result != 0;
			} else if (io[k].hash == w->bad_hash) {
				w->bad_reads += io[k].result == -EBADMSG;
				w->failures += io[k].result != -EBADMSG;
			} else {
				w->failures +=
					io[k].result != 0 ||
					io[k].length != PAYLOAD ||
					io[k].layout_id !=
						(uint64_t)w->id + 1 ||
					memcmp(w->dst + (size_t)b * AREA + skip,
					       w->src + (size_t)b * AREA + skip,
					       PAYLOAD) != 0;
			}
		}
	}
	return NULL;
}

/* Writes the same hashes as its twin, in the other order. */
struct twin {
	pthread_t thread;
	pthread_barrier_t *start;
	struct tier_nvme *t;
	unsigned char *buf; /* 8 payloads */
	bool reverse;
	struct tier_nvme_io io[8];
	int failed;
};

static void *twin_run(void *arg)
{
	struct twin *w = arg;

	for (int k = 0; k < 8; k++) {
		int h = w->reverse ? 7 - k : k;

		w->io[k] = (struct tier_nvme_io){ .hash = 0x7700 + (uint64_t)h,
						  .buf = w->buf +
							 (size_t)h * PAYLOAD,
						  .length = PAYLOAD };
	}
	pthread_barrier_wait(w->start);
	w->failed = tier_nvme_write_batch(w->t, w->io, 8);
	return NULL;
}

/* All threads run one phase together. */
static void phase(struct worker *w, bool write)
{
	for (int i = 0; i < NTHREADS; i++) {
		w[i].write = write;
		if (!write)
			memset(w[i].dst, 0, PER_THREAD * AREA);
		t_assert_eq(pthread_create(&w[i].thread, NULL, run, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(w[i].thread, NULL);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	static const unsigned int batches[NTHREADS] = { 1, 3, 5, 16 };
	char path[256];
	unsigned char *reg = NULL, *unreg = NULL;
	struct tier_nvme *t;
	struct tier_nvme_stats st;
	struct worker w[NTHREADS];
	pthread_barrier_t start;

	if (!dir)
		dir = "/var/tmp";
	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-conc-%d", dir,
		 getpid());
	/* threads 0 and 1 in the registered region, 2 and 3 outside it */
	size_t half = (size_t)2 * 2 * PER_THREAD * AREA;

	reg = t_page_alloc(half);
	unreg = t_page_alloc(half);
	struct tier_nvme_config cfg = {
		.size = sizeof(cfg),
		.path = path,
		.capacity_bytes = NT_CAPACITY(NBLOCKS, PAYLOAD),
		.payload_bytes = PAYLOAD,
		.queue_depth = 3, /* fewer than any thread's blocks */
		.io_bytes = 32 * 1024, /* 2-3 I/Os per block */
		.reg_base = reg,
		.reg_len = half,
		.reformat = true,
	};
	t = nt_open(cfg, NULL, NULL);
	t_assert_eq(pthread_barrier_init(&start, NULL, NTHREADS), 0);
	for (int i = 0; i < NTHREADS; i++) {
		unsigned char *base = (i < 2 ? reg : unreg) +
				      (size_t)(i % 2) * 2 * PER_THREAD * AREA;

		w[i] = (struct worker){
			.start = &start,
			.t = t,
			.id = i,
			.batch = batches[i],
			.headroom = i != 3, /* 3: header apart */
			.src = base,
			.dst = base + (size_t)PER_THREAD * AREA
		};
		for (int b = 0; b < PER_THREAD; b++)
			nt_fill(w[i].src + (size_t)b * AREA + 4096, PAYLOAD,
				hash_of(i, b));
	}

	phase(w, true);
	for (int i = 0; i < NTHREADS; i++)
		t_assert_eq(w[i].failures, 0);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.writes, NBLOCKS);
	t_assert_eq(st.ready_slots, NBLOCKS);
	t_assert_eq(st.write_errors, 0);

	phase(w, false);
	for (int i = 0; i < NTHREADS; i++)
		t_assert_eq(w[i].failures, 0);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.reads, NBLOCKS);
	t_assert_eq(st.bytes_read, (uint64_t)NBLOCKS * PAYLOAD);
	t_assert_eq(st.checksum_failures, 0);

	/* one payload byte of thread 1's block 7 flipped on disk */
	nt_flip_byte(path, tier_nvme_slot_offset(t, w[1].slots[7]) +
				   TIER_NVME_HEADER_BYTES + 1000);
	w[1].bad_hash = hash_of(1, 7);

	phase(w, false);
	for (int i = 0; i < NTHREADS; i++)
		t_assert_eq(w[i].failures, 0);
	t_assert_eq(w[1].bad_reads, 1);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.checksum_failures, 1);
	t_assert_eq(st.reads, 2 * NBLOCKS - 1);
	t_assert_eq(st.ready_slots, NBLOCKS - 1);
	uint32_t slot;
	uint64_t len, layout;

	t_assert_eq(tier_nvme_lookup(t, hash_of(1, 7), &slot, &len, &layout),
		    -ENOENT);
	t_assert_eq(tier_nvme_lookup(t, hash_of(1, 6), &slot, &len, &layout),
		    0);

	/* room for 8 more blocks, then the twins */
	struct tier_nvme_stats before;
	struct twin tw[2];
	pthread_barrier_t two;
	unsigned char *tbuf = NULL;

	for (int b = 0; b < 8; b++)
		t_ok(tier_nvme_free(t, w[0].slots[b]));
	tbuf = t_page_alloc(8 * PAYLOAD);
	nt_fill(tbuf, 8 * PAYLOAD, 77);
	t_assert_eq(pthread_barrier_init(&two, NULL, 2), 0);
	tier_nvme_get_stats(t, &before);
	for (int i = 0; i < 2; i++) {
		tw[i] = (struct twin){
			.start = &two, .t = t, .buf = tbuf, .reverse = i == 1
		};
		t_assert_eq(pthread_create(&tw[i].thread, NULL, twin_run,
					   &tw[i]),
			    0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(tw[i].thread, NULL);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(tw[0].failed, 0);
	t_assert_eq(tw[1].failed, 0);
	t_assert_eq(st.writes - before.writes, 8);
	t_assert_eq(st.dedup_hits - before.dedup_hits, 8);
	for (int k = 0; k < 8; k++)
		t_assert_eq(tw[0].io[k].slot, tw[1].io[7 - k].slot);
	pthread_barrier_destroy(&two);
	free(tbuf);

	tier_nvme_close(t);
	pthread_barrier_destroy(&start);
	unlink(path);
	free(reg);
	free(unreg);
	return T_PASS;
}
