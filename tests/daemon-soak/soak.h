/* SPDX-License-Identifier: MIT */
/*
 * The mixed-workload soak (tests/daemon-soak.c): what its parts share.
 * The orchestrator (daemon-soak.c, with kvmmd.c, admin.c and proc.c,
 * which share run.h) runs kvmmd, the admin loop and the chaos; each
 * client process (client.c, with its ops in client-ops.c and its
 * checks in client-check.c) runs one engine-like workload
 * as one of SOAK_UIDS uids and checks every byte it reads.  They talk
 * through one MAP_SHARED page (struct soak_shared): the stop flag, the
 * socket path, counters, and the first broken invariant in words.
 */
#ifndef KVMM_TESTS_DAEMON_SOAK_H
#define KVMM_TESTS_DAEMON_SOAK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The region every client creates: 4 KiB pages (kvmmd --page-size 4K),
 * 2 layers of 1 KV head of 32 dims in 2-byte elements: 64 tokens a
 * block, 4 pages (layer 0 K, layer 0 V, layer 1 K, layer 1 V) a block,
 * SOAK_MAX_BLOCKS blocks a sequence. */
#define SOAK_PAGE 4096u
#define SOAK_LAYERS 2u
#define SOAK_TPB 64u
#define SOAK_PPB (2u * SOAK_LAYERS)
#define SOAK_MAX_BLOCKS 12u
#define SOAK_MAX_SEQS 4u
#define SOAK_WORDS (SOAK_PAGE / 8u)

/* Contents: SOAK_FAMILIES token sequences of SOAK_MAX_BLOCKS blocks;
 * family f shares its first 1 + f % 3 blocks with family f % 4, so
 * prefixes overlap and diverge. */
#define SOAK_FAMILIES 24u
#define SOAK_UIDS 3u
#define SOAK_UID0 61001u /* client slot i runs as SOAK_UID0 + i % SOAK_UIDS */
#define SOAK_MAX_CLIENTS 16u

/* Counters the clients add to, the orchestrator prints. */
enum soak_count {
	SC_OPS,
	SC_PREFIX_OPENS,
	SC_EARLY_OPENS,
	SC_BLOCKS_VERIFIED, /* cached blocks whose every byte was checked */
	SC_FRESH_CHECKED, /* fresh pages checked for other uids' bytes */
	SC_RECOMPUTES, /* RECOMPUTE blocks and failed early reloads */
	SC_PUBLISHED,
	SC_PINS,
	SC_FORKS,
	SC_RECONNECTS, /* after kvmmd restarted or the admin killed us */
	SC_REVOKED, /* sequences an admin revocation shortened */
	SC_ENOMEM,
	SC_EDQUOT,
	SC_OTHER_ALLOWED, /* ENOBUFS, ENOENT pins, ... */
	SC_NR
};

struct soak_shared {
	atomic_int stop; /* 1: clients finish their op, disconnect, exit 0 */
	int scope_uid; /* kvmmd runs --cache-scope uid */
	char sock[108];
	/* per client slot, bumped before a kvmmctl revoke of its session
	 * and zeroed by the client when it connects: while it is 0 no
	 * block may go that the client did not give back */
	atomic_uint revokes[SOAK_MAX_CLIENTS];
	atomic_ullong count[SC_NR];
	atomic_int failed; /* the first broken invariant wins the message */
	char why[512];
};

extern struct soak_shared *soak;

/* Client slot's process: runs until soak->stop, exits 0, or reports a
 * broken invariant (soak_fail) and exits 1.  Never returns. */
void soak_client(unsigned int slot, uint64_t seed);

/* Record the first broken invariant (printf-style) and exit 1. */
void soak_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)))
__attribute__((noreturn));

/* xorshift64*: every random choice of a run follows from its seed. */
static inline uint64_t soak_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static inline uint32_t soak_below(uint64_t *s, uint32_t n)
{
	return n ? (uint32_t)(soak_rand(s) % n) : 0;
}

static inline void soak_count(enum soak_count c, unsigned long long n)
{
	atomic_fetch_add(&soak->count[c], n);
}

#endif
