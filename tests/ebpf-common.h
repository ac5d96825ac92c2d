/* SPDX-License-Identifier: MIT */
/*
 * A known telemetry workload and its expected statistics, shared by the
 * BPF and the shared-memory tests so both sources are held to the same
 * numbers.  ebpf_drive() runs in a client process and goes through the
 * same recorders libkvmm uses (USDT probe + shm when enabled);
 * ebpf_check() asserts on a telemetry snapshot.
 */
#ifndef KVMM_TESTS_EBPF_COMMON_H
#define KVMM_TESTS_EBPF_COMMON_H

#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "ebpf/telemetry_shm.h"
#include "tests/lib/test.h"

#define H1 0x1111000000000001ull
#define H2 0x2222000000000002ull
#define H3 0x3333000000000003ull
#define HBULK 0x7000000000000000ull
#define NBULK 1000

static inline void ebpf_sleep_ms(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* The client side: 6 access steps, 15 latency events, 1 eviction. */
static inline void ebpf_drive(struct kvmm_tel_shm *shm)
{
	static struct kvmm_access_rec bulk[NBULK];
	const struct kvmm_access_rec s1[] = {
		{ H1, 1, KVMM_TEL_TIER_GPU, 0 },
		{ H2, 1, KVMM_TEL_TIER_GPU, 0 },
		{ H3, 2, KVMM_TEL_TIER_HOST, 0 },
	};
	const struct kvmm_access_rec s2[] = {
		{ H1, 1, KVMM_TEL_TIER_GPU, 0 },
		{ H2, 1, KVMM_TEL_TIER_GPU, 0 },
	};
	const struct kvmm_access_rec s3[] = {
		{ H1, 3, KVMM_TEL_TIER_HOST, 0 },
		{ H2, 3, KVMM_TEL_TIER_NVME, 0 },
	};
	const struct kvmm_access_rec s4[] = { { H1, 1, KVMM_TEL_TIER_GPU, 0 } };
	const struct kvmm_access_rec s5[] = { { H1, 4, KVMM_TEL_TIER_MISS,
						0 } };
	int i;

	kvmm_tel_access(shm, 1, s1, 3);
	ebpf_sleep_ms(2);
	kvmm_tel_access(shm, 2, s2, 2);
	ebpf_sleep_ms(2);
	kvmm_tel_access(shm, 3, s3, 2);
	ebpf_sleep_ms(2);
	kvmm_tel_access(shm, 4, s4, 1);
	ebpf_sleep_ms(2);
	kvmm_tel_access(shm, 5, s5, 1);
	for (i = 0; i < NBULK; i++)
		bulk[i] = (struct kvmm_access_rec){ HBULK + i, 100 + i,
						    KVMM_TEL_TIER_GPU, 0 };
	kvmm_tel_access(shm, 6, bulk, NBULK);

	for (i = 0; i < 4; i++)
		kvmm_tel_kernel(shm, KVMM_TEL_ATTENTION, 1000, 1, 256);
	for (i = 0; i < 2; i++)
		kvmm_tel_kernel(shm, KVMM_TEL_ATTENTION, 5000, 3, 256);
	kvmm_tel_kernel(shm, KVMM_TEL_PREFILL, 1000000, 1, 4096);
	for (i = 0; i < 3; i++)
		kvmm_tel_restore(shm, H2, KVMM_TEL_TIER_HOST, 65536, 20000);
	for (i = 0; i < 2; i++)
		kvmm_tel_migrate(shm, H3, KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_HOST,
				 65536, 8000);
	kvmm_tel_recompute(shm, H1, 512, 32, 300000);
	kvmm_tel_revoke(shm, 7, H1, 40000);
	kvmm_tel_extend(shm, 1, 16, 2, 1500);
	kvmm_tel_evict(shm, H3, KVMM_TEL_TIER_HOST, 65536);
}

/*
 * ebpf_drive(shm) in a client process; with check_size, the child first
 * checks that shm is a telemetry region of that size (exit 2 if not).
 * Returns the child's pid once it exited 0.
 */
static inline pid_t ebpf_drive_process(struct kvmm_tel_shm *shm,
				       size_t check_size)
{
	pid_t pid = fork();
	int ws;

	t_assert(pid >= 0);
	if (pid == 0) {
		if (check_size && kvmm_tel_shm_check(shm, check_size))
			_exit(2);
		ebpf_drive(shm);
		_exit(0);
	}
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) &&
		 WEXITSTATUS(ws) == 0);
	return pid;
}

#define EBPF_NR_LATENCY_EVENTS 15 /* everything above with a latency */
#define EBPF_NR_RING_EVENTS \
	15 /* kernel 7, restore 3, migrate 2,
				* recompute, revoke, evict (not extend) */

static inline void ebpf_check_hist(struct tel *t, uint32_t kind, uint32_t tier,
				   uint32_t dst, uint32_t segs, uint64_t count,
				   uint32_t bucket, uint64_t sum_ns,
				   uint64_t sum_bytes)
{
	struct kvmm_hist_key k = { .kind = (uint16_t)kind,
				   .tier = (uint8_t)tier,
				   .dst_tier = (uint8_t)dst,
				   .segments = segs };
	struct kvmm_hist h;
	unsigned int b;

	if (tel_hist_lookup(t, &k, &h))
		t_fail("no histogram row %s/%s/%s/%u", tel_event_string(kind),
		       tel_tier_string(tier), tel_tier_string(dst), segs);
	t_assert_eq(h.count, count);
	t_assert_eq(h.sum_ns, sum_ns);
	t_assert_eq(h.sum_bytes, sum_bytes);
	for (b = 0; b < KVMM_TEL_HIST_BUCKETS; b++)
		t_assert_eq(h.buckets[b], b == bucket ? count : 0);
}

/* Everything ebpf_drive() produced, exactly; t0..t1 bracket the client. */
static inline void ebpf_check(struct tel *t, uint64_t t0, uint64_t t1)
{
	struct kvmm_block_stats s;
	struct kvmm_counters c;
	int i;

	t_assert_eq(tel_block_count(t), 3 + NBULK);
	t_ok(tel_block_lookup(t, H1, &s));
	t_assert_eq(s.count, 5);
	t_assert_eq(s.last_seq, 4);
	t_assert_eq(s.last_tier, KVMM_TEL_TIER_MISS);
	t_assert(s.first_ns >= t0 && s.last_ns <= t1);
	t_assert(s.last_ns - s.first_ns >= 8000000); /* 4 sleeps of 2 ms */
	/* every gap was >= 2 ms, so the EWMA is too */
	t_assert(s.ewma_gap_ns >= 2000000 && s.ewma_gap_ns < t1 - t0);
	t_ok(tel_block_lookup(t, H2, &s));
	t_assert_eq(s.count, 3);
	t_assert_eq(s.last_seq, 3);
	t_assert_eq(s.last_tier, KVMM_TEL_TIER_NVME);
	t_ok(tel_block_lookup(t, H3, &s));
	t_assert_eq(s.count, 1);
	t_assert_eq(s.ewma_gap_ns, 0);
	t_assert_eq(s.first_ns, s.last_ns);
	for (i = 0; i < NBULK; i += 97) {
		t_ok(tel_block_lookup(t, HBULK + i, &s));
		t_assert_eq(s.count, 1);
		t_assert_eq(s.last_seq, 100 + i);
	}
	t_ok(tel_block_lookup(t, HBULK + NBULK - 1, &s));
	t_assert(tel_block_lookup(t, HBULK + NBULK, &s) == -ENOENT);

	ebpf_check_hist(t, KVMM_TEL_ATTENTION, 0, 0, 1, 4, 9, 4000, 0);
	ebpf_check_hist(t, KVMM_TEL_ATTENTION, 0, 0, 3, 2, 12, 10000, 0);
	ebpf_check_hist(t, KVMM_TEL_PREFILL, 0, 0, 1, 1, 19, 1000000, 0);
	ebpf_check_hist(t, KVMM_TEL_RESTORE, KVMM_TEL_TIER_HOST,
			KVMM_TEL_TIER_GPU, 0, 3, 14, 60000, 3 * 65536);
	ebpf_check_hist(t, KVMM_TEL_MIGRATE, KVMM_TEL_TIER_GPU,
			KVMM_TEL_TIER_HOST, 0, 2, 12, 16000, 2 * 65536);
	ebpf_check_hist(t, KVMM_TEL_RECOMPUTE, KVMM_TEL_TIER_MISS,
			KVMM_TEL_TIER_GPU, 0, 1, 18, 300000, 32);
	ebpf_check_hist(t, KVMM_TEL_REVOKE, 0, 0, 0, 1, 15, 40000, 0);
	ebpf_check_hist(t, KVMM_TEL_EXTEND, 0, 0, 0, 1, 10, 1500, 2);

	tel_counters(t, &c);
	t_assert_eq(c.events[KVMM_TEL_ACCESS], 6);
	t_assert_eq(c.accesses, 9 + NBULK);
	t_assert_eq(c.tier_accesses[KVMM_TEL_TIER_GPU], 5 + NBULK);
	t_assert_eq(c.tier_accesses[KVMM_TEL_TIER_HOST], 2);
	t_assert_eq(c.tier_accesses[KVMM_TEL_TIER_NVME], 1);
	t_assert_eq(c.tier_accesses[KVMM_TEL_TIER_REMOTE], 0);
	t_assert_eq(c.tier_accesses[KVMM_TEL_TIER_MISS], 1);
	t_assert_eq(c.events[KVMM_TEL_ATTENTION], 6);
	t_assert_eq(c.events[KVMM_TEL_PREFILL], 1);
	t_assert_eq(c.events[KVMM_TEL_RESTORE], 3);
	t_assert_eq(c.events[KVMM_TEL_MIGRATE], 2);
	t_assert_eq(c.events[KVMM_TEL_RECOMPUTE], 1);
	t_assert_eq(c.events[KVMM_TEL_REVOKE], 1);
	t_assert_eq(c.events[KVMM_TEL_EXTEND], 1);
	t_assert_eq(c.events[KVMM_TEL_EVICT], 1);
	t_assert_eq(c.access_dropped, 0);
	t_assert_eq(c.blocks_dropped, 0);
	t_assert_eq(c.hist_dropped, 0);
	t_assert_eq(c.events_dropped, 0);
}

/* A sink that counts what a poll reported. */
struct ebpf_sink_counts {
	uint64_t blocks, latency_events, ring_events, h1_count;
};

static inline void ebpf_sink_block(void *arg, uint64_t hash,
				   const struct kvmm_block_stats *s)
{
	struct ebpf_sink_counts *c = arg;

	c->blocks++;
	if (hash == H1)
		c->h1_count = s->count;
}

static inline void ebpf_sink_latency(void *arg, const struct kvmm_hist_key *k,
				     uint64_t count, uint64_t sum_ns,
				     uint64_t sum_bytes)
{
	((struct ebpf_sink_counts *)arg)->latency_events += count;
}

static inline void ebpf_sink_event(void *arg,
				   const struct kvmm_tel_event_rec *ev)
{
	((struct ebpf_sink_counts *)arg)->ring_events++;
}

#endif
