/* SPDX-License-Identifier: MIT */
/*
 * What the policy tests that drive a cache with a random workload share:
 * the xorshift64 generator they draw it from, the FNV-1a digest of the
 * moves the cache reports (checked against one recorded with an older
 * build: the same moves, in the same order), and the random holds, pins
 * and references, they put on blocks between accesses.
 */
#ifndef KVMM_TESTS_POLICY_RANDOM_H
#define KVMM_TESTS_POLICY_RANDOM_H

#include <stdint.h>

#include "kvmm/policy/policy.h"

/* The next of Marsaglia's xorshift64 numbers after *x (never 0). */
static inline uint64_t pr_xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* The moves a cache reported, and a digest of them in order. */
struct pr_moves {
	uint64_t digest, moves;
};

#define PR_MOVES_INIT                            \
	{                                        \
		.digest = 1469598103934665603ull \
	}

/* FNV-1a over v's 8 bytes, lowest first. */
static inline void pr_mix(struct pr_moves *m, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		m->digest ^= (v >> (8 * i)) & 0xff;
		m->digest *= 1099511628211ull;
	}
}

/* One move, as the recorded digests count it: hash, from, to. */
static inline void pr_move(struct pr_moves *m, const struct pol_block *b,
			   unsigned from, unsigned to)
{
	pr_mix(m, b->hash);
	pr_mix(m, from);
	pr_mix(m, to);
	m->moves++;
}

/*
 * A random change of block h's holds, roll % 8 choosing: a pin (0), an
 * unpin (1, 2), a reference (3), an unreference (4, 5), nothing (6, 7).
 * What the cache answers is not checked: h may be unknown, or not held.
 */
static inline void pr_hold(struct pol_cache *c, uint64_t h, uint64_t roll)
{
	switch (roll % 8) {
	case 0:
		(void)pol_cache_pin(c, h);
		break;
	case 1:
	case 2:
		(void)pol_cache_unpin(c, h);
		break;
	case 3:
		(void)pol_cache_ref(c, h);
		break;
	case 4:
	case 5:
		(void)pol_cache_unref(c, h);
		break;
	}
}

#endif
