/* SPDX-License-Identifier: MIT */
/*
 * tests/daemon-crash-fuzz: what the parent (tests/daemon-crash-fuzz.c:
 * rounds, kvmmd started and SIGKILLed, the checks after each restart)
 * and its processes (tests/daemon-crash-fuzz/client.c: the clients that
 * publish and open, the operator that drops) share.  Everything the
 * checks need lives in shared memory, written before and after each
 * request, so a process stopped and killed at any point leaves a record
 * that errs on the safe side (a publish sent and not answered counts as
 * answered when kvmmd died).
 */
#ifndef KVMM_TESTS_DAEMON_CRASH_FUZZ_H
#define KVMM_TESTS_DAEMON_CRASH_FUZZ_H

#include <stdbool.h>
#include <stdint.h>

#include "tests/cache-common.h"

#define CF_CHAINS 24
/* the chains a round's clients use: a window that moves each round, so
 * blocks of earlier rounds stay unpublished and their drops checked */
#define CF_ROUND_CHAINS 12
#define CF_CHAIN_BLOCKS 4 /* blocks per chain, the longest sequence */
#define CF_HASHES (CF_CHAINS * CF_CHAIN_BLOCKS)
#define CF_CLIENTS 3
/* run as root: client i is uid CF_UID_BASE + i (the chains k with
 * k % CF_CLIENTS == i are its), and a --uid drop has tenants to tell
 * apart; CF_UID_NOBODY's drops cover none of them */
#define CF_UID_BASE 61400
#define CF_UID_NOBODY (CF_UID_BASE + 99)
#define CF_MAX_DROPS 4096
#define CF_WORDS (CC_PAGE / 8)

/* One hash's publishes, over every round (times: cf_now_us()). */
struct cf_hash_rec {
	/* the newest publish of it answered, or (kept pending at the
	 * kill) the time its kvmmd was killed: a drop sent after this
	 * came after every publish of the hash */
	uint64_t last_end_us;
	uint32_t pending; /* publishes sent, their answer not read yet */
	uint32_t published; /* answered publishes (any round) */
	/* sequences that may map it: counted before the prefix open is
	 * sent, until the sequence's close is answered (0 again after a
	 * kill); the time of the last such count taken */
	uint32_t holders;
	uint64_t last_acquire_us;
};

/* A drop the operator sent and kvmmd answered. */
struct cf_drop {
	uint64_t sent_us, acked_us;
	uint32_t round;
	uint32_t tiers, flags, tenant;
	bool via_kvmmctl;
	/* the hashes a client may have held while kvmmd ran it: the drop
	 * may have kept those as in use (its kept_in_use) */
	uint64_t held[(CF_HASHES + 63) / 64];
	struct kvmm_admin_cache_drop_reply rep;
};

struct cf_shared {
	bool uids; /* clients of CF_UID_BASE + i, or all of uid */
	uid_t uid; /* the test's */
	struct cf_hash_rec h[CF_HASHES];
	uint32_t ndrops; /* entries of drops[] written */
	struct cf_drop drops[CF_MAX_DROPS];
	/* what the clients did (all rounds) */
	uint64_t opens, blocks_checked, publishes, blocks_published;
	/* the check after a restart: whether hash i was found (its
	 * readers are processes of the hashes' uids) */
	uint8_t found[CF_HASHES];
	/* a wrong byte a client saw: the first one's description */
	uint32_t bad;
	char bad_msg[256];
};

/* What a client or the operator runs with. */
struct cf_proc {
	const char *sock;
	struct cf_shared *sh;
	uint64_t seed;
	uint32_t round;
};

/* Microseconds on the monotonic clock (one clock for every process). */
static inline uint64_t cf_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* splitmix64 */
static inline uint64_t cf_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The hash of block b of chain k (never 0), and back to its index. */
static inline uint64_t cf_hash(uint32_t k, uint32_t b)
{
	return 0xc5a50000000ULL + (uint64_t)k * 16 + b + 1;
}

static inline uint32_t cf_index(uint32_t k, uint32_t b)
{
	return k * CF_CHAIN_BLOCKS + b;
}

/* The uid whose client publishes chain k: its blocks' tenant. */
static inline uid_t cf_chain_uid(const struct cf_shared *sh, uint32_t k)
{
	return sh->uids ? (uid_t)(CF_UID_BASE + k % CF_CLIENTS) : sh->uid;
}

/* Word w of page p of the block named hash: its bytes are a function of
 * the hash alone, so every copy of it, in any tier, any round, is one
 * content. */
static inline uint64_t cf_word(uint64_t hash, uint32_t p, uint32_t w)
{
	uint64_t s = hash * 0x100000001b3ULL + (uint64_t)p * 0x10001 + w;

	return cf_rand(&s);
}

static inline void cf_fill(unsigned char *page, uint64_t hash, uint32_t p)
{
	uint64_t *q = (uint64_t *)page;

	for (uint32_t w = 0; w < CF_WORDS; w++)
		q[w] = cf_word(hash, p, w);
}

/* The first word of page p that is not the block's: its index, or -1. */
static inline int cf_first_bad(const unsigned char *page, uint64_t hash,
			       uint32_t p)
{
	const uint64_t *q = (const uint64_t *)page;

	for (uint32_t w = 0; w < CF_WORDS; w++)
		if (q[w] != cf_word(hash, p, w))
			return (int)w;
	return -1;
}

static inline bool cf_drop_held(const struct cf_drop *d, uint32_t i)
{
	return d->held[i / 64] >> (i % 64) & 1;
}

/* fork() with nothing left in this process's stdio buffers: a child
 * that flushes its copy (exit(), freopen()) would print the parent's
 * lines again. */
static inline pid_t cf_fork(void)
{
	fflush(stdout);
	fflush(stderr);
	return fork();
}

/* A client process (client.c), which loops until it is killed. */
pid_t cf_client_start(const struct cf_proc *p, int num);
/* The operator process (client.c): a drop every 30-300 ms; the leader
 * of a process group (its kvmmctl runs in it). */
pid_t cf_operator_start(const struct cf_proc *p);

#endif
