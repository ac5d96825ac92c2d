/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory fallback for telemetry, used when BPF is not available.
 *
 * The daemon creates one region per session (kvmm_tel_shm_init()) inside
 * the session's shared memory and sets `enabled` when it reads telemetry
 * from shared memory instead of BPF maps.  The client writes the same
 * statistics the BPF programs would compute (block stats, log2 histograms,
 * counters) with the inline writers below; the daemon reads them through
 * ebpf/telemetry.c, which gives the policy one statistics API whatever the
 * source.  The writer side is header-only so libkvmm needs no extra
 * objects.
 *
 * Layout (offsets from the region start, all 64-byte aligned):
 *	struct kvmm_tel_shm		header + counters
 *	struct kvmm_tel_shm_block[nr_blocks]	open addressing, key = hash
 *	struct kvmm_tel_shm_hist[nr_hist]	open addressing, key = packed
 * A slot is claimed by a compare-and-swap of its key from 0; hash 0 is
 * stored as 1 (one alias in 2^64).  Full tables count drops.  The daemon
 * never trusts the header a client can scribble on: it reads with the slot
 * counts it computed itself (kvmm_tel_shm_nr_slots()).
 *
 * Block slots are taken back by the daemon once their counts are merged
 * and they went cold, so a long-lived session keeps being counted after
 * its first nr_blocks blocks.  The count is the handshake, and the client
 * stays lock-free:
 *
 *	client					daemon (ebpf/telemetry.c)
 *	key == ours (or claimed 0 -> ours)	count == what it merged, idle:
 *	CAS count c -> c + 1, unless c has	CAS count merged -> FROZEN
 *	  FROZEN: then look further (a		zero the other stats
 *	  claimer takes FROZEN -> 1)		key -> 0 (release)
 *						CAS count FROZEN -> 0
 *
 * An increment either lands before the daemon's CAS (which then fails:
 * the slot stays, the increment is merged at the next poll) or sees
 * FROZEN and goes to another slot: none is lost or counted twice.  A
 * claimer that finds FROZEN left over (the daemon has not cleared it yet)
 * owns the slot by its key CAS and counts from 1.  Only the estimates
 * (last_ns, ewma_gap_ns, ...) of a writer that stalls between its count
 * and its plain stores for longer than the idle time may land in the next
 * owner's slot.  A hash may briefly own two slots (the old one frozen);
 * the daemon merges by hash.
 *
 * Histogram rows carry a begin/end pair of write counters (a seqlock for
 * several writers): a writer bumps begin, adds, bumps end; the daemon
 * copies a row between reading end and begin and retries unless they
 * agree, so count, sum_ns and sum_bytes are read from one moment.
 */
#ifndef KVMM_EBPF_TELEMETRY_SHM_H
#define KVMM_EBPF_TELEMETRY_SHM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "ebpf/kvmm_telemetry.h"
#include "ebpf/probes.h"

#define KVMM_TEL_SHM_MAGIC 0x316c65746d6d766bULL /* "kvmmtel1" */
#define KVMM_TEL_SHM_HIST_SLOTS 256
#define KVMM_TEL_SHM_PROBES 32 /* linear-probe distance before giving up */
/* A block slot's count while the daemon takes the slot back (see above). */
#define KVMM_TEL_SHM_FROZEN (1ull << 63)

struct kvmm_tel_shm {
	uint64_t magic;
	uint32_t layout_version; /* KVMM_TEL_SHM_VERSION */
	uint32_t header_size;
	uint64_t total_size;
	uint32_t nr_blocks; /* power of two */
	uint32_t nr_hist; /* power of two */
	uint64_t blocks_off;
	uint64_t hist_off;
	uint32_t enabled; /* set by the daemon: write telemetry here */
	uint32_t reserved[5];
	struct kvmm_counters counters;
} __attribute__((aligned(64)));

struct kvmm_tel_shm_block {
	uint64_t hash; /* 0 = free */
	struct kvmm_block_stats stats;
};

struct kvmm_tel_shm_hist {
	uint64_t key; /* kvmm_tel_hist_key_pack(), never 0; 0 = free */
	/* updates begun and ended: equal when no writer is inside */
	uint64_t seq_begin, seq_end;
	struct kvmm_hist hist;
};

static inline size_t kvmm_tel_shm_align(size_t v)
{
	return (v + 63) & ~(size_t)63;
}

/* Bytes a region with nr_blocks block slots (rounded up to 2^k) needs. */
static inline size_t kvmm_tel_shm_size(uint32_t nr_blocks)
{
	uint32_t n = 1;

	while (n < nr_blocks && n < (1u << 30))
		n <<= 1;
	return kvmm_tel_shm_align(sizeof(struct kvmm_tel_shm)) +
	       kvmm_tel_shm_align((size_t)n *
				  sizeof(struct kvmm_tel_shm_block)) +
	       kvmm_tel_shm_align(KVMM_TEL_SHM_HIST_SLOTS *
				  sizeof(struct kvmm_tel_shm_hist));
}

/* The block slot count a region of `size` bytes holds (0 if too small). */
static inline uint32_t kvmm_tel_shm_nr_slots(size_t size)
{
	uint32_t n = 1u << 30;

	while (n && kvmm_tel_shm_size(n) > size)
		n >>= 1;
	return n;
}

static inline uint64_t kvmm_tel_hist_key_pack(const struct kvmm_hist_key *k)
{
	return ((uint64_t)(k->kind + 1) << 48) | ((uint64_t)k->tier << 40) |
	       ((uint64_t)k->dst_tier << 32) | k->segments;
}

static inline void kvmm_tel_hist_key_unpack(uint64_t v, struct kvmm_hist_key *k)
{
	k->kind = (uint16_t)((v >> 48) - 1);
	k->tier = (uint8_t)(v >> 40);
	k->dst_tier = (uint8_t)(v >> 32);
	k->segments = (uint32_t)v;
}

/* Daemon side: lay out an empty region of `size` bytes. */
static inline int kvmm_tel_shm_init(void *base, size_t size)
{
	struct kvmm_tel_shm *s = base;
	uint32_t n = kvmm_tel_shm_nr_slots(size);

	if (!base || !n)
		return -EINVAL;
	memset(base, 0, kvmm_tel_shm_size(n));
	s->layout_version = KVMM_TEL_SHM_VERSION;
	s->header_size = sizeof(*s);
	s->total_size = kvmm_tel_shm_size(n);
	s->nr_blocks = n;
	s->nr_hist = KVMM_TEL_SHM_HIST_SLOTS;
	s->blocks_off = kvmm_tel_shm_align(sizeof(*s));
	s->hist_off = s->blocks_off +
		      kvmm_tel_shm_align((size_t)n *
					 sizeof(struct kvmm_tel_shm_block));
	__atomic_store_n(&s->magic, KVMM_TEL_SHM_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* Client side: is this a region of our layout that fits in `size`? */
static inline int kvmm_tel_shm_check(const void *base, size_t size)
{
	const struct kvmm_tel_shm *s = base;
	uint32_t n;

	if (!base || size < sizeof(*s) ||
	    __atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != KVMM_TEL_SHM_MAGIC)
		return -EINVAL;
	if (s->layout_version != KVMM_TEL_SHM_VERSION)
		return -EPROTO;
	n = s->nr_blocks;
	if (!n || (n & (n - 1)) || kvmm_tel_shm_size(n) > size ||
	    s->total_size != kvmm_tel_shm_size(n) ||
	    s->nr_hist != KVMM_TEL_SHM_HIST_SLOTS ||
	    s->blocks_off != kvmm_tel_shm_align(sizeof(*s)) ||
	    s->hist_off !=
		    s->blocks_off + kvmm_tel_shm_align(
					    (size_t)n *
					    sizeof(struct kvmm_tel_shm_block)))
		return -EINVAL;
	return 0;
}

/*
 * Client side: the region the daemon published at `off` (`len` bytes) of
 * a mapping of `size` bytes, or NULL when there is none or it does not
 * check out (then the client simply writes no fallback counters).
 */
static inline struct kvmm_tel_shm *kvmm_tel_shm_at(void *mem, size_t size,
						   uint32_t off, uint32_t len)
{
	void *p = (char *)mem + off;

	if (!mem || !len || off % 64 || off > size || len > size - off ||
	    kvmm_tel_shm_check(p, len))
		return NULL;
	return p;
}

static inline struct kvmm_tel_shm_block *
kvmm_tel_shm_blocks(const struct kvmm_tel_shm *s)
{
	return (struct kvmm_tel_shm_block *)((char *)s + s->blocks_off);
}

static inline struct kvmm_tel_shm_hist *
kvmm_tel_shm_hists(const struct kvmm_tel_shm *s)
{
	return (struct kvmm_tel_shm_hist *)((char *)s + s->hist_off);
}

/* Whether the daemon wants telemetry written here (it reads BPF otherwise). */
static inline int kvmm_tel_shm_enabled(const struct kvmm_tel_shm *s)
{
	return s && __atomic_load_n(&s->enabled, __ATOMIC_RELAXED);
}

static inline uint64_t kvmm_tel_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define KVMM_TEL_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

/*
 * Find or claim the slot whose key is `key` in a table of n (2^k) slots of
 * `stride` bytes whose first 8 bytes are the key; NULL when full.
 */
static inline void *kvmm_tel_shm_slot(void *table, uint32_t n, size_t stride,
				      uint64_t key, int *claimed)
{
	uint32_t i, idx = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32);

	*claimed = 0;
	for (i = 0; i < KVMM_TEL_SHM_PROBES && i < n; i++) {
		char *slot = (char *)table + ((idx + i) & (n - 1)) * stride;
		uint64_t *k = (uint64_t *)slot, cur, zero = 0;

		cur = __atomic_load_n(k, __ATOMIC_ACQUIRE);
		if (cur == key)
			return slot;
		if (cur)
			continue;
		if (__atomic_compare_exchange_n(k, &zero, key, 0,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			*claimed = 1;
			return slot;
		}
		if (zero == key)
			return slot;
	}
	return NULL;
}

static inline void kvmm_tel_shm_hist_add(struct kvmm_tel_shm *s,
					 const struct kvmm_hist_key *key,
					 uint64_t latency_ns, uint64_t bytes)
{
	struct kvmm_tel_shm_hist *h;
	int claimed;

	h = kvmm_tel_shm_slot(kvmm_tel_shm_hists(s), s->nr_hist, sizeof(*h),
			      kvmm_tel_hist_key_pack(key), &claimed);
	if (!h) {
		KVMM_TEL_ADD(&s->counters.hist_dropped, 1);
		return;
	}
	/* acquire: the adds below stay after it, for the daemon's check */
	__atomic_fetch_add(&h->seq_begin, 1, __ATOMIC_ACQUIRE);
	KVMM_TEL_ADD(&h->hist.count, 1);
	KVMM_TEL_ADD(&h->hist.sum_ns, latency_ns);
	KVMM_TEL_ADD(&h->hist.sum_bytes, bytes);
	KVMM_TEL_ADD(&h->hist.buckets[kvmm_tel_log2_bucket(latency_ns)], 1);
	/* release: the adds above are seen before the row reads as done */
	__atomic_fetch_add(&h->seq_end, 1, __ATOMIC_RELEASE);
}

/*
 * Count one access of `key` in a block slot: the slot, with *prev the
 * count before it, or NULL when none was free within the probe distance.
 */
static inline struct kvmm_tel_shm_block *
kvmm_tel_shm_block_count(struct kvmm_tel_shm *s, uint64_t key, uint64_t now,
			 uint64_t *prev)
{
	struct kvmm_tel_shm_block *t = kvmm_tel_shm_blocks(s);
	uint32_t i, n = s->nr_blocks;
	uint32_t idx = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32);

	for (i = 0; i < KVMM_TEL_SHM_PROBES && i < n; i++) {
		struct kvmm_tel_shm_block *b = &t[(idx + i) & (n - 1)];
		uint64_t cur, c, want = 0;
		int claimed = 0;

		cur = __atomic_load_n(&b->hash, __ATOMIC_ACQUIRE);
		if (cur != key) {
			if (cur)
				continue;
			if (__atomic_compare_exchange_n(&b->hash, &cur, key, 0,
							__ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE))
				claimed = 1;
			else if (cur != key)
				continue;
		}
		if (claimed)
			b->stats.first_ns = now;
		c = __atomic_load_n(&b->stats.count, __ATOMIC_RELAXED);
		do {
			/* the daemon is taking it back: not ours to count in
			 * unless our claim made it ours */
			if ((c & KVMM_TEL_SHM_FROZEN) && !claimed)
				break;
			want = (c & KVMM_TEL_SHM_FROZEN) ? 1 : c + 1;
			/* release: the accesses counter, bumped before, is
			 * seen by a daemon that sees this count */
		} while (!__atomic_compare_exchange_n(&b->stats.count, &c, want,
						      1, __ATOMIC_RELEASE,
						      __ATOMIC_RELAXED));
		if ((c & KVMM_TEL_SHM_FROZEN) && !claimed)
			continue;
		*prev = want - 1;
		return b;
	}
	return NULL;
}

static inline void kvmm_tel_shm_block_access(struct kvmm_tel_shm *s,
					     const struct kvmm_access_rec *r,
					     uint64_t now)
{
	struct kvmm_tel_shm_block *b;
	uint64_t key = r->hash ? r->hash : 1, prev;

	KVMM_TEL_ADD(&s->counters.accesses, 1);
	if (r->tier < KVMM_TEL_NR_TIERS)
		KVMM_TEL_ADD(&s->counters.tier_accesses[r->tier], 1);
	b = kvmm_tel_shm_block_count(s, key, now, &prev);
	if (!b) {
		KVMM_TEL_ADD(&s->counters.blocks_dropped, 1);
		return;
	}
	b->stats.ewma_gap_ns = kvmm_tel_ewma_next(prev, b->stats.ewma_gap_ns,
						  b->stats.last_ns, now);
	b->stats.last_ns = now;
	b->stats.last_seq = r->seq;
	b->stats.last_tier = r->tier;
}

/*
 * The recorders below are what libkvmm and kvmmd call: each fires the USDT
 * probe and, when the daemon reads shared memory, writes the same
 * statistics there.  kvmm_tel_want() says whether building costly
 * arguments is worth it.
 */
#define kvmm_tel_want(shm, probe) \
	(KVMM_PROBE_ENABLED(probe) || kvmm_tel_shm_enabled(shm))

static inline void kvmm_tel_access(struct kvmm_tel_shm *s, uint64_t step,
				   const struct kvmm_access_rec *recs,
				   uint32_t n)
{
	uint64_t now;
	uint32_t i;

	kvmm_probe_access(step, recs, n);
	if (!kvmm_tel_shm_enabled(s))
		return;
	now = kvmm_tel_now_ns();
	KVMM_TEL_ADD(&s->counters.events[KVMM_TEL_ACCESS], 1);
	if (n > KVMM_TEL_MAX_ACCESS_RECORDS) {
		KVMM_TEL_ADD(&s->counters.access_dropped,
			     n - KVMM_TEL_MAX_ACCESS_RECORDS);
		n = KVMM_TEL_MAX_ACCESS_RECORDS;
	}
	for (i = 0; i < n; i++)
		kvmm_tel_shm_block_access(s, &recs[i], now);
}

/* Count an event and add its latency to its histogram row. */
static inline void kvmm_tel_shm_event(struct kvmm_tel_shm *s, uint32_t kind,
				      uint32_t tier, uint32_t dst_tier,
				      uint64_t segments, uint64_t latency_ns,
				      uint64_t bytes, int with_hist)
{
	struct kvmm_hist_key key = {
		.kind = (uint16_t)kind,
		.tier = (uint8_t)(tier < KVMM_TEL_NR_TIERS ?
					  tier :
					  KVMM_TEL_TIER_MISS),
		.dst_tier = (uint8_t)(dst_tier < KVMM_TEL_NR_TIERS ?
					      dst_tier :
					      KVMM_TEL_TIER_MISS),
		.segments = kvmm_tel_clamp_segments(segments),
	};

	if (!kvmm_tel_shm_enabled(s))
		return;
	KVMM_TEL_ADD(&s->counters.events[kind], 1);
	if (with_hist)
		kvmm_tel_shm_hist_add(s, &key, latency_ns, bytes);
}

static inline void kvmm_tel_kernel(struct kvmm_tel_shm *s, uint32_t kind,
				   uint64_t latency_ns, uint32_t segments,
				   uint64_t tokens)
{
	kvmm_probe_kernel(kind, latency_ns, segments, tokens);
	if (kind != KVMM_TEL_ATTENTION && kind != KVMM_TEL_PREFILL)
		kind = KVMM_TEL_ATTENTION;
	kvmm_tel_shm_event(s, kind, KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_GPU,
			   segments, latency_ns, 0, 1);
}

static inline void kvmm_tel_extend(struct kvmm_tel_shm *s, uint64_t seq,
				   uint64_t tokens, uint32_t pages,
				   uint64_t latency_ns)
{
	kvmm_probe_extend(seq, tokens, pages, latency_ns);
	kvmm_tel_shm_event(s, KVMM_TEL_EXTEND, KVMM_TEL_TIER_GPU,
			   KVMM_TEL_TIER_GPU, 0, latency_ns, pages, 1);
}

static inline void kvmm_tel_restore(struct kvmm_tel_shm *s, uint64_t hash,
				    uint32_t tier, uint64_t bytes,
				    uint64_t latency_ns)
{
	kvmm_probe_restore(hash, tier, bytes, latency_ns);
	kvmm_tel_shm_event(s, KVMM_TEL_RESTORE, tier, KVMM_TEL_TIER_GPU, 0,
			   latency_ns, bytes, 1);
}

static inline void kvmm_tel_recompute(struct kvmm_tel_shm *s, uint64_t hash,
				      uint64_t position, uint32_t tokens,
				      uint64_t latency_ns)
{
	kvmm_probe_recompute(hash, position, tokens, latency_ns);
	kvmm_tel_shm_event(s, KVMM_TEL_RECOMPUTE, KVMM_TEL_TIER_MISS,
			   KVMM_TEL_TIER_GPU, 0, latency_ns, tokens, 1);
}

static inline void kvmm_tel_revoke(struct kvmm_tel_shm *s, uint64_t session,
				   uint64_t hash, uint64_t latency_ns)
{
	kvmm_probe_revoke(session, hash, latency_ns);
	kvmm_tel_shm_event(s, KVMM_TEL_REVOKE, KVMM_TEL_TIER_GPU,
			   KVMM_TEL_TIER_GPU, 0, latency_ns, 0, 1);
}

static inline void kvmm_tel_migrate(struct kvmm_tel_shm *s, uint64_t hash,
				    uint32_t from, uint32_t to, uint64_t bytes,
				    uint64_t latency_ns)
{
	kvmm_probe_migrate(hash, from, to, bytes, latency_ns);
	kvmm_tel_shm_event(s, KVMM_TEL_MIGRATE, from, to, 0, latency_ns, bytes,
			   1);
}

static inline void kvmm_tel_evict(struct kvmm_tel_shm *s, uint64_t hash,
				  uint32_t tier, uint64_t bytes)
{
	kvmm_probe_evict(hash, tier, bytes);
	kvmm_tel_shm_event(s, KVMM_TEL_EVICT, tier, tier, 0, 0, bytes, 0);
}

#endif
