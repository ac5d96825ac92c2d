/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory fallback for telemetry, used when BPF is not available.
 *
 * The daemon creates one region per session (kvmm_tel_shm_init()) inside
 * the session's shared memory and sets `enabled` when it reads telemetry
 * from shared memory instead of BPF maps.  The client writes the same
 * statistics the BPF programs would compute (block stats, log2 histograms,
 * counters) with the inline writers below; the daemon reads them in
 * ebpf/telemetry_shm_source.c, behind ebpf/telemetry.h, which gives the
 * policy one statistics API whatever the source.  The writer side is header-only so libkvmm needs no extra
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
 * its first nr_blocks blocks.  The client stays lock-free.  A slot's
 * stats.count is a word of three fields (kvmm_tel_shm_word_*()):
 *
 *	bit 63 FROZEN	the daemon is taking the slot back
 *	bits 62..32	the slot's generation, bumped by each take
 *	bits 31..0	the count, modulo 2^32 (the daemon reads deltas)
 *
 *	client (kvmm_tel_shm_block_count)	daemon (kvmm_tel_shm_block_take)
 *	w = word (acquire)			word == w, all merged, idle:
 *	h = key (acquire)			CAS word w -> w | FROZEN   (F)
 *	h == 0: CAS key 0 -> ours, again	zero the other stats
 *	h != ours or w FROZEN: next slot	key = 0 (release)          (Z)
 *	CAS word w -> w + 1 (count only)	word = gen + 1, count 0    (S)
 *	  failed: again from the top		  (release)
 *
 * Why no increment is lost or lands on another key, in every
 * interleaving (C11 model; hostile clients aside, see ebpf/telemetry_shm_source.c).
 * Per slot, generation g starts with the S that stores (g, 0) (the
 * zeroed region for g = 0), preceded in the daemon by the Z that freed
 * the key.  The key goes 0 -> K only by a claim CAS, K -> 0 only by a Z,
 * which comes after the F of its generation; so after Z(g-1) the key is
 * claimed at most once before Z(g): call it K(g), the key of generation
 * g.  Only the daemon moves the generation and only through F, and once
 * F(g) stored (g, FROZEN) the word never reads (g, not frozen) again.
 * A writer of key K counts only by a CAS that succeeds from a w = (g, c)
 * not frozen that it loaded (L1) before it read K from the key (L2).
 * L1 read S(g) or an RMW after it (all of S's release sequence), so
 * Z(g-1) happens before L2, which reads Z(g-1) or a later key: a nonzero
 * one is K(g) or the claim of a later generation.  The latter read a Z
 * after F(g) and released to L2, so F(g) happens before the CAS, which
 * then comes after F(g) in the word's order and fails: (g, not frozen)
 * is gone.  So a CAS that succeeds read K == K(g) and lands between S(g)
 * and F(g): generation g's count, all of which the daemon credits to
 * K(g) (it reads the key, then the word, and moves generations itself).
 * A daemon's F that succeeds read the count it merged, so every
 * increment before it was merged and none can follow it; one that
 * fails leaves the slot for the next poll.  The generation's 31 bits
 * would take 2^31 takes of one slot (each after 4 idle polls) during
 * one writer's L1..CAS to wrap; the count wrapping within a generation
 * is harmless (one key; the daemon reads it modulo 2^32 every poll).
 *
 * A writer that sees FROZEN counts further along the probe sequence
 * (its block may own two slots a while; the daemon merges by hash), so
 * it never waits on the daemon; a writer that dies leaves no state but
 * a claimed key, whose slot the daemon takes back idle like any other.
 * Only the estimates (first_ns, last_ns, ewma_gap_ns, ...) are relaxed
 * stores outside the handshake, the last writer's winning: a writer
 * stalled for longer than the idle time between its count and its
 * stores may leave them in the next owner's slot, never a count.
 *
 * Histogram rows carry a begin/end pair of write counters (a seqlock for
 * several writers, Boehm's fence pattern): a writer bumps begin, issues a
 * release fence, adds, bumps end (release); the daemon reads end
 * (acquire), copies the row, issues an acquire fence and reads begin,
 * and keeps the copy only if they agree.  A copy that read any add of a
 * writer also sees that writer's begin (the fences synchronize), and
 * begin == end then says every writer it saw had ended, so count, sum_ns
 * and sum_bytes are from one moment.
 * A writer that stops between begin and end (a thread that died there)
 * leaves the row never whole again: the daemon keeps its last whole
 * copy and, once it was neither whole nor written for half a second of
 * polls, tries it once a poll and says so (ebpf/telemetry_shm_source.c).
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
/* A block slot's count word (see above): taken back, generation, count. */
#define KVMM_TEL_SHM_FROZEN (1ull << 63)
#define KVMM_TEL_SHM_GEN_SHIFT 32
#define KVMM_TEL_SHM_GEN_MASK (0x7fffffffull << KVMM_TEL_SHM_GEN_SHIFT)
#define KVMM_TEL_SHM_COUNT_MASK 0xffffffffull

/*
 * A test's hook before each shared access of the block slot protocol
 * (tests/ebpf-shm-slot-interleave.c runs them in every order); nothing
 * otherwise.
 */
#ifndef KVMM_TEL_SHM_STEP
#define KVMM_TEL_SHM_STEP() \
	do {                \
	} while (0)
#endif

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
	void *p;

	/* p only once mem is known: NULL + off is undefined behaviour */
	if (!mem || !len || off % 64 || off > size || len > size - off)
		return NULL;
	p = (char *)mem + off;
	if (kvmm_tel_shm_check(p, len))
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
	__atomic_fetch_add(&h->seq_begin, 1, __ATOMIC_RELAXED);
	/* release: a daemon that reads any add below sees the begin above */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	KVMM_TEL_ADD(&h->hist.count, 1);
	KVMM_TEL_ADD(&h->hist.sum_ns, latency_ns);
	KVMM_TEL_ADD(&h->hist.sum_bytes, bytes);
	KVMM_TEL_ADD(&h->hist.buckets[kvmm_tel_log2_bucket(latency_ns)], 1);
	/* release: the adds above are seen before the row reads as done */
	__atomic_fetch_add(&h->seq_end, 1, __ATOMIC_RELEASE);
}

/* The count field of a block slot's count word. */
static inline uint32_t kvmm_tel_shm_word_count(uint64_t w)
{
	return (uint32_t)(w & KVMM_TEL_SHM_COUNT_MASK);
}

/* The word one access later: the count wraps within its field. */
static inline uint64_t kvmm_tel_shm_word_inc(uint64_t w)
{
	return (w & ~KVMM_TEL_SHM_COUNT_MASK) |
	       ((w + 1) & KVMM_TEL_SHM_COUNT_MASK);
}

/* The first word of the generation after w's: not frozen, count 0. */
static inline uint64_t kvmm_tel_shm_word_next_gen(uint64_t w)
{
	return (w + (1ull << KVMM_TEL_SHM_GEN_SHIFT)) & KVMM_TEL_SHM_GEN_MASK;
}

/*
 * Count one access of `key` in a block slot (the protocol and its proof
 * are at the top): the slot, with *prev the count before it, or NULL
 * when none was free within the probe distance.  Lock-free: each pass
 * that does not end it follows another party's change to the slot.
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
		uint64_t w, h;

		for (;;) {
			KVMM_TEL_SHM_STEP();
			/* acquire: the key read next is no older than the
			 * daemon's free that began this generation */
			w = __atomic_load_n(&b->stats.count, __ATOMIC_ACQUIRE);
			KVMM_TEL_SHM_STEP();
			h = __atomic_load_n(&b->hash, __ATOMIC_ACQUIRE);
			if (h != key) {
				if (h)
					break;
				KVMM_TEL_SHM_STEP();
				/* acquire: after the daemon's zeroing;
				 * release: writers that read our key */
				if (__atomic_compare_exchange_n(
					    &b->hash, &h, key, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
					__atomic_store_n(&b->stats.first_ns,
							 now, __ATOMIC_RELAXED);
				else if (h != key)
					break;
				continue; /* the word again, then the key */
			}
			if (w & KVMM_TEL_SHM_FROZEN)
				break; /* being taken back: count further on */
			KVMM_TEL_SHM_STEP();
			/* release: first_ns and the accesses counter, written
			 * before, are seen by a daemon that sees this count */
			if (__atomic_compare_exchange_n(
				    &b->stats.count, &w,
				    kvmm_tel_shm_word_inc(w), 0,
				    __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
				*prev = kvmm_tel_shm_word_count(w);
				return b;
			}
		}
	}
	return NULL;
}

/*
 * Daemon side: take block slot b back from the writers if its count word
 * is still `w` (read after its key; its count all merged).  Nonzero when
 * taken: the slot is free, in the next generation; 0 when a writer
 * counted meanwhile (the slot stays; the increment is read next time).
 */
static inline int kvmm_tel_shm_block_take(struct kvmm_tel_shm_block *b,
					  uint64_t w)
{
	struct kvmm_block_stats *st = &b->stats;

	KVMM_TEL_SHM_STEP();
	/* acquire: the writers' stores before their counts are seen;
	 * release: with the key freed below, for later claims */
	if (!__atomic_compare_exchange_n(&st->count, &w,
					 w | KVMM_TEL_SHM_FROZEN, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return 0;
	KVMM_TEL_SHM_STEP();
	/* the next owner starts from nothing (a stalled writer's late
	 * estimates may still land: see above) */
	__atomic_store_n(&st->first_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->last_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->ewma_gap_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->last_seq, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->last_tier, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->last_pid, 0, __ATOMIC_RELAXED);
	KVMM_TEL_SHM_STEP();
	/* release: a claimer that reads 0 sees the cleared stats */
	__atomic_store_n(&b->hash, 0, __ATOMIC_RELEASE);
	KVMM_TEL_SHM_STEP();
	/* release: a writer that reads the new generation reads the key
	 * freed above, or a later one */
	__atomic_store_n(&st->count, kvmm_tel_shm_word_next_gen(w),
			 __ATOMIC_RELEASE);
	return 1;
}

/* Count one access record: 0, or -ENOSPC when no slot took it (counted
 * in blocks_dropped). */
static inline int kvmm_tel_shm_block_access(struct kvmm_tel_shm *s,
					    const struct kvmm_access_rec *r,
					    uint64_t now)
{
	struct kvmm_tel_shm_block *b;
	uint64_t key = r->hash ? r->hash : 1, prev, ewma, last;

	KVMM_TEL_ADD(&s->counters.accesses, 1);
	if (r->tier < KVMM_TEL_NR_TIERS)
		KVMM_TEL_ADD(&s->counters.tier_accesses[r->tier], 1);
	b = kvmm_tel_shm_block_count(s, key, now, &prev);
	if (!b) {
		KVMM_TEL_ADD(&s->counters.blocks_dropped, 1);
		return -ENOSPC;
	}
	/* estimates: last writer wins (relaxed: no data race) */
	ewma = __atomic_load_n(&b->stats.ewma_gap_ns, __ATOMIC_RELAXED);
	last = __atomic_load_n(&b->stats.last_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&b->stats.ewma_gap_ns,
			 kvmm_tel_ewma_next(prev, ewma, last, now),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&b->stats.last_ns, now, __ATOMIC_RELAXED);
	__atomic_store_n(&b->stats.last_seq, r->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&b->stats.last_tier, r->tier, __ATOMIC_RELAXED);
	return 0;
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
