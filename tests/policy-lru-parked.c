/* SPDX-License-Identifier: MIT */
/*
 * lru takes pinned and referenced blocks out of its list while they are
 * held and puts them back in their order: every victim is still the
 * least recently used block that may go, checked against a model of
 * recency on a random workload of accesses, pins and references, on one
 * tier and on two (a block demoted into the host tier is its most
 * recent), and with nothing held at all.
 */
#include <errno.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/policy_random.h"
#include "tests/lib/test.h"

#define NH 200

static struct pol_cache *cache;
static uint64_t seq[POL_TIER_COUNT][NH], next_seq;
static int tier_of[NH];
static long checked;

static uint64_t rnd(void)
{
	static uint64_t x = 2463534242ull;

	return pr_xorshift(&x);
}

static void on_move(void *arg, const struct pol_block *b, unsigned from,
		    unsigned to)
{
	(void)arg;
	if (from != POL_TIER_NONE && (to == POL_TIER_NONE || to > from)) {
		/* the least recent block of `from` that may go (the victim
		 * has left it when the move is reported) */
		uint64_t best = UINT64_MAX;

		for (uint64_t h = 1; h < NH; h++) {
			struct pol_block *x = pol_cache_lookup(cache, h);

			if (x && x != b && x->tier == from && !x->pins &&
			    !x->refcount && seq[from][h] < best)
				best = seq[from][h];
		}
		if (seq[from][b->hash] > best)
			t_fail("victim %llu of tier %u is not the least recent",
			       (unsigned long long)b->hash, from);
		checked++;
	}
	if (to != POL_TIER_NONE)
		seq[to][b->hash] = ++next_seq;
	tier_of[b->hash] = to == POL_TIER_NONE ? -1 : (int)to;
}

static void run(uint64_t gpu, uint64_t host, bool hold)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_LRU,
				    .capacity = { gpu, host },
				    .prefix_rule = 0 };

	t_ok(pol_cache_create(&o, &cache));
	pol_cache_set_move_handler(cache, on_move, NULL);
	for (int i = 0; i < 20000; i++) {
		uint64_t h = 1 + rnd() % (NH - 1);
		struct pol_block_desc d = { .hash = h };
		unsigned was;
		int e;

		pol_cache_set_clock(cache, (uint64_t)i);
		e = pol_cache_access(cache, &d, &was);
		t_assert(!e || e == -ENOSPC);
		if (!e && was == POL_TIER_GPU)
			seq[POL_TIER_GPU][h] = ++next_seq; /* a hit */
		if (!hold)
			continue;
		h = 1 + rnd() % (NH - 1);
		pr_hold(cache, h, rnd());
	}
	pol_cache_destroy(cache);
}

int main(void)
{
	run(16, 0, false);
	run(16, 0, true);
	run(16, 24, false);
	run(16, 24, true);
	run(40, 0, true);
	t_assert(checked > 10000);
	return T_PASS;
}
