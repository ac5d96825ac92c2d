/* SPDX-License-Identifier: MIT */
/*
 * Every policy on small hand-made traces whose hit counts are worked out
 * by hand in the comments, including the rule that a prefix hit stops at
 * the first missing block and the lineage (prefix) rule.
 */
#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

static struct pol_cache *c;
static uint64_t clk;

static struct pol_cache *mk(enum pol_kind kind, uint64_t cap, int prefix)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = kind,
				    .capacity = { cap },
				    .prefix_rule = prefix };
	struct pol_cache *x;

	t_ok(pol_cache_create(&o, &x));
	clk = 0;
	return x;
}

/* Replay a request; next[] (may be NULL) are belady's next uses. */
static size_t req(const uint64_t *h, size_t n, const uint64_t *next)
{
	size_t k;

	pol_cache_set_clock(c, ++clk);
	k = pol_cache_prefix(c, h, n);
	for (size_t i = 0; i < n; i++) {
		struct pol_block_desc d = {
			.hash = h[i],
			.parent_hash = i ? h[i - 1] : 0,
			.position = (uint32_t)i,
			.flags = i ? POL_BLOCK_HAS_PARENT : 0,
			.next_use = next ? next[i] : UINT64_MAX,
		};
		t_ok(pol_cache_access(c, &d, NULL));
	}
	return k;
}

#define R(...) ((const uint64_t[]){ __VA_ARGS__ })
#define N(...) (sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t))
#define REQ(...) req(R(__VA_ARGS__), N(__VA_ARGS__), NULL)
#define NEVER UINT64_MAX

static bool resident(uint64_t h)
{
	return pol_cache_lookup(c, h) != NULL;
}

int main(void)
{
	size_t hits;

	/*
	 * LFU, capacity 3: [1 2 3] -> {1,2,3}; [1 2] hits 2 (counts 2,2,1);
	 * [4] evicts 3 (count 1); [3] evicts 4 (count 1, older than 3);
	 * [1 2 3] hits 3.  Total 5.  LRU gets 2 on the same trace: [3]
	 * evicts 1 and the last request misses at its first block.
	 */
	c = mk(POL_LFU, 3, 0);
	hits = REQ(1, 2, 3) + REQ(1, 2) + REQ(4) + REQ(3) + REQ(1, 2, 3);
	t_assert_eq(hits, 5);
	pol_cache_destroy(c);
	c = mk(POL_LRU, 3, 0);
	hits = REQ(1, 2, 3) + REQ(1, 2) + REQ(4) + REQ(3);
	t_assert(resident(2) && resident(3) && !resident(1));
	hits += REQ(1, 2, 3); /* 2 and 3 resident, but 1 is not: 0 hits */
	t_assert_eq(hits, 2);
	pol_cache_destroy(c);

	/*
	 * Lineage.  Capacity 3: [1 2 3] then [4] then [1 2 3].
	 * Plain LRU evicts 1 (the oldest) for 4: the last request hits 0.
	 * LRU with the prefix rule skips 1 and 2 (parents of resident
	 * children) and evicts the leaf 3: the last request hits 1, 2.
	 */
	c = mk(POL_LRU, 3, 0);
	t_assert_eq(REQ(1, 2, 3) + REQ(4) + REQ(1, 2, 3), 0);
	pol_cache_destroy(c);
	c = mk(POL_LRU, 3, 1);
	t_assert_eq(REQ(1, 2, 3) + REQ(4), 0);
	t_assert(!pol_cache_is_leaf(c, pol_cache_lookup(c, 1)));
	t_assert(pol_cache_is_leaf(c, pol_cache_lookup(c, 2)));
	t_assert_eq(pol_cache_lookup(c, 1)->nchild[POL_TIER_GPU], 1);
	t_assert_eq(REQ(1, 2, 3), 2);
	pol_cache_destroy(c);

	/*
	 * ARC, capacity 2: [1] miss -> T1; [1] hit -> T2; [2] -> T1;
	 * [3] -> T1, |T1| = 2 > p = 0: evict T1's LRU 2 -> B1; [1] hit;
	 * [2] ghost hit in B1: p = 1, 2 -> T2, |T1| = 1 = p: evict T2's
	 * LRU 1 -> B2; [3] hit.  Hits 3 (LRU: 1).
	 */
	c = mk(POL_ARC, 2, 0);
	hits = REQ(1) + REQ(1) + REQ(2) + REQ(3) + REQ(1) + REQ(2) + REQ(3);
	t_assert_eq(hits, 3);
	t_assert(resident(2) && resident(3) && !resident(1));
	pol_cache_destroy(c);
	c = mk(POL_LRU, 2, 0);
	hits = REQ(1) + REQ(1) + REQ(2) + REQ(3) + REQ(1) + REQ(2) + REQ(3);
	t_assert_eq(hits, 1);
	pol_cache_destroy(c);

	/*
	 * Belady, capacity 2 (next uses are request numbers):
	 * r1 [1 2] (next r3, r3); r2 [3] (next r4): 3 is used farthest in
	 * the future, so it is the victim itself (bypass); r3 [1 2] hits 2
	 * (next: never); r4 [3] misses: all never used again, the deepest
	 * goes first (2).  Hits 2.
	 */
	c = mk(POL_BELADY, 2, -1);
	hits = req(R(1, 2), 2, R(3, 3));
	hits += req(R(3), 1, R(4));
	t_assert(resident(1) && resident(2) && !resident(3));
	hits += req(R(1, 2), 2, R(NEVER, NEVER));
	hits += req(R(3), 1, R(NEVER));
	t_assert_eq(hits, 2);
	t_assert(resident(1) && resident(3) && !resident(2));
	pol_cache_destroy(c);

	/*
	 * asym learns which turns come back.  Training: sessions [a] and
	 * [a b] a few requests later, then [a b c] (a's first-turn life comes
	 * back, a and b come back from the second turn, c never), with
	 * one-shot requests [o o'] in between that never come back.  Then,
	 * capacity 4: [x], 3 one-shots, [x y], 3 more one-shots.  LRU
	 * evicts y and x, the least recent, so [x y w] hits 0; asym keeps the
	 * second-turn chain, whose class came back every time, and evicts
	 * one-shots instead (the same depth as y, so without the learned
	 * values it would evict y too): [x y w] hits 2.
	 */
	for (int kind = 0; kind < 2; kind++) {
		uint64_t h = 1000;

		c = mk(kind ? POL_ASYM : POL_LRU, 4, 1);
		for (int i = 0; i <= 1000; i++, h += 100) {
			REQ(h);
			REQ(h + 1, h + 11);
			REQ(h + 2, h + 12);
			REQ(h + 3, h + 13);
			REQ(h, h + 4);
			REQ(h + 5, h + 15);
			REQ(h + 6, h + 16);
			REQ(h + 7, h + 17);
			if (i == 1000)
				break;
			REQ(h, h + 4, h + 8);
		}
		t_assert_eq(REQ(h, h + 4, h + 8), kind ? 2u : 0u);
		pol_cache_destroy(c);
	}
	/*
	 * asym: a partial tail block has no reuse value.  Capacity 3:
	 * [1 2 5p] then [6]: 5p goes (value 0) although 6 is newer; then
	 * [1 2 7]: 2 hits, 7 evicts 6 (used once, cheapest), [1 2 7] hits 3.
	 */
	c = mk(POL_ASYM, 3, -1);
	pol_cache_set_clock(c, ++clk);
	for (int i = 0; i < 3; i++) {
		struct pol_block_desc d = {
			.hash = (uint64_t[]){ 1, 2, 5 }[i],
			.parent_hash = i ? (uint64_t[]){ 1, 2, 5 }[i - 1] : 0,
			.position = (uint32_t)i,
			.flags = (i ? POL_BLOCK_HAS_PARENT : 0) |
				 (i == 2 ? POL_BLOCK_PARTIAL : 0),
			.next_use = NEVER,
		};
		t_ok(pol_cache_access(c, &d, NULL));
	}
	t_assert_eq(REQ(6), 0);
	t_assert(!resident(5) && resident(6));
	t_assert_eq(REQ(1, 2, 7), 2);
	t_assert(!resident(6));
	t_assert_eq(REQ(1, 2, 7), 3);
	pol_cache_destroy(c);
	return 0;
}
