/* SPDX-License-Identifier: MIT */
/*
 * The policy tests' cache, requests and their workload of short chains that
 * come back and long ones that never do (tests/policy-few-new.c,
 * tests/policy-learned.c).
 */
#ifndef KVMM_TESTS_POLICY_WORKLOAD_H
#define KVMM_TESTS_POLICY_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

/* A GPU-only cache of cap blocks, the policy's default prefix rule. */
static inline struct pol_cache *pw_cache(enum pol_kind kind, uint64_t cap)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = kind,
				    .capacity = { cap },
				    .prefix_rule = -1 };
	struct pol_cache *c;

	t_ok(pol_cache_create(&o, &c));
	return c;
}

/*
 * One request at clock clk: its prefix hits (returned), then every block
 * accessed in order as one chain; tell: say whether it brings few blocks
 * the cache does not know (POL_BLOCK_FEW_NEW), as kvmmd does.
 */
static inline size_t pw_request(struct pol_cache *c, uint64_t clk,
				const uint64_t *h, uint32_t n, bool tell)
{
	unsigned few = tell && pol_cache_few_new(c, h, n) ? POL_BLOCK_FEW_NEW :
							    0;
	size_t k;

	pol_cache_set_clock(c, clk);
	k = pol_cache_prefix(c, h, n);
	for (uint32_t i = 0; i < n; i++) {
		struct pol_block_desc d = {
			.hash = h[i],
			.parent_hash = i ? h[i - 1] : 0,
			.position = i,
			.flags = (i ? POL_BLOCK_HAS_PARENT : 0) | few,
			.next_use = UINT64_MAX,
		};

		t_ok(pol_cache_access(c, &d, NULL));
	}
	return k;
}

/*
 * nreq requests into c, hashes from `first` on: fresh 3-block chains
 * (few new blocks) that come back once, 16 short requests later, and
 * fresh 12-block chains (not few) that never come back, interleaved.
 * Each request at the next clock.  Returns the hits of the comebacks;
 * 3000 requests access 1500 x 3 + 1500 x 12 + 1484 x 3 blocks.
 */
static inline size_t pw_short_long(struct pol_cache *c, uint64_t first,
				   int nreq, bool tell)
{
	uint64_t next = first, shortc[16][3], clk = 0;
	size_t hits = 0;

	for (int r = 0; r < nreq; r++) {
		uint64_t h[12];

		if (r % 2 == 0) {
			uint64_t *s = shortc[(r / 2) % 16];

			if (r >= 32) /* the chain made 16 short ones ago */
				hits += pw_request(c, ++clk, s, 3, tell);
			for (int i = 0; i < 3; i++)
				s[i] = next++;
			pw_request(c, ++clk, s, 3, tell);
		} else {
			for (int i = 0; i < 12; i++)
				h[i] = next++;
			pw_request(c, ++clk, h, 12, tell);
		}
	}
	return hits;
}

#endif
