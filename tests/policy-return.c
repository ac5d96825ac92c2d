/* SPDX-License-Identifier: MIT */
/*
 * pol_cache_return(): a block the policy moved down to NVMe whose copy
 * the owner could not make (kvmmd: a failed host -> NVMe write) goes back
 * into the host tier, for every policy.  The return itself is not
 * reported; the room it takes is made as for any block entering the
 * tier: exactly one host victim moves down to NVMe, nothing is dropped,
 * the counts stay (lru: the victim is the host tier's least recently
 * used block, and the block returned stays on host).  Not below the
 * tier, or no such tier: -EINVAL; not cached: -ENOENT.  With every other
 * host block pinned and the block itself pinned, -ENOSPC: the host tier
 * stays one over, nothing dropped.
 */
#include <errno.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

static int moves[4][4];
static uint64_t last_to_nvme;

static unsigned ix(unsigned t)
{
	return t == POL_TIER_NONE ? 3 : t;
}

static void on_move(void *arg, const struct pol_block *b, unsigned from,
		    unsigned to)
{
	moves[ix(from)][ix(to)]++;
	if (to == POL_TIER_NVME)
		last_to_nvme = b->hash;
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
					    .capacity = { 1, 2, 4 },
					    .prefix_rule = -1 };
		struct pol_cache *c;
		uint64_t b, v;

		memset(moves, 0, sizeof(moves));
		t_ok(pol_cache_create(&o, &c));
		pol_cache_set_move_handler(c, on_move, NULL);
		/* gpu 1, host 2: the fourth block sends one on to NVMe */
		for (uint64_t h = 1; h <= 4; h++)
			t_ok(touch(c, h));
		t_assert_eq(moves[1][2], 1);
		b = last_to_nvme;
		t_assert_eq(pol_cache_tier_of(c, b), POL_TIER_NVME);

		t_assert_eq(pol_cache_return(c, b, POL_TIER_GPU + 5), -EINVAL);
		t_assert_eq(pol_cache_return(c, 99, POL_TIER_HOST), -ENOENT);
		t_assert_eq(pol_cache_return(c, 4, POL_TIER_HOST), -EINVAL);

		memset(moves, 0, sizeof(moves));
		t_ok(pol_cache_return(c, b, POL_TIER_HOST));
		/* one host victim down (b itself only if the policy picks
		 * it), the return not reported, nothing dropped */
		t_assert_eq(moves[2][1], 0);
		t_assert_eq(moves[1][2], 1);
		t_assert_eq(moves[1][3] + moves[2][3] + moves[0][3], 0);
		t_assert_eq(pol_cache_count(c, POL_TIER_GPU), 1);
		t_assert_eq(pol_cache_count(c, POL_TIER_HOST), 2);
		t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 1);
		v = last_to_nvme;
		if (k == POL_LRU) {
			/* the host LRU (2) went; b is host's newest */
			t_assert_eq(v, 2);
			t_assert_eq(pol_cache_tier_of(c, b), POL_TIER_HOST);
		}
		t_assert(pol_cache_tier_of(c, b) == POL_TIER_HOST || v == b);

		/* every host block pinned, the one returned too: the host
		 * tier stays one over, nothing moves */
		if (pol_cache_tier_of(c, v) == POL_TIER_NVME) {
			for (uint64_t h = 1; h <= 4; h++)
				if (pol_cache_tier_of(c, h) == POL_TIER_HOST ||
				    h == v)
					t_ok(pol_cache_pin(c, h));
			memset(moves, 0, sizeof(moves));
			t_assert_eq(pol_cache_return(c, v, POL_TIER_HOST),
				    -ENOSPC);
			t_assert_eq(pol_cache_count(c, POL_TIER_HOST), 3);
			t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 0);
			for (int i = 0; i < 4; i++)
				for (int j = 0; j < 4; j++)
					t_assert_eq(moves[i][j], 0);
		}
		pol_cache_destroy(c);
		printf("%s: returned block %llu, host victim %llu\n",
		       pol_kind_string((enum pol_kind)k), (unsigned long long)b,
		       (unsigned long long)v);
	}
	printf("policy return ok\n");
	return 0;
}
