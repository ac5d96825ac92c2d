/* SPDX-License-Identifier: MIT */
/*
 * A victim whose tier below can make no room is not dropped: with the
 * prefix rule a prefix parent never goes while a child it was counted
 * with is cached (in its tier or above when it moves down, anywhere when
 * it is dropped), and no move takes a pinned or referenced block, or
 * drops one a TTL holds.  A hand case per policy (the lower tier pinned
 * full, the victim's child there), then a random workload with pins,
 * references and TTLs on one, two and three tiers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/policy_random.h"
#include "tests/lib/test.h"

#define MAXH 4096

static struct pol_cache *cache;
static uint64_t parent_of[MAXH];
static bool has_parent[MAXH];
static uint64_t clock_now;
static long bad;

/* the first few bad moves, to stderr */
#define note(...)                                     \
	do {                                          \
		if (bad < 5)                          \
			fprintf(stderr, __VA_ARGS__); \
	} while (0)

static void on_move(void *arg, const struct pol_block *b, unsigned from,
		    unsigned to)
{
	bool down = to == POL_TIER_NONE || (from != POL_TIER_NONE && to > from);

	(void)arg;
	if (!down || b->hash >= MAXH)
		return;
	if (b->pins || b->refcount) {
		note("%s: block %llu moved %u -> %u with pins %u refs %u\n",
		     pol_kind_string(pol_cache_kind(cache)),
		     (unsigned long long)b->hash, from, to, b->pins,
		     b->refcount);
		bad++;
	}
	if (to == POL_TIER_NONE && b->ttl_expiry > clock_now) {
		note("block %llu dropped under its TTL\n",
		     (unsigned long long)b->hash);
		bad++;
	}
	if (!pol_cache_prefix_rule(cache))
		return;
	for (uint64_t h = 1; h < MAXH; h++) {
		struct pol_block *ch;

		if (!has_parent[h] || parent_of[h] != b->hash || h == b->hash)
			continue;
		ch = pol_cache_lookup(cache, h);
		/* a child admitted while its parent was in no tier is not
		 * counted in it (policy.md): not this test's business */
		if (!ch || ch->counted == POL_TIER_NONE)
			continue;
		if (to == POL_TIER_NONE || ch->tier <= from) {
			note("%s: parent %llu moved %u -> %u, child %llu in tier %u\n",
			     pol_kind_string(pol_cache_kind(cache)),
			     (unsigned long long)b->hash, from, to,
			     (unsigned long long)h, ch->tier);
			bad++;
		}
	}
}

static int touch(uint64_t h, uint64_t parent, uint64_t next_use)
{
	struct pol_block_desc d = { .hash = h,
				    .parent_hash = parent,
				    .flags = parent ? POL_BLOCK_HAS_PARENT : 0,
				    .next_use = next_use };

	if (!has_parent[h] && parent) {
		has_parent[h] = true;
		parent_of[h] = parent;
	}
	return pol_cache_access(cache, &d, NULL);
}

/* GPU {A}, host {B: A's child, pinned}: a new block needs the GPU's room
 * and A, the GPU's leaf, can go nowhere (the host's only block is
 * pinned, and A would be its parent there). */
static void hand_case(enum pol_kind k, uint64_t nvme)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = k,
				    .capacity = { 1, 1, nvme },
				    .prefix_rule = 1 };
	struct pol_cache_stats st;

	memset(has_parent, 0, sizeof(has_parent));
	bad = 0;
	t_ok(pol_cache_create(&o, &cache));
	pol_cache_set_move_handler(cache, on_move, NULL);
	if (nvme) {
		/* NVMe pinned full: one block left there, the rest gone */
		uint64_t h;

		for (h = 3; h <= 5; h++) {
			pol_cache_set_clock(cache, clock_now = h);
			t_ok(touch(h, 0, 100 - h));
		}
		for (h = 3; h <= 5; h++)
			if (pol_cache_tier_of(cache, h) == POL_TIER_NVME)
				t_ok(pol_cache_pin(cache, h));
			else if (pol_cache_tier_of(cache, h) != POL_TIER_NONE)
				t_ok(pol_cache_remove(cache, h));
		if (pol_cache_count(cache, POL_TIER_NVME) != 1) {
			pol_cache_destroy(cache);
			return; /* the policy dropped them all (belady) */
		}
	}
	pol_cache_set_clock(cache, clock_now = 6);
	t_ok(touch(1, 0, 10));
	pol_cache_set_clock(cache, clock_now = 7);
	t_ok(touch(2, 1, 20));
	/* A's child went down (A has a child on the GPU: not a leaf) */
	t_assert_eq(pol_cache_tier_of(cache, 1), POL_TIER_GPU);
	t_assert_eq(pol_cache_tier_of(cache, 2), POL_TIER_HOST);
	t_ok(pol_cache_pin(cache, 2));
	pol_cache_set_clock(cache, clock_now = 8);
	(void)touch(9, 0, 5);
	t_assert_eq(bad, 0);
	/* A stays cached while its pinned child is */
	t_assert(pol_cache_tier_of(cache, 1) != POL_TIER_NONE);
	t_assert_eq(pol_cache_tier_of(cache, 2), POL_TIER_HOST);
	t_ok(pol_cache_unpin(cache, 2));
	pol_cache_get_stats(cache, &st);
	if (pol_cache_tier_of(cache, 1) == POL_TIER_GPU)
		t_assert(st.refused >= 1);
	pol_cache_destroy(cache);
}

static uint64_t rnd(void)
{
	static uint64_t x = 88172645463325252ull;

	return pr_xorshift(&x);
}

/* Sessions extending chains under a shared root, as the conversation
 * trace does, with random pins, references, TTLs and priorities. */
static void random_case(enum pol_kind k, int msa, const uint64_t cap[3])
{
	struct pol_cache_opts o = {
		.size = sizeof(o), .kind = k, .prefix_rule = -1, .msa = msa
	};
	static uint64_t chain[64][48];
	uint64_t pinned[64], next = 2;
	int len[64] = { 0 }, npinned = 0;

	memcpy(o.capacity, cap, sizeof(o.capacity));
	memset(has_parent, 0, sizeof(has_parent));
	bad = 0;
	t_ok(pol_cache_create(&o, &cache));
	pol_cache_set_move_handler(cache, on_move, NULL);
	for (int it = 0; it < 3000 && next < MAXH - 64; it++) {
		int s = (int)(rnd() % 64), n;

		clock_now += 1 + rnd() % 3;
		pol_cache_set_clock(cache, clock_now);
		if (!len[s] || rnd() % 5 == 0) {
			len[s] = 1;
			chain[s][0] = 1;
		}
		for (int j = 0, add = 1 + (int)(rnd() % 4);
		     j < add && len[s] < 48; j++)
			chain[s][len[s]++] = next++;
		n = len[s];
		for (int i = 0; i < n; i++) {
			uint64_t h = chain[s][i];
			int e = touch(h, i ? chain[s][i - 1] : 0,
				      rnd() % 1000 + (uint64_t)it);

			t_assert(!e || e == -ENOSPC);
			if (!e && rnd() % 10 == 0)
				pol_cache_set_priority(
					cache, h, (int)(rnd() % 256) - 128);
			if (!e && rnd() % 20 == 0) {
				pol_cache_set_ttl(cache, h,
						  clock_now + rnd() % 20);
				if (rnd() % 2)
					pol_cache_set_ttl_demotable(cache, h,
								    true);
			}
		}
		if (rnd() % 3 == 0 && npinned < 64) {
			uint64_t h = chain[s][rnd() % (uint64_t)n];

			if (!pol_cache_pin(cache, h))
				pinned[npinned++] = h;
		}
		if (rnd() % 3 == 0 && npinned) {
			int j = (int)(rnd() % (uint64_t)npinned);

			/* a pinned block is never lost */
			t_ok(pol_cache_unpin(cache, pinned[j]));
			pinned[j] = pinned[--npinned];
		}
		if (rnd() % 4 == 0) {
			uint64_t h = chain[s][rnd() % (uint64_t)n];

			if (!pol_cache_ref(cache, h) && rnd() % 2)
				t_ok(pol_cache_unref(cache, h));
		}
	}
	if (bad)
		t_fail("%s msa %d tiers %llu/%llu/%llu: %ld bad moves",
		       pol_kind_string(k), msa, (unsigned long long)cap[0],
		       (unsigned long long)cap[1], (unsigned long long)cap[2],
		       bad);
	pol_cache_destroy(cache);
}

int main(void)
{
	static const uint64_t caps[][3] = {
		{ 8, 10, 30 }, { 8, 10, 0 },   { 8, 0, 30 },
		{ 4, 6, 10 },  { 20, 40, 80 }, { 8, 0, 0 },
	};

	for (int k = 0; k < POL_KIND_COUNT; k++) {
		hand_case((enum pol_kind)k, 0);
		hand_case((enum pol_kind)k, 1);
	}
	for (int k = 0; k < POL_KIND_COUNT; k++)
		for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
			for (int msa = 0; msa < 2; msa++)
				random_case((enum pol_kind)k, msa, caps[i]);
	return T_PASS;
}
