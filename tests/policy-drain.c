/* SPDX-License-Identifier: MIT */
/*
 * pol_cache_drain(): every block of the GPU and host tiers moves down to
 * NVMe, as kvmmd's --nvme-save-on-stop asks (kvmm/kvmmd/cache_stop.c),
 * also when a tenant limit split a chain across the tiers.
 *
 * kvmmd's tiers as daemon-fuzz's phase 5 has them for 4-page blocks (8
 * GPU, 6 host, 39 NVMe blocks for the policy), asym and its prefix
 * rule: chains A (4 blocks), B (1) and C (7) admitted, the tenant limited
 * to gpu 6, host 6, NVMe 20, C admitted again with an eighth block, the
 * limit lifted: 13 blocks, C0-C4 and C7 on the GPU (C7 above its
 * parent), C5 and C6 in host memory.  Draining them, as the stop did
 * (the GPU tier's capacity set to 0, then the host tier's), moved C7,
 * C4, C3, C2 and C1 and refused C0 a place in the full host tier: none
 * of its blocks could make room for it then, and the GPU tier was not
 * asked again once the host tier's capacity was 0, so C0 stayed on the
 * GPU, where kvmmd's stop would lose it with the process (the same
 * publishes through kvmmd end in other tiers: its open sequences'
 * references change the victims; this replays the policy's part).
 * pol_cache_drain() raises the host tier to take every GPU block first:
 * all 13 on NVMe, each chain whole.  Then each policy kind drains a
 * random workload with tenant limits: nothing stays above NVMe while it
 * has room, and the upper tiers end at capacity 0.
 */
#include <errno.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

#define TENANT 7
/* a cheap random sequence, fixed seeds */
static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Block b of chain k (chains k and k + 4, k + 8 share their first
 * blocks, as daemon-fuzz's do). */
static uint64_t hash_of(int k, int b)
{
	int share = (k / 4) * 2, owner = b < share ? k % 4 : k;

	return 1000 + (uint64_t)owner * 16 + (uint64_t)b;
}

/* Blocks 0..n-1 of chain k accessed in order, as a publish does. */
static void chain(struct pol_cache *c, uint64_t *now, int k, int n)
{
	for (int b = 0; b < n; b++) {
		struct pol_block_desc d = { .hash = hash_of(k, b),
					    .position = (uint32_t)b,
					    .tenant = TENANT };

		if (b) {
			d.parent_hash = hash_of(k, b - 1);
			d.flags = POL_BLOCK_HAS_PARENT;
		}
		*now += 1000000;
		pol_cache_set_clock(c, *now);
		if (pol_cache_access(c, &d, NULL))
			break;
	}
}

static void limit(struct pol_cache *c, uint64_t gpu, uint64_t host,
		  uint64_t nvme)
{
	uint64_t lim[POL_TIER_COUNT] = { gpu, host, nvme };

	t_ok(pol_cache_tenant_limit(c, TENANT, lim));
}

static struct pol_cache *make(enum pol_kind kind)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = kind,
				    .capacity = { 8, 6, 39 },
				    .prefix_rule = -1 };
	struct pol_cache *c;

	t_ok(pol_cache_create(&o, &c));
	return c;
}

static uint64_t total(const struct pol_cache *c)
{
	return pol_cache_count(c, POL_TIER_GPU) +
	       pol_cache_count(c, POL_TIER_HOST) +
	       pol_cache_count(c, POL_TIER_NVME);
}

/* The chain split by a limit (the header's), drained. */
static void split_chain(void)
{
	struct pol_cache *c = make(POL_ASYM);
	uint64_t now = 1000000;

	chain(c, &now, 2, 4); /* A */
	chain(c, &now, 9, 1); /* B: chain 1's first block */
	chain(c, &now, 0, 7); /* C */
	limit(c, 6, 6, 20);
	chain(c, &now, 0, 8);
	limit(c, 0, 0, 0);
	t_assert_eq(pol_cache_count(c, POL_TIER_GPU), 6);
	t_assert_eq(pol_cache_count(c, POL_TIER_HOST), 6);
	t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 1);
	/* C0 on the GPU, its child C1 too, C5 and C6 in host memory */
	t_assert_eq(pol_cache_tier_of(c, hash_of(0, 0)), POL_TIER_GPU);
	t_assert_eq(pol_cache_tier_of(c, hash_of(0, 5)), POL_TIER_HOST);
	t_assert_eq(pol_cache_tier_of(c, hash_of(0, 7)), POL_TIER_GPU);

	t_ok(pol_cache_drain(c, POL_TIER_NVME));
	t_assert_eq(pol_cache_count(c, POL_TIER_GPU), 0);
	t_assert_eq(pol_cache_count(c, POL_TIER_HOST), 0);
	t_assert_eq(pol_cache_count(c, POL_TIER_NVME), 13);
	t_assert_eq(pol_cache_capacity(c, POL_TIER_GPU), 0);
	t_assert_eq(pol_cache_capacity(c, POL_TIER_HOST), 0);
	t_assert_eq(pol_cache_capacity(c, POL_TIER_NVME), 39);
	for (int b = 0; b < 8; b++)
		t_assert_eq(pol_cache_tier_of(c, hash_of(0, b)), POL_TIER_NVME);
	t_assert_eq(pol_cache_drain(c, POL_TIER_COUNT), -EINVAL);
	pol_cache_destroy(c);
}

/* Random accesses of 12 chains and limits, then a drain: every block
 * lands on NVMe (which has room for them all but when full). */
static void random_drains(enum pol_kind kind, int runs)
{
	for (int run = 0; run < runs; run++) {
		struct pol_cache *c = make(kind);
		uint64_t now = 1000000, before;
		int ops = 5 + (int)(rng() % 60);

		for (int i = 0; i < ops; i++) {
			if (rng() % 8)
				chain(c, &now, (int)(rng() % 12),
				      1 + (int)(rng() % 8));
			else
				limit(c, rng() % 9, rng() % 7, rng() % 25);
		}
		limit(c, 0, 0, 0);
		before = total(c);
		t_ok(pol_cache_drain(c, POL_TIER_NVME));
		if (pol_cache_count(c, POL_TIER_GPU) ||
		    pol_cache_count(c, POL_TIER_HOST) ||
		    pol_cache_count(c, POL_TIER_NVME) !=
			    (before < 39 ? before : 39))
			t_fail("kind %d run %d: %llu blocks drained to %llu/%llu/%llu",
			       (int)kind, run, (unsigned long long)before,
			       (unsigned long long)pol_cache_count(
				       c, POL_TIER_GPU),
			       (unsigned long long)pol_cache_count(
				       c, POL_TIER_HOST),
			       (unsigned long long)pol_cache_count(
				       c, POL_TIER_NVME));
		pol_cache_destroy(c);
	}
}

int main(void)
{
	split_chain();
	for (int k = 0; k < POL_KIND_COUNT; k++) {
		rng_state = 0x5eed + (uint64_t)k;
		random_drains((enum pol_kind)k, 2000);
	}
	printf("policy-drain: a split chain drained whole; 2000 random drains of each kind\n");
	return 0;
}
