/* SPDX-License-Identifier: MIT */
/*
 * arc takes pinned and referenced blocks out of T1's and T2's lists
 * while they are held (parked) and puts them back in their order, so
 * that a decision never walks past them:
 *   - on a random workload of accesses, pins and references, on one
 *     tier and on two, every move is the one main's arc made walking
 *     past the held blocks (a digest recorded with a4e9dc4), with and
 *     without holds, and no held block is ever chosen; after every
 *     step the linked lists hold no held block and |T1| + |T2| counts
 *     every block of the tier;
 *   - with 1000 of 4000 blocks referenced at the cold end, a decision
 *     looks at fewer than 2 blocks on average (main's looked at all
 *     1000 held ones each time).
 */
#include <errno.h>

#include "kvmm/policy/policy.h"

/* arc's own source, counting the blocks its decisions look at: the
 * linker then takes the test's pol_arc_ops, not the library's */
static long looked;
static bool counted_evictable(const struct pol_cache *c,
			      const struct pol_block *b)
{
	looked++;
	return pol_cache_evictable(c, b);
}

#define pol_cache_evictable counted_evictable
#include "kvmm/policy/pol_arc.c"
#undef pol_cache_evictable

#include "tests/lib/policy_random.h"
#include "tests/lib/test.h"

#define NH 200

/* recorded with main at a4e9dc4, which walked past held blocks */
#define EXPECT_MOVES 208652
#define EXPECT_DIGEST 0x90afb81efa081763ull

static struct pol_cache *cache;
static struct pr_moves mv = PR_MOVES_INIT;

static uint64_t rnd(void)
{
	static uint64_t x = 2463534242ull;

	return pr_xorshift(&x);
}

static void on_move(void *arg, const struct pol_block *b, unsigned from,
		    unsigned to)
{
	(void)arg;
	pr_move(&mv, b, from, to);
	if (from != POL_TIER_NONE && (to == POL_TIER_NONE || to > from))
		t_assert(!b->pins && !b->refcount);
}

/* The GPU tier's T1 and T2: no held block linked, all counted. */
static void check_lists(void)
{
	struct arc *a = pol_cache_gpu_policy(cache);
	uint64_t in = 0;

	for (int list = ARC_T1; list <= ARC_T2; list++)
		for (uint32_t id = a->l[list].head; id != POL_NONE;
		     id = a->ix->blocks[id].slot[a->tier].next) {
			const struct pol_block *b = pol_index_at(a->ix, id);

			t_assert(!b->pins && !b->refcount);
			t_assert(b->slot[a->tier].list == list);
		}
	for (uint64_t h = 1; h < NH; h++)
		in += pol_cache_tier_of(cache, h) == POL_TIER_GPU;
	t_assert_eq(len(a, ARC_T1) + len(a, ARC_T2), in);
}

static void run(uint64_t gpu, uint64_t host, bool hold)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_ARC,
				    .capacity = { gpu, host },
				    .prefix_rule = 0 };

	t_ok(pol_cache_create(&o, &cache));
	pol_cache_set_move_handler(cache, on_move, NULL);
	for (int i = 0; i < 20000; i++) {
		uint64_t h = 1 + rnd() % (NH - 1);
		struct pol_block_desc d = { .hash = h };
		int e;

		pol_cache_set_clock(cache, (uint64_t)i);
		e = pol_cache_access(cache, &d, NULL);
		t_assert(!e || e == -ENOSPC);
		check_lists();
		if (!hold)
			continue;
		h = 1 + rnd() % (NH - 1);
		pr_hold(cache, h, rnd());
		check_lists();
	}
	pol_cache_destroy(cache);
}

/* 1000 of 4000 blocks referenced at the cold end: blocks looked at per
 * decision while 4000 new blocks come in. */
static double looked_per_decision(void)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_ARC,
				    .capacity = { 4000 },
				    .prefix_rule = 0 };
	struct pol_cache_stats st;
	uint64_t h = 1;

	t_ok(pol_cache_create(&o, &cache));
	for (; h <= 4000; h++) {
		struct pol_block_desc d = { .hash = h };

		t_ok(pol_cache_access(cache, &d, NULL));
	}
	for (uint64_t r = 1; r <= 1000; r++)
		t_ok(pol_cache_ref(cache, r));
	looked = 0;
	for (; h <= 8000; h++) {
		struct pol_block_desc d = { .hash = h };

		t_ok(pol_cache_access(cache, &d, NULL));
	}
	pol_cache_get_stats(cache, &st);
	t_assert_eq(st.drops, 4000);
	for (uint64_t r = 1; r <= 1000; r++)
		t_assert_eq(pol_cache_tier_of(cache, r), POL_TIER_GPU);
	pol_cache_destroy(cache);
	return (double)looked / 4000;
}

int main(void)
{
	double per;

	run(16, 0, false);
	run(16, 0, true);
	run(16, 24, false);
	run(16, 24, true);
	run(40, 0, true);
	printf("arc: %llu moves, digest %016llx\n",
	       (unsigned long long)mv.moves, (unsigned long long)mv.digest);
	t_assert_eq(mv.moves, EXPECT_MOVES);
	t_assert(mv.digest == EXPECT_DIGEST);
	per = looked_per_decision();
	printf("arc: %.2f blocks looked at per decision\n", per);
	t_assert(per < 2);
	return T_PASS;
}
