/* SPDX-License-Identifier: MIT */
/*
 * An access to a block cached below, when the GPU tier could make no
 * room for it, leaves the block where it is and says so (-ENOSPC): it is
 * not moved up and then dropped, lower copy and pins and all.  Every
 * policy: the GPU's only block pinned; the GPU's only other block the
 * block's own parent (which it would make a non-leaf); and
 * pol_cache_can_promote() saying the same beforehand.  And
 * pol_cache_can_access() answers what the access does, also for a block
 * whose children are cached below with it: not evictable there, but a
 * leaf on the GPU and its own victim (kvmmd once asked
 * pol_cache_evictable() instead, and kept such a restored block below
 * with no access).
 */
#include <errno.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

static int drops;

static void on_move(void *arg, const struct pol_block *b, unsigned from,
		    unsigned to)
{
	(void)arg;
	(void)from;
	if (to == POL_TIER_NONE && (b->pins || b->refcount))
		drops++;
}

static int touch(struct pol_cache *c, uint64_t h, uint64_t parent,
		 uint64_t next_use, unsigned *was)
{
	struct pol_block_desc d = { .hash = h,
				    .parent_hash = parent,
				    .flags = parent ? POL_BLOCK_HAS_PARENT : 0,
				    .next_use = next_use };

	return pol_cache_access(c, &d, was);
}

int main(void)
{
	for (int k = 0; k < POL_KIND_COUNT; k++) {
		struct pol_cache_opts o = { .size = sizeof(o),
					    .kind = (enum pol_kind)k,
					    .capacity = { 1, 1 },
					    .prefix_rule = 1 };
		struct pol_cache_stats st, st2;
		struct pol_cache *c;
		unsigned was;

		/* GPU {10 pinned}, host {20 pinned}: 20 cannot come up */
		t_ok(pol_cache_create(&o, &c));
		pol_cache_set_move_handler(c, on_move, NULL);
		drops = 0;
		pol_cache_set_clock(c, 1);
		t_ok(touch(c, 10, 0, 5, NULL));
		t_ok(pol_cache_pin(c, 10));
		pol_cache_set_clock(c, 2);
		t_ok(touch(c, 20, 0, 1, NULL));
		t_assert_eq(pol_cache_tier_of(c, 20), POL_TIER_HOST);
		t_ok(pol_cache_pin(c, 20));
		t_assert(!pol_cache_can_promote(c, POL_TIER_GPU, 20));
		t_assert(!pol_cache_can_access(c, 20));
		t_assert(pol_cache_can_access(c, 10));
		t_assert(pol_cache_can_access(c, 30)); /* in no tier */
		pol_cache_set_clock(c, 3);
		t_assert_eq(touch(c, 20, 0, 1, &was), -ENOSPC);
		t_assert_eq(was, POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 20), POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 10), POL_TIER_GPU);
		t_ok(pol_cache_unpin(c, 20));
		t_assert_eq(drops, 0);
		pol_cache_get_stats(c, &st);
		t_assert_eq(st.refused, 1);
		t_assert_eq(st.promotions, 0);
		/* unpinned, it may be its own victim: up and back down,
		 * though nothing else on the GPU could go (what
		 * pol_cache_can_promote() tells kvmmd) */
		t_assert(!pol_cache_can_promote(c, POL_TIER_GPU, 20));
		t_assert(pol_cache_can_access(c, 20));
		t_ok(touch(c, 20, 0, 1, NULL));
		t_assert(pol_cache_tier_of(c, 20) != POL_TIER_NONE);
		pol_cache_destroy(c);

		/* GPU {1}, host {2: 1's child, pinned}: 2 up would make 1
		 * a parent of a GPU block, and 2 cannot go back itself */
		t_ok(pol_cache_create(&o, &c));
		pol_cache_set_move_handler(c, on_move, NULL);
		pol_cache_set_clock(c, 1);
		t_ok(touch(c, 1, 0, 10, NULL));
		pol_cache_set_clock(c, 2);
		t_ok(touch(c, 2, 1, 20, NULL));
		t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_GPU);
		t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_HOST);
		t_ok(pol_cache_pin(c, 2));
		t_assert(!pol_cache_can_promote(c, POL_TIER_GPU, 2));
		t_assert(!pol_cache_can_access(c, 2));
		pol_cache_set_clock(c, 3);
		t_assert_eq(touch(c, 2, 1, 20, NULL), -ENOSPC);
		t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_GPU);
		t_ok(pol_cache_unpin(c, 2));
		t_assert_eq(drops, 0);
		pol_cache_destroy(c);

		/* GPU {10 pinned}, host {20, 21: 20's child}: 20 is no
		 * leaf in the host tier, so not evictable there, but on
		 * the GPU it is: up and straight back down */
		o.capacity[POL_TIER_HOST] = 2;
		t_ok(pol_cache_create(&o, &c));
		pol_cache_set_move_handler(c, on_move, NULL);
		pol_cache_set_clock(c, 1);
		t_ok(touch(c, 10, 0, 5, NULL));
		t_ok(pol_cache_pin(c, 10));
		pol_cache_set_clock(c, 2);
		t_ok(touch(c, 20, 0, 1, NULL));
		pol_cache_set_clock(c, 3);
		t_ok(touch(c, 21, 20, 2, NULL));
		t_assert_eq(pol_cache_tier_of(c, 20), POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 21), POL_TIER_HOST);
		t_assert(!pol_cache_evictable(c, pol_cache_lookup(c, 20)));
		t_assert(!pol_cache_can_promote(c, POL_TIER_GPU, 20));
		t_assert(pol_cache_can_access(c, 20));
		pol_cache_get_stats(c, &st);
		pol_cache_set_clock(c, 4);
		t_ok(touch(c, 20, 0, 1, &was));
		t_assert_eq(was, POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 20), POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 21), POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 10), POL_TIER_GPU);
		t_assert_eq(pol_cache_lookup(c, 20)->last_access, 4);
		pol_cache_get_stats(c, &st2);
		t_assert_eq(st2.promotions, st.promotions + 1);
		t_assert_eq(st2.refused, st.refused);
		t_assert_eq(drops, 0);
		pol_cache_destroy(c);
		o.capacity[POL_TIER_HOST] = 1;
	}
	return T_PASS;
}
