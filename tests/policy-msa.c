/* SPDX-License-Identifier: MIT */
/*
 * A cache created for Multi-Segment Attention (pol_cache_opts.msa, what
 * kvmm-replay --msa makes): the prefix rule is off unless asked for,
 * except for asym, which keeps it by default (it loses hits without it);
 * without it asym may evict an inner block of a chain (its children stay
 * usable);
 * asym, among equally valued candidates, evicts the shallower one, the
 * cheaper miss, in every tier; belady, among equal next uses, the
 * shallowest.  Each case is worked out in its comment, against the same
 * cache without MSA.
 */
#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

static struct pol_cache *c;
static uint64_t clk;

static struct pol_cache *mk(enum pol_kind kind, uint64_t gpu, uint64_t host,
			    int prefix, bool msa)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = kind,
				    .capacity = { gpu, host },
				    .prefix_rule = prefix,
				    .msa = msa };
	struct pol_cache *x;

	t_ok(pol_cache_create(&o, &x));
	clk = 0;
	return x;
}

/* Access a request's chain h[0..n); flags for all its blocks, next[]
 * (may be NULL) belady's next uses. */
static void req(const uint64_t *h, size_t n, unsigned flags,
		const uint64_t *next)
{
	pol_cache_set_clock(c, ++clk);
	for (size_t i = 0; i < n; i++) {
		struct pol_block_desc d = {
			.hash = h[i],
			.parent_hash = i ? h[i - 1] : 0,
			.position = (uint32_t)i,
			.flags = (i ? POL_BLOCK_HAS_PARENT : 0) | flags,
			.next_use = next ? next[i] : UINT64_MAX,
		};
		t_ok(pol_cache_access(c, &d, NULL));
	}
}

#define R(...) ((const uint64_t[]){ __VA_ARGS__ })
#define N(...) (sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t))
#define REQ(f, ...) req(R(__VA_ARGS__), N(__VA_ARGS__), f, NULL)

static unsigned tier(uint64_t h)
{
	return pol_cache_tier_of(c, h);
}

int main(void)
{
	/* The prefix rule: off by default with MSA but for asym, on when
	 * asked. */
	for (int k = 0; k < POL_KIND_COUNT; k++) {
		c = mk((enum pol_kind)k, 4, 0, -1, true);
		t_assert(pol_cache_msa(c) &&
			 pol_cache_prefix_rule(c) == (k == POL_ASYM));
		pol_cache_destroy(c);
		c = mk((enum pol_kind)k, 4, 0, 1, true);
		t_assert(pol_cache_prefix_rule(c));
		pol_cache_destroy(c);
		c = mk((enum pol_kind)k, 4, 0, -1, false);
		t_assert(!pol_cache_msa(c));
		t_assert(pol_cache_prefix_rule(c) ==
			 (k == POL_ASYM || k == POL_BELADY));
		pol_cache_destroy(c);
	}

	/*
	 * asym, 3 GPU blocks, no statistics yet (every value 0, so the
	 * candidates tie): [1 2 3], then [1] again (1 moves to the class of
	 * a second use), then [9].  The candidates are the tails of the
	 * class lists: 3 (position 2) and 1 (position 0).  With MSA and the
	 * prefix rule off (asked for: asym's default keeps it) the shallower
	 * goes, 1, an inner block: 2 and 3 stay,
	 * and a request [1 2 3] would be served 2 and 3 and recompute 1.
	 * With the prefix rule 1 is no candidate (2 is its resident child)
	 * and the leaf 3 goes.
	 */
	for (int msa = 1; msa >= 0; msa--) {
		c = mk(POL_ASYM, 3, 0, msa ? 0 : 1, true);
		REQ(0, 1, 2, 3);
		REQ(0, 1);
		REQ(0, 9);
		if (msa) {
			t_assert_eq(tier(1), POL_TIER_NONE);
			t_assert(tier(2) == POL_TIER_GPU &&
				 tier(3) == POL_TIER_GPU);
			t_assert_eq(pol_cache_prefix(c, R(1, 2, 3), 3), 0);
		} else {
			t_assert_eq(tier(3), POL_TIER_NONE);
			t_assert_eq(pol_cache_prefix(c, R(1, 2, 3), 3), 2);
		}
		t_assert_eq(tier(9), POL_TIER_GPU);
		pol_cache_destroy(c);
	}

	/*
	 * asym, 5 GPU + 10 host blocks, values all 0: [3 4 5] from a short
	 * request (POL_BLOCK_FEW_NEW: the other set of classes), then [1 2]
	 * and [6].  The GPU tier is over by one; the candidates are 5
	 * (position 2, used first) and 2 (position 1, the tail of the other
	 * list).  In a tier with a lower tier a miss is a reload, the same
	 * for every block: without MSA the less recent, 5, goes down.  With
	 * MSA a miss costs the block's own recomputation beyond the reload,
	 * which grows with the position: the shallower, 2, goes down and the
	 * expensive 5 stays.
	 */
	for (int msa = 0; msa < 2; msa++) {
		c = mk(POL_ASYM, 5, 10, 0, msa);
		REQ(POL_BLOCK_FEW_NEW, 3, 4, 5);
		REQ(0, 1, 2);
		REQ(0, 6);
		t_assert_eq(tier(msa ? 2 : 5), POL_TIER_HOST);
		t_assert_eq(tier(msa ? 5 : 2), POL_TIER_GPU);
		t_assert_eq(pol_cache_count(c, POL_TIER_HOST), 1);
		pol_cache_destroy(c);
	}

	/*
	 * belady, 2 GPU blocks, no prefix rule either way: [1 2], both next
	 * used by request 5, then [3], next used by request 4.  1 and 2 are
	 * needed farthest, tied: without MSA the deepest goes (2), with MSA
	 * the shallowest (1), the same hits for a cheaper miss.
	 */
	for (int msa = 0; msa < 2; msa++) {
		c = mk(POL_BELADY, 2, 0, 0, msa);
		req(R(1, 2), 2, 0, R(5, 5));
		req(R(3), 1, 0, R(4));
		t_assert_eq(tier(msa ? 1 : 2), POL_TIER_NONE);
		t_assert_eq(tier(msa ? 2 : 1), POL_TIER_GPU);
		t_assert_eq(tier(3), POL_TIER_GPU);
		pol_cache_destroy(c);
	}
	return 0;
}
