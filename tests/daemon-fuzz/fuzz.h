/* SPDX-License-Identifier: MIT */
/*
 * tests/daemon-fuzz: what the parent (tests/daemon-fuzz.c: phases,
 * daemons, capacity and idle checks) and the client processes
 * (tests/daemon-fuzz/client.c: the operations and the byte checks)
 * share.  The bytes of a block are a function of its hash alone
 * (fz_page_fill()), the PRNG is splitmix64, and every counter lives in
 * shared memory so a SIGKILLed client's counts survive it.
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
#define FZ_WORDS (CC_PAGE / 8)

/* Where a block's bytes came from, besides the enum kvmm_block_action
 * values (1-4) of a prefix open with actions. */
#define FZ_FROM_CLIENT 0 /* written by this client */
#define FZ_FROM_PREFIX 5 /* a prefix open without actions */
#define FZ_FROM_COUNT 6

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
	OP_COUNT
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
	uint64_t dquot; /* extends and opens past --quota (-EDQUOT) */
	/* publishes a revocation took blocks of (-ESTALE), sequences a
	 * revocation cut, as the client found them */
	uint64_t publish_stale, revoked_seen;
	uint64_t revokes, revokes_refused; /* the parent's ADMIN_REVOKEs */
	uint64_t clients, byes, exits, kills;
};

/* What a phase runs with. */
struct fz_phase {
	int num;
	uint64_t seed;
	const char *sock;
	uint64_t deadline_ms; /* clients stop starting new work */
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
};

/* What a client process holds. */
struct fz_seq {
	bool open;
	uint32_t id;
	int chain;
	uint32_t len; /* tokens; every block below fz_blocks(len) is valid */
};

struct fz_client {
	const struct fz_phase *ph;
	int num;
	uint64_t rng;
	struct kvmm_conn *conn;
	struct kvmm_region *r;
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
 * Block b of chain k.  Chains 4-7 share their first 2 blocks with chain
 * k % 4, chains 8-11 their first 4, so prefix opens share blocks across
 * chains; a hash names one prefix (equal hashes, equal blocks before).
 */
static inline uint64_t fz_hash(int k, uint32_t b)
{
	uint32_t share = (uint32_t)(k / 4) * 2;
	uint64_t owner = b < share ? (uint64_t)(k % 4) : (uint64_t)k;
	uint64_t s = 0xf022000000ull + (owner << 8) + b;
	uint64_t h = fz_next(&s);

	return h ? h : 1;
}

static inline void fz_chain(int k, uint64_t *h)
{
	for (uint32_t b = 0; b < FZ_CHAIN_BLOCKS; b++)
		h[b] = fz_hash(k, b);
}

/* Page pg of the block named hash: a function of the two alone. */
static inline void fz_page_fill(uint64_t hash, uint32_t pg, uint64_t *out)
{
	uint64_t s = hash ^ (0x2545f4914f6cdd1dull * (pg + 1));

	for (uint32_t i = 0; i < FZ_WORDS; i++)
		out[i] = fz_next(&s);
}

static inline uint32_t fz_blocks(uint32_t len)
{
	return (len + CC_TPB - 1) / CC_TPB;
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

/* Block b of s must hold its hash's bytes; from says where they came
 * from (FZ_FROM_*, or a prefix open's action). */
void fz_check(struct fz_client *c, const struct fz_seq *s, uint32_t b,
	      int from);

/*
 * Client number num of a phase: ops operations (or until the deadline),
 * then BYE (end 0) or an exit without it (1); with end 2 the parent kills
 * it at a time of its own choosing.
 */
void __attribute__((noreturn))
fz_client_run(const struct fz_phase *ph, int num, uint32_t ops, int end);

#endif
