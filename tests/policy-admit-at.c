/* SPDX-License-Identifier: MIT */
/*
 * pol_cache_admit_at(): a block new to the cache enters a lower tier
 * straight away (kvmmd: a block a restart found on NVMe that a client
 * pins), for every policy, with the prefix rule as the policy has it.
 * A gpu 1 + host 2 + NVMe 3 cache, full:
 *   - no such tier, or a block cached already: -EINVAL, -EEXIST;
 *   - admitted on NVMe for tenant 7 (NVMe limit 1): not reported, an
 *     admission all the same (inserts, the tenant's admitted and its NVMe
 *     block), and the tier's victim is dropped, never the block itself;
 *   - a second block of tenant 7 there: the tenant is over its limit, so
 *     its other block goes (a limit move), not the one coming in;
 *   - every NVMe block pinned: admitted all the same, the tier one over,
 *     nothing dropped; unpinned, the next access's cascade brings it
 *     back within, and the block admitted is an ordinary one: an access
 *     promotes it from NVMe.
 */
#include <errno.h>

#include "tests/policy-tenant-common.h"

static int moves[4][4];

static unsigned ix(unsigned t)
{
	return t == POL_TIER_NONE ? 3 : t;
}

static void on_move(void *arg, const struct pol_block *b, unsigned from,
		    unsigned to)
{
	(void)arg;
	(void)b;
	moves[ix(from)][ix(to)]++;
}

static int admit(struct pol_cache *c, uint64_t h, uint32_t tenant)
{
	struct pol_block_desc d = { .hash = h, .tenant = tenant };

	memset(moves, 0, sizeof(moves));
	return pol_cache_admit_at(c, &d, POL_TIER_NVME);
}

static int moved(void)
{
	int n = 0;

	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			n += moves[i][j];
	return n;
}

int main(void)
{
	const uint64_t nvme_limit[POL_TIER_COUNT] = { 0, 0, 1 };

	for (int k = 0; k < POL_KIND_COUNT; k++) {
		struct pol_cache_opts o = { .size = sizeof(o),
					    .kind = (enum pol_kind)k,
					    .capacity = { 1, 2, 3 },
					    .prefix_rule = -1 };
		struct pol_cache_stats st;
		struct pol_cache *c;
		unsigned was;

		t_ok(pol_cache_create(&o, &c));
		pol_cache_set_move_handler(c, on_move, NULL);
		for (uint64_t h = 1; h <= 6; h++)
			touch(c, h, 1);
		t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 3);
		t_ok(pol_cache_tenant_limit(c, 7, nvme_limit));

		struct pol_block_desc bad = { .hash = 100, .tenant = 7 };

		t_assert_eq(pol_cache_admit_at(c, &bad, POL_TIER_COUNT),
			    -EINVAL);
		t_assert_eq(admit(c, 1, 7), -EEXIST);
		t_assert_eq(moved(), 0);

		/* in, the NVMe victim dropped, never 100 */
		t_ok(admit(c, 100, 7));
		t_assert_eq(pol_cache_tier_of(c, 100), POL_TIER_NVME);
		t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 3);
		t_assert_eq(moves[2][3], 1);
		t_assert_eq(moved(), 1);
		pol_cache_get_stats(c, &st);
		t_assert_eq(st.inserts, 7);
		t_assert_eq(row_present(c, 7)->admitted, 1);
		t_assert_eq(row_present(c, 7)->blocks[POL_TIER_NVME], 1);
		t_assert_eq(admit(c, 100, 7), -EEXIST);

		/* tenant 7 over its limit of 1: its older block goes */
		t_ok(admit(c, 101, 7));
		t_assert_eq(pol_cache_tier_of(c, 101), POL_TIER_NVME);
		t_assert_eq(pol_cache_tier_of(c, 100), POL_TIER_NONE);
		t_assert_eq(moves[2][3], 1);
		t_assert_eq(moved(), 1);
		t_assert_eq(row_present(c, 7)->blocks[POL_TIER_NVME], 1);
		t_assert_eq(row_present(c, 7)->limit_moves, 1);
		t_assert_eq(row_present(c, 7)->dropped, 1);

		/* every NVMe block pinned: one over, nothing moves */
		for (uint64_t h = 1; h <= 101; h++)
			if (pol_cache_tier_of(c, h) == POL_TIER_NVME)
				t_ok(pol_cache_pin(c, h));
		t_ok(admit(c, 102, 8));
		t_assert_eq(moved(), 0);
		t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 4);
		t_assert_eq(pol_cache_tier_of(c, 102), POL_TIER_NVME);
		for (uint64_t h = 1; h <= 101; h++)
			if (pol_cache_tier_of(c, h) == POL_TIER_NVME)
				t_ok(pol_cache_unpin(c, h));

		/* an ordinary block now: an access promotes it */
		{
			struct pol_block_desc d = { .hash = 102, .tenant = 8 };

			pol_cache_set_clock(c, ++clock_now);
			t_ok(pol_cache_access(c, &d, &was));
		}
		t_assert_eq(was, POL_TIER_NVME);
		t_assert(pol_cache_count(c, POL_TIER_NVME) <= 3);
		t_assert_eq(row_present(c, 8)->admitted, 1);
		pol_cache_destroy(c);
		printf("%s: admitted on NVMe, victims elsewhere\n",
		       pol_kind_string((enum pol_kind)k));
	}
	printf("policy admit-at ok\n");
	return 0;
}
