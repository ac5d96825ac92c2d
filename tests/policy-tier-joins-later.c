/* SPDX-License-Identifier: MIT */
/*
 * A tier that joins a running cache (pol_cache_opts.joins_later, kvmmd's
 * NVMe tier whose file opens late): it exists at capacity 0 and blocks
 * pass it by (host victims are dropped, nothing is reported moving to
 * it); once pol_cache_set_capacity() gives it a capacity, host victims go
 * down to it and are dropped from it, the last tier now, for every
 * policy.  A capacity and joins_later for the same tier is -EINVAL, and a
 * tier in neither cannot be given a capacity later.
 */
#include <errno.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

static int moves[4][4];

static unsigned ix(unsigned t)
{
	return t == POL_TIER_NONE ? 3 : t;
}

static void on_move(void *arg, const struct pol_block *b, unsigned from,
		    unsigned to)
{
	moves[ix(from)][ix(to)]++;
}

static uint64_t future = 1000;

static int touch(struct pol_cache *c, uint64_t h)
{
	struct pol_block_desc d = { .hash = h, .next_use = --future };

	pol_cache_set_clock(c, 1000 - future);
	return pol_cache_access(c, &d, NULL);
}

int main(void)
{
	for (int k = 0; k < POL_KIND_COUNT; k++) {
		struct pol_cache_opts o = { .size = sizeof(o),
					    .kind = (enum pol_kind)k,
					    .capacity = { 1, 1, 0 },
					    .joins_later = 1u << POL_TIER_NVME,
					    .prefix_rule = -1 };
		struct pol_cache_stats st;
		struct pol_cache *c;
		uint64_t x = 11;

		memset(moves, 0, sizeof(moves));
		t_ok(pol_cache_create(&o, &c));
		pol_cache_set_move_handler(c, on_move, NULL);
		t_assert(pol_cache_has_tier(c, POL_TIER_NVME));
		t_assert_eq(pol_cache_capacity(c, POL_TIER_NVME), 0);
		t_assert_eq(pol_cache_lower_tier(c, POL_TIER_HOST),
			    POL_TIER_NONE);
		/* gpu 1, host 1: the third block drops one from the host */
		for (uint64_t h = 1; h <= 3; h++)
			t_ok(touch(c, h));
		t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 0);
		t_assert_eq(moves[1][2], 0);
		t_assert_eq(moves[1][3], 1);

		/* it joins: host victims go down to it */
		t_ok(pol_cache_set_capacity(c, POL_TIER_NVME, 2));
		t_assert_eq(pol_cache_lower_tier(c, POL_TIER_HOST),
			    POL_TIER_NVME);
		for (uint64_t h = 4; h <= 5; h++)
			t_ok(touch(c, h));
		t_assert_eq(moves[1][2], 2);
		t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 2);
		t_assert_eq(moves[1][3], 1); /* none dropped since */
		/* full: the next goes from NVMe, not from the host tier */
		t_ok(touch(c, 6));
		t_assert_eq(moves[2][3], 1);
		t_assert_eq(moves[1][3], 1);

		/* and it runs as any three-tier cache */
		for (int i = 0; i < 500; i++) {
			x = x * 6364136223846793005ull + 1;
			t_ok(touch(c, 100 + (x >> 33) % 12));
			for (unsigned t = 0; t < POL_TIER_COUNT; t++)
				t_assert(pol_cache_count(c, t) <=
					 pol_cache_capacity(c, t));
		}
		pol_cache_get_stats(c, &st);
		t_assert_eq(st.inserts - st.drops, 4);
		t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 2);

		/* and leaves again: its blocks are dropped, none go to it */
		t_ok(pol_cache_set_capacity(c, POL_TIER_NVME, 0));
		t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 0);
		t_assert_eq(pol_cache_lower_tier(c, POL_TIER_HOST),
			    POL_TIER_NONE);
		pol_cache_destroy(c);
	}

	{
		struct pol_cache_opts o = { .size = sizeof(o),
					    .kind = POL_LRU,
					    .capacity = { 1, 1, 1 },
					    .joins_later = 1u << POL_TIER_NVME,
					    .prefix_rule = -1 };
		struct pol_cache *c;

		t_assert_eq(pol_cache_create(&o, &c), -EINVAL);
		o.capacity[POL_TIER_NVME] = 0;
		o.joins_later = 0;
		t_ok(pol_cache_create(&o, &c));
		t_assert(!pol_cache_has_tier(c, POL_TIER_NVME));
		t_assert_eq(pol_cache_set_capacity(c, POL_TIER_NVME, 4),
			    -EINVAL);
		pol_cache_destroy(c);
	}
	printf("a tier joined %d policies at capacity 0 and took blocks once raised\n",
	       POL_KIND_COUNT);
	return 0;
}
