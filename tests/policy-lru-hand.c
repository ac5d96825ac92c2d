/* SPDX-License-Identifier: MIT */
/*
 * LRU through pol_cache on a hand-made trace, hits worked out by hand,
 * including the rule that a prefix hit stops at the first missing block.
 */
#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

static struct pol_cache *c;

/* Replay one request: count the leading resident run, then touch all. */
static size_t request(const uint64_t *h, size_t n)
{
	size_t k = pol_cache_prefix(c, h, n);

	for (size_t i = 0; i < n; i++) {
		struct pol_block_desc d = { .hash = h[i],
					    .parent_hash = i ? h[i - 1] : 0,
					    .position = (uint32_t)i,
					    .flags = i ? POL_BLOCK_HAS_PARENT :
							 0,
					    .next_use = UINT64_MAX };
		t_ok(pol_cache_access(c, &d, NULL));
	}
	return k;
}

int main(void)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_LRU,
				    .capacity = { 3 },
				    .prefix_rule = -1 };
	uint64_t r1[] = { 1, 2, 3 }, r2[] = { 1, 2, 4 }, r3[] = { 1, 2, 3 },
		 r4[] = { 5 }, r5[] = { 1, 2, 4 };

	t_ok(pol_cache_create(&o, &c));
	/* cache (LRU->MRU) after each: [1 2 3] */
	t_assert_eq(request(r1, 3), 0);
	/* 1,2 hit; 4 evicts 3: [1 2 4] */
	t_assert_eq(request(r2, 3), 2);
	/* 1,2 hit; 3 evicts 4: [1 2 3] */
	t_assert_eq(request(r3, 3), 2);
	/* 5 evicts 1: [2 3 5] */
	t_assert_eq(request(r4, 1), 0);
	/* 1 misses: the prefix hit is 0 though 2 is resident */
	t_assert(pol_cache_lookup(c, 2) != NULL);
	t_assert_eq(request(r5, 3), 0);
	t_assert_eq(pol_cache_count(c, POL_TIER_GPU), 3);
	t_assert_eq(pol_cache_tier_of(c, 5), POL_TIER_NONE);
	pol_cache_destroy(c);
	return 0;
}
