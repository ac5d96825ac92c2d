/* SPDX-License-Identifier: MIT */
/*
 * tests/daemon-fuzz: what the parent (tests/daemon-fuzz.c: phases,
 * daemons, capacity and idle checks) and the client processes
 * (tests/daemon-fuzz/client.c: the operations and the byte checks)
 * share.  The bytes of a block are a function of its hash and its size
 * alone (fz_page_fill()), the PRNG is splitmix64, and every counter
 * lives in shared memory so a SIGKILLed client's counts survive it.
 */
#ifndef KVMM_TESTS_DAEMON_FUZZ_H
#define KVMM_TESTS_DAEMON_FUZZ_H

#include <stdbool.h>
#include <stdint.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"

#define FZ_CHAINS 12
#define FZ_CHAIN_BLOCKS 8 /* blocks per chain, and the longest sequence */
#define FZ_SEQS 3 /* open sequences per client */
/* phase 3's NVMe slots, a few (its limits' NVMe figures go up to it) */
#define FZ_NVME_SMALL 24
#define FZ_WORDS (CC_PAGE / 8)
/*
 * Block sizes: size 0 is every phase's (CC_L layers, CC_PPB pages a
 * block); phase 5 also caches size 1, a model of one layer (2 pages a
 * block, a draft beside its target), in regions of its own.
 */
#define FZ_SIZES 2
#define FZ_MAX_PPB CC_PPB

static const char *const fz_tier_names[3] = { "gpu", "host", "nvme" };

static inline uint32_t fz_layers(int sz)
{
	return sz ? 1 : CC_L;
}

static inline uint32_t fz_ppb(int sz)
{
	return 2 * fz_layers(sz);
}

/* Where a block's bytes came from, besides the enum kvmm_block_action
 * values (1-4) of a prefix open with actions. */
#define FZ_FROM_CLIENT 0 /* written by this client */
#define FZ_FROM_PREFIX 5 /* a prefix open without actions */
#define FZ_FROM_UNSHARE 6 /* a copy kvmm_seq_block_unshare() made */
#define FZ_FROM_COUNT 7

enum fz_op {
	OP_OPEN,
	OP_PREFIX,
	OP_PREFIX_SEGMENTS,
	OP_PREFIX_EARLY,
	OP_EXTEND,
	OP_TRUNCATE,
	OP_CLOSE,
	OP_PUBLISH,
	OP_VERIFY,
	OP_PIN,
	OP_UNPIN,
	OP_STEP,
	OP_QUERY,
	OP_PIN_MANY,
	OP_UNSHARE,
	OP_COUNT
};

/* The parent's per-size admin churn (phase 5), per size asked (the
 * last: a drop of every size). */
struct fz_drop_counts {
	uint64_t drops; /* ADMIN_CACHE_DROPs answered */
	uint64_t dropped[3], kept[3]; /* gpu, host, nvme, from its replies */
	/* blocks of this size dropped by any drop (its part of it), per
	 * tier: at most the size's TIER_STATS drops */
	uint64_t part_dropped[3];
};

/* Counters every client adds to (shared memory: they survive SIGKILL). */
struct fz_counts {
	uint64_t ops[OP_COUNT];
	/* blocks compared byte for byte, by where their bytes came from
	 * (FZ_FROM_*, or the action a prefix open gave them) */
	uint64_t checked[FZ_FROM_COUNT];
	uint64_t recomputed; /* RECOMPUTE blocks written */
	uint64_t reload_failed; /* blocks kvmm_seq_wait_ready said failed */
	uint64_t early_cut; /* early opens cut or closed before the wait */
	uint64_t enomem; /* extends and opens the full pool refused */
	uint64_t pin_missing, pin_quota;
	/* prefix queries: answered, of random chains (always 0), blocks
	 * they found, and the opens right after that found fewer */
	uint64_t queries, query_random, query_blocks, query_open_less;
	uint64_t pin_many_calls, pin_many_pinned; /* as kvmmd counts them */
	/* copy-on-write (unshare.c): read-only blocks copied (at most
	 * kvmmd's blocks_unshared), asks short of room, blocks already the
	 * sequence's own, blocks past the length (-ENODATA), and the
	 * writes into a read-only block that faulted */
	uint64_t unshared, unshare_short, unshare_own, unshare_nodata;
	uint64_t ro_faults;
	uint64_t dquot; /* extends and opens past --quota (-EDQUOT) */
	/* publishes a revocation took blocks of (-ESTALE), sequences a
	 * revocation cut, as the client found them */
	uint64_t publish_stale, revoked_seen;
	uint64_t revokes, revokes_refused; /* the parent's ADMIN_REVOKEs */
	uint64_t clients, byes, exits, kills;
	/* blocks checked (any source), by size (phase 5: both) */
	uint64_t checked_size[FZ_SIZES];
	struct fz_drop_counts size_drops[FZ_SIZES + 1];
};

/* What a phase runs with. */
struct fz_phase {
	int num;
	uint64_t seed;
	const char *sock;
	uint64_t deadline_ms; /* clients stop starting new work */
	/* once the phase's time is up, its clients and the parent's churn
	 * go on until fz_facts_seen() (at most FZ_OVERTIME_MS more) */
	bool wait_facts;
	/* every phase's counts (main()'s, phase 1's first), set for the
	 * last phase with clients of a run from phase 1: it also waits for
	 * the run's copy-on-write facts (NULL: not this phase) */
	const struct fz_counts *run_cnt;
	bool strict; /* no reload may fail (fz_setup) */
	/* --cache-scope of every phase's daemon: uid for odd seeds (the
	 * clients are all one uid, so every invariant holds as in shared) */
	const char *scope;
	struct fz_counts *cnt;
	/* the parent changes the clients' tenant limit every 50-250 ms */
	bool limit_churn;
	uint64_t limit_sets; /* how many it set (the parent's count) */
	/* the parent revokes random blocks of the clients' open sequences
	 * every 20-120 ms (ADMIN_REVOKE): publishes race them, lengths
	 * shrink under the clients */
	bool revokes;
	bool quota; /* kvmmd --quota on the clients' uid: -EDQUOT is fine */
	/* block sizes the clients use (1, or FZ_SIZES in phase 5: a region
	 * of each, their sequences interleaved) */
	int nr_sizes;
	/* the parent drops one size's cached blocks (or every size's) every
	 * 50-300 ms (ADMIN_CACHE_DROP with block_pages, ABI 1.22) */
	bool drop_churn;
	/* the log of the last phase's kvmmd, read at its stop (printed when
	 * a restart finds less than it saved) */
	const char *stop_log;
	/* where each chain block of each size was before the last phase's
	 * stop (fz_where(); stop_where_set: asked), so that a restart that
	 * finds less names the blocks it lost and their tiers */
	bool stop_where_set;
	uint8_t stop_where[FZ_SIZES][FZ_CHAINS][FZ_CHAIN_BLOCKS];
	/* ... and where they are after the restart, before its reader */
	uint8_t restart_where[FZ_SIZES][FZ_CHAINS][FZ_CHAIN_BLOCKS];
};

/* How a phase's daemon runs, and what the phase may assert (main() in
 * tests/daemon-fuzz.c says why each is set up so). */
struct fz_setup {
	uint32_t nvme_slots;
	const char *restore_mode;
	const char *fail_spec; /* KVMMD_TEST_MIGRATE_FAIL, or NULL */
	unsigned int nfaults; /* entries in it */
	/* no migration, reload or checksum may fail (no fault injected) */
	bool no_fail;
	/* ... and nothing is dropped from NVMe (the tier never fills) */
	bool strict;
	/* blocks found on NVMe at start, at least (-1: any; more come back
	 * when freed slots still hold their last block's header) */
	int64_t min_recovered;
	bool limit_churn; /* fz_phase.limit_churn */
	bool revokes; /* fz_phase.revokes */
	/* kvmmd --quota on the clients' uid, in blocks (0: none), and
	 * --revoke-timeout (ms; 0: the default) */
	uint32_t quota_blocks;
	uint32_t revoke_timeout_ms;
	uint64_t ms;
	/* block sizes (2: --cache-block-pages naming fz_ppb(0) and
	 * fz_ppb(1), nvme_slots slots of the first in each size's NVMe
	 * partition) and the parent's drops of one size (fz_phase) */
	int nr_sizes;
	bool drop_churn;
	uint32_t save_ms; /* --nvme-save-on-stop (0: off) */
	/* no clients: a restart read back, each block by itself; each
	 * size's recovered blocks, at least (sizes, as min_recovered) */
	bool read_alone;
	int64_t min_recovered_size[FZ_SIZES];
};

/* What a client process holds. */
struct fz_seq {
	bool open;
	int sz; /* its block size (its region: fz_client.r[sz]) */
	uint32_t id;
	int chain;
	uint32_t len; /* tokens; every block below fz_blocks(len) is valid */
};

struct fz_client {
	const struct fz_phase *ph;
	int num;
	uint64_t rng;
	struct kvmm_conn *conn;
	struct kvmm_region *r[FZ_SIZES]; /* a region of each size used */
	struct fz_seq seqs[FZ_SEQS];
	uint64_t pinned; /* a plain pin of ours (0: none) */
	uint64_t want[FZ_WORDS];
};

static inline void fz_add(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

/* splitmix64: the PRNG of the clients and of the block contents. */
static inline uint64_t fz_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint32_t fz_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)(fz_next(s) % n);
}

/*
 * Block b of chain k of block size sz.  Chains 4-7 share their first 2
 * blocks with chain k % 4, chains 8-11 their first 4, so prefix opens
 * share blocks across chains; a hash names one prefix (equal hashes,
 * equal blocks before).  The sizes' chains have other hashes, as a real
 * client's do (their layouts seed them, abi.md): a pin names a hash
 * alone, and kvmmd finds it in whichever size's cache has it.
 */
static inline uint64_t fz_hash(int sz, int k, uint32_t b)
{
	uint32_t share = (uint32_t)(k / 4) * 2;
	uint64_t owner = b < share ? (uint64_t)(k % 4) : (uint64_t)k;
	uint64_t s = 0xf022000000ull + ((uint64_t)sz << 36) + (owner << 8) + b;
	uint64_t h = fz_next(&s);

	return h ? h : 1;
}

static inline void fz_chain(int sz, int k, uint64_t *h)
{
	for (uint32_t b = 0; b < FZ_CHAIN_BLOCKS; b++)
		h[b] = fz_hash(sz, k, b);
}

/* Page pg of the block of size sz named hash: a function of the three
 * alone, so a block of one size served for the other (a page of the
 * other's, a slot of the other's NVMe partition) has other bytes. */
static inline void fz_page_fill(uint64_t hash, int sz, uint32_t pg,
				uint64_t *out)
{
	uint64_t s = hash ^ (0x2545f4914f6cdd1dull * (pg + 1)) ^
		     (0x9e3779b97f4a7c15ull * (uint64_t)sz);

	for (uint32_t i = 0; i < FZ_WORDS; i++)
		out[i] = fz_next(&s);
}

static inline uint32_t fz_blocks(uint32_t len)
{
	return (len + CC_TPB - 1) / CC_TPB;
}

/* A size for what a client does next: 0 but in phase 5 (no draw then,
 * so phases 1-4 draw what they drew with one size). */
static inline int fz_pick_size(const struct fz_phase *ph, uint64_t *rng)
{
	return ph->nr_sizes > 1 ? (int)fz_below(rng, (uint32_t)ph->nr_sizes) :
				  0;
}

/* libkvmm region options of block size sz (cc_region_opts()'s with
 * fz_layers(sz) layers). */
static inline struct kvmm_region_opts fz_region_opts(int sz)
{
	struct kvmm_region_opts ro = cc_region_opts();

	ro.layers = fz_layers(sz);
	return ro;
}

/* ---- a client process (client.c) ----------------------------------- */

/* With KVMM_FUZZ_TRACE set, every operation of every client on stderr. */
extern bool fz_tracing;

/* Print the seed, phase and client with the message; exit the process. */
void __attribute__((format(printf, 2, 3), noreturn))
fz_fail(const struct fz_client *c, const char *fmt, ...);

/* A call that must succeed. */
#define fz_ok(c, call)                                                       \
	do {                                                                 \
		int _e = (call);                                             \
		if (_e)                                                      \
			fz_fail(c, "%s: %d (%s)", #call, _e, strerror(-_e)); \
	} while (0)

void __attribute__((format(printf, 2, 3)))
fz_trace(const struct fz_client *c, const char *fmt, ...);

/* s->len from libkvmm's length, which a revocation may have cut. */
void fz_sync(struct fz_client *c, struct fz_seq *s);

/* Prefix queries and pin-many (tests/daemon-fuzz/router.c). */
void op_query(struct fz_client *c);
void op_pin_many(struct fz_client *c);
/* Copy-on-write of a shared block (tests/daemon-fuzz/unshare.c). */
void op_unshare(struct fz_client *c);

/* client.c's pieces the other operations use: page pg of block b of s
 * in this process; block b written as an engine would (its hash's
 * bytes); every block of s checked; an open sequence (NULL: none) and
 * a free slot (NULL: none); a short pool or quota (counted: true) */
unsigned char *fz_page(struct fz_client *c, const struct fz_seq *s, uint32_t b,
		       uint32_t pg);
void fz_write(struct fz_client *c, const struct fz_seq *s, uint32_t b);
void fz_verify(struct fz_client *c, struct fz_seq *s);
struct fz_seq *fz_open_seq(struct fz_client *c);
struct fz_seq *fz_free_slot(struct fz_client *c);
bool fz_short(struct fz_client *c, int err);
void fz_close(struct fz_client *c, struct fz_seq *s);

/* Block b of s must hold its hash's bytes; from says where they came
 * from (FZ_FROM_*, or a prefix open's action). */
void fz_check(struct fz_client *c, const struct fz_seq *s, uint32_t b,
	      int from);
/* ... block b of s those of block hb of its chain. */
void fz_check_as(struct fz_client *c, const struct fz_seq *s, uint32_t hb,
		 uint32_t b, int from);

/*
 * Client number num of a phase: ops operations (or until the deadline),
 * then BYE (end 0) or an exit without it (1); with end 2 the parent kills
 * it at a time of its own choosing.
 */
void __attribute__((noreturn))
fz_client_run(const struct fz_phase *ph, int num, uint32_t ops, int end);

/* ---- the parent (daemon-fuzz.c; admin.c, sizes.c) ------------------- */

/* The parent's admin requests (admin.c): a tenant limit on the clients'
 * uid (0 in a tier: none there), a random one, the blocks moved for
 * them so far; a revocation of random blocks of an open sequence; a
 * drop of one random size's cached blocks (or every size's) in random
 * tiers, its reply checked and counted in ph->cnt->size_drops[]. */
void fz_set_limit(const struct fz_phase *ph, uint64_t gpu, uint64_t host,
		  uint64_t nvme);
void fz_churn_limit(struct fz_phase *ph, uint64_t *rng);
uint64_t fz_limit_moves(const struct fz_phase *ph);
void fz_revoke(struct fz_phase *ph, uint64_t *rng);
void fz_churn_drop(struct fz_phase *ph, uint64_t *rng);

/*
 * Whether the facts the phase's checks want at least once have been
 * seen (facts.c); if not, what is missing, with the values, in why.
 * FZ_OVERTIME_MS: how long past its time a phase waits for them.
 */
#define FZ_OVERTIME_MS 20000
struct td_daemon;
bool fz_facts_seen(const struct fz_phase *ph, const struct td_daemon *d,
		   char *why, size_t len);

/* TIER_STATS of size sz's cache alone (ABI 1.21). */
void fz_size_stats(const char *sock, int sz, struct kvmm_tier_stats_reply *ts);
/* Each size's tiers within their capacities (while the clients run). */
void fz_size_caps(const struct fz_phase *ph);
/* Once idle: the sizes' TIER_STATS and ADMIN_TENANTS add up to the
 * sums, each size within its capacities; ts[] each size's stats. */
void fz_check_sizes(const struct fz_phase *ph,
		    struct kvmm_tier_stats_reply ts[FZ_SIZES]);
/*
 * A last reader process: every chain of every size the phase uses
 * opened whole without actions (alone: each block by itself) and every
 * block found checked; the blocks found, each size's in found[] (may be
 * NULL).
 */
uint64_t fz_read_all(const struct fz_phase *ph, bool alone,
		     uint64_t found[FZ_SIZES]);
/* Where a block is: a KVMM_QUERY_* tier, or FZ_NOWHERE (not cached). */
#define FZ_NOWHERE 0xff
void fz_where(const struct fz_phase *ph,
	      uint8_t where[FZ_SIZES][FZ_CHAINS][FZ_CHAIN_BLOCKS]);
/* After a restart on a saving stop's file, before anything reads it:
 * where the blocks are (ph->restart_where; nothing when the stop's
 * were not asked). */
void fz_restart_where(struct fz_phase *ph);
/*
 * After a phase of two sizes: the sums (fz_check_sizes()) and what each
 * size did (see sizes.c); left[]: what a restart must recover of each.
 */
void fz_sizes_end(struct fz_phase *ph, const struct fz_setup *su,
		  const struct td_daemon *d, const uint64_t found[FZ_SIZES],
		  uint64_t left[FZ_SIZES]);

#endif
