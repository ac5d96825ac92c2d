/* SPDX-License-Identifier: MIT */
/*
 * Exclusive tiers (demote down, drop from the last, promote on use), the
 * moves reported to the owner, and what blocks eviction: pins,
 * references and TTL pins, held in their tier or demotable.
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

/* For belady: the latest block is needed soonest (LRU-like future). */
static uint64_t future = 1000;

static int touch(struct pol_cache *c, uint64_t h, unsigned *was)
{
	struct pol_block_desc d = { .hash = h, .next_use = --future };

	/* ties between equally used blocks go to the least recent */
	pol_cache_set_clock(c, 1000 - future);
	return pol_cache_access(c, &d, was);
}

int main(void)
{
	/*
	 * asym ranks blocks used alike by a learned value that moves between
	 * their accesses, so its placement is not LRU-like: it gets the
	 * invariants below instead.
	 */
	for (int k = 0; k < POL_KIND_COUNT; k++) {
		if (k == POL_ASYM)
			continue;
		struct pol_cache_opts o = { .size = sizeof(o),
					    .kind = (enum pol_kind)k,
					    .capacity = { 1, 1 },
					    .prefix_rule = -1 };
		struct pol_cache_stats st;
		struct pol_cache *c;
		unsigned was;

		memset(moves, 0, sizeof(moves));
		t_ok(pol_cache_create(&o, &c));
		pol_cache_set_move_handler(c, on_move, NULL);
		/* [1]: gpu {1}.  [2]: gpu {2}, host {1}. */
		t_ok(touch(c, 1, &was));
		t_assert_eq(was, POL_TIER_NONE);
		t_ok(touch(c, 2, NULL));
		t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_GPU);
		/* [1] from host: promoted, 2 demoted. */
		t_ok(touch(c, 1, &was));
		t_assert_eq(was, POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_GPU);
		t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_HOST);
		/* [3]: 1 demoted, 2 dropped from the last tier. */
		t_ok(touch(c, 3, NULL));
		t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_NONE);
		pol_cache_get_stats(c, &st);
		t_assert_eq(st.inserts, 3);
		t_assert_eq(st.hits[POL_TIER_HOST], 1);
		t_assert_eq(st.promotions, 1);
		t_assert_eq(st.demotions[POL_TIER_GPU], 3);
		t_assert_eq(st.drops, 1);
		t_assert_eq(moves[3][0], 3); /* admitted */
		t_assert_eq(moves[1][0], 1); /* promoted */
		t_assert_eq(moves[0][1], 3); /* demoted */
		t_assert_eq(moves[1][3], 1); /* dropped */
		pol_cache_destroy(c);
	}

	/* Any policy: tiers within capacity, every block somewhere once. */
	for (int k = 0; k < POL_KIND_COUNT; k++) {
		struct pol_cache_opts o = { .size = sizeof(o),
					    .kind = (enum pol_kind)k,
					    .capacity = { 2, 3, 4 },
					    .prefix_rule = -1 };
		struct pol_cache_stats st;
		struct pol_cache *c;
		uint64_t x = 7;

		memset(moves, 0, sizeof(moves));
		t_ok(pol_cache_create(&o, &c));
		pol_cache_set_move_handler(c, on_move, NULL);
		for (int i = 0; i < 500; i++) {
			x = x * 6364136223846793005ull + 1;
			t_ok(touch(c, (x >> 33) % 16, NULL));
			for (unsigned t = 0; t < POL_TIER_COUNT; t++)
				t_assert(pol_cache_count(c, t) <=
					 pol_cache_capacity(c, t));
		}
		pol_cache_get_stats(c, &st);
		/* admitted - dropped = resident (the tiers are full: 9) */
		t_assert_eq(moves[3][0] - moves[0][3] - moves[1][3] -
				    moves[2][3],
			    9);
		t_assert_eq(st.inserts - st.drops, 9);
		t_assert_eq(st.hits[0] + st.hits[1] + st.hits[2] + st.inserts,
			    500);
		pol_cache_destroy(c);
	}

	/* Pins, references and TTLs keep a block; capacity 1, one tier. */
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_LRU,
				    .capacity = { 1 },
				    .prefix_rule = -1 };
	struct pol_cache *c;

	t_ok(pol_cache_create(&o, &c));
	future = 1000;
	t_ok(touch(c, 1, NULL));
	t_ok(pol_cache_pin(c, 1));
	/* The only evictable block is the new one: it is not kept. */
	t_ok(touch(c, 2, NULL));
	t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_NONE);
	t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_GPU);
	t_ok(pol_cache_unpin(c, 1));
	t_assert_eq(pol_cache_unpin(c, 1), -EINVAL);
	t_ok(pol_cache_ref(c, 1));
	t_ok(touch(c, 2, NULL));
	t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_NONE);
	t_ok(pol_cache_unref(c, 1));
	pol_cache_set_clock(c, 50);
	t_ok(pol_cache_set_ttl(c, 1, 100));
	future = 1000 - 50;
	t_ok(touch(c, 2, NULL));
	t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_NONE);
	t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_GPU);
	future = 1000 - 99; /* touch() sets the clock to 100 */
	t_ok(touch(c, 2, NULL)); /* the TTL ran out */
	t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_GPU);
	t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_NONE);
	t_assert_eq(pol_cache_pin(c, 1), -ENOENT);
	t_assert_eq(pol_cache_set_priority(c, 2, 200), -ERANGE);
	t_ok(pol_cache_remove(c, 2));
	t_assert_eq(pol_cache_count(c, POL_TIER_GPU), 0);
	t_assert_eq(pol_cache_remove(c, 2), -ENOENT);
	pol_cache_destroy(c);

	/*
	 * TTLs under pressure, every policy: GPU 2 + host 1, both GPU
	 * blocks TTL'd, and the GPU shrinks to 1 (as kvmmd shrinks it when
	 * the pool runs short).  Held TTLs refuse; a demotable TTL lets its
	 * block go down a tier, never out of the last one.
	 */
	for (int k = 0; k < POL_KIND_COUNT; k++) {
		struct pol_cache_opts to = { .size = sizeof(to),
					     .kind = (enum pol_kind)k,
					     .capacity = { 2, 1 },
					     .prefix_rule = -1 };
		struct pol_cache_stats st;

		t_ok(pol_cache_create(&to, &c));
		future = 1000;
		t_ok(touch(c, 1, NULL));
		t_ok(touch(c, 2, NULL));
		t_ok(pol_cache_set_ttl(c, 1, 500));
		t_ok(pol_cache_set_ttl(c, 2, 500));
		t_assert_eq(pol_cache_set_capacity(c, POL_TIER_GPU, 1),
			    -ENOSPC);
		t_assert_eq(pol_cache_count(c, POL_TIER_GPU), 2);
		t_ok(pol_cache_set_ttl_demotable(c, 2, true));
		t_ok(pol_cache_set_capacity(c, POL_TIER_GPU, 1));
		t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_HOST);
		t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_GPU);
		pol_cache_get_stats(c, &st);
		t_assert_eq(st.ttl_demotions, 1);
		t_assert_eq(st.no_victim, 1);
		/* from the last tier a TTL'd block is not dropped */
		t_assert_eq(pol_cache_set_capacity(c, POL_TIER_HOST, 0),
			    -ENOSPC);
		t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_HOST);
		/* an untouched block with no TTL still goes first */
		t_ok(pol_cache_set_capacity(c, POL_TIER_HOST, 1));
		t_ok(pol_cache_set_ttl_demotable(c, 1, true));
		t_ok(pol_cache_set_capacity(c, POL_TIER_GPU, 2));
		t_ok(touch(c, 3, NULL)); /* clock 3: both TTLs live */
		t_ok(pol_cache_set_capacity(c, POL_TIER_GPU, 1));
		t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_GPU);
		t_assert(pol_cache_tier_of(c, 3) != POL_TIER_GPU);
		pol_cache_get_stats(c, &st);
		t_assert_eq(st.ttl_demotions, 1);
		/* the mode goes with the block: re-admitted, it holds */
		t_ok(pol_cache_remove(c, 1));
		t_ok(touch(c, 1, NULL));
		t_ok(pol_cache_set_ttl(c, 1, 500));
		t_assert_eq(pol_cache_set_capacity(c, POL_TIER_GPU, 0),
			    -ENOSPC);
		t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_GPU);
		t_assert_eq(pol_cache_set_ttl_demotable(c, 99, true), -ENOENT);
		pol_cache_destroy(c);
	}

	/* Bad options. */
	struct pol_cache_opts bad = { .size = sizeof(bad), .kind = POL_LRU };
	t_assert_eq(pol_cache_create(&bad, &c), -EINVAL); /* no GPU tier */
	bad.capacity[0] = 1;
	bad.kind = POL_KIND_COUNT;
	t_assert_eq(pol_cache_create(&bad, &c), -EINVAL);
	enum pol_kind k;
	t_assert_eq(pol_kind_parse("mru", &k), -EINVAL);
	t_ok(pol_kind_parse("asym", &k));
	t_assert_eq(k, POL_ASYM);
	return 0;
}
