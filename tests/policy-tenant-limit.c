/* SPDX-License-Identifier: MIT */
/*
 * Tenant limits of the tiered cache (policy.h, "Tenants"): a tenant over
 * its limit in a tier sends its own least recently used block there down
 * a tier (dropped from the last), whatever the policy would pick; other
 * tenants' blocks stay.  With lru on a gpu 4 + host 4 cache every move
 * below is worked out by hand: admissions, a GPU hit reordering the
 * tenant's blocks, a host hit promoting one, a limit set at run time
 * (applied at once, in the order of the blocks' last use), one cleared.
 * Pinned blocks keep a tenant over its limit until it can go back
 * within; with the prefix rule the tenant gives up a leaf, never a
 * parent.  For every policy, with and without the prefix rule, in a
 * random workload with parents, pins and three limited tenants of six:
 * right after a limited tenant's access it is within its GPU limit or
 * none of its GPU blocks could go (but the block of a GPU hit, which
 * stays), the rows add up to the tiers, and the
 * unlimited tenants never gave up a block for a limit.
 */
#include <errno.h>
#include <stdlib.h>

#include "tests/policy-tenant-common.h"

static int limit(struct pol_cache *c, uint32_t id, uint64_t gpu, uint64_t host,
		 uint64_t nvme)
{
	const uint64_t l[POL_TIER_COUNT] = { gpu, host, nvme };

	return pol_cache_tenant_limit(c, id, l);
}

/* The tier of each hash, as letters: g(pu), h(ost), n(vme), - (none). */
static void expect_tiers(struct pol_cache *c, const uint64_t *h, size_t n,
			 const char *want)
{
	static const char names[] = "ghn";

	for (size_t i = 0; i < n; i++) {
		unsigned t = pol_cache_tier_of(c, h[i]);
		char got = t < POL_TIER_COUNT ? names[t] : '-';

		if (got != want[i])
			t_fail("block %llu: tier %c, want %c (all: %s)",
			       (unsigned long long)h[i], got, want[i], want);
	}
}

static void by_hand(void)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_LRU,
				    .capacity = { 4, 4 },
				    .prefix_rule = 0 };
	/* A (1000): 1-6; B (2000): 10-13 */
	const uint64_t h[] = { 1, 2, 3, 4, 10, 11, 12 };
	const uint32_t A = 1000, B = 2000;
	struct pol_cache *c;

	t_ok(pol_cache_create(&o, &c));
	t_ok(limit(c, A, 2, 0, 0)); /* a row made for a tenant not seen */
	t_assert(row(c, A) && row_present(c, A)->limited);
	touch(c, 1, A);
	touch(c, 2, A);
	touch(c, 3, A); /* A over: its least recent, 1, goes down */
	expect_tiers(c, h, 3, "hgg");
	t_assert_eq(row_present(c, A)->limit_moves, 1);
	touch(c, 10, B);
	touch(c, 11, B); /* gpu {2 3 10 11}: full, no move */
	expect_tiers(c, h, 6, "hgg-gg");
	touch(c, 2, A); /* a hit: A's order on the GPU is 3, 2 */
	touch(c, 4, A); /* A over: 3 goes, not 2 */
	expect_tiers(c, h, 6, "hghggg");
	t_assert_eq(row_present(c, A)->limit_moves, 2);
	/* B's block makes room the lru way: the GPU's least recent, 10 */
	touch(c, 12, B);
	expect_tiers(c, h, 7, "hghghgg");
	t_assert_eq(row_present(c, A)->limit_moves, 2);
	t_assert_eq(row_present(c, B)->limit_moves, 0);
	/* a host hit promotes A's 1: A over again, 2 goes down */
	touch(c, 1, A);
	t_assert_eq(row_present(c, A)->limit_moves, 3);
	expect_tiers(c, h, 7, "ghhghgg");
	t_assert_eq(row_present(c, A)->blocks[POL_TIER_GPU], 2);
	t_assert_eq(row_present(c, A)->blocks[POL_TIER_HOST], 2);
	/* at run time: A 1 host block at most; of {3 2}, 3 was used
	 * least recently and is dropped (host is the last tier) */
	t_ok(limit(c, A, 2, 1, 0));
	expect_tiers(c, h, 7, "gh-ghgg");
	t_assert_eq(row_present(c, A)->dropped, 1);
	t_assert_eq(row_present(c, A)->limit_moves, 4);
	/* B limited at run time: of its GPU blocks {11 12}, 11 is older */
	t_ok(limit(c, B, 1, 0, 0));
	expect_tiers(c, h, 7, "gh-ghhg");
	t_assert_eq(row_present(c, B)->limit_moves, 1);
	/* A's limit cleared: its next block takes the GPU's room */
	t_ok(limit(c, A, 0, 0, 0));
	t_assert(!row_present(c, A)->limited);
	touch(c, 5, A); /* gpu {4 12 1 5}: there was room */
	t_assert_eq(row_present(c, A)->blocks[POL_TIER_GPU], 3);
	t_assert_eq(row_present(c, A)->limit_moves, 4);
	/* and limited again: the lists are built anew, 4 least recent */
	t_ok(limit(c, A, 1, 0, 0));
	t_assert_eq(pol_cache_tier_of(c, 5), POL_TIER_GPU);
	t_assert_eq(pol_cache_tier_of(c, 4), POL_TIER_HOST);
	t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_HOST);
	t_assert_eq(row_present(c, A)->blocks[POL_TIER_GPU], 1);
	pol_cache_destroy(c);
}

static void pins_and_errors(void)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_LRU,
				    .capacity = { 8, 8 },
				    .prefix_rule = 0 };
	struct pol_cache *c;

	t_ok(pol_cache_create(&o, &c));
	t_assert_eq(limit(c, POL_TENANT_OTHERS, 1, 0, 0), -EINVAL);
	t_assert_eq(limit(c, 7, 1, 0, 1), -EINVAL); /* no NVMe tier */
	t_assert(!row(c, 7)); /* nothing made */
	t_ok(limit(c, 7, 0, 0, 0)); /* lifting none: nothing made either */
	t_assert(!row(c, 7));
	t_ok(limit(c, 7, 1, 0, 0));
	touch(c, 1, 7);
	t_ok(pol_cache_pin(c, 1));
	/* 1 is pinned: the new block is the one that can go */
	touch(c, 2, 7);
	t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_GPU);
	t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_HOST);
	t_ok(pol_cache_unpin(c, 1));
	/* free again: the next block brings 7 back within, 1 goes */
	touch(c, 5, 7);
	t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_HOST);
	t_assert_eq(pol_cache_tier_of(c, 5), POL_TIER_GPU);
	t_assert_eq(row_present(c, 7)->blocks[POL_TIER_GPU], 1);
	/* a limit set at run time below what pinned blocks hold */
	touch(c, 6, 8);
	touch(c, 9, 8);
	t_ok(pol_cache_pin(c, 6));
	t_ok(pol_cache_pin(c, 9));
	t_ok(limit(c, 8, 1, 0, 0));
	t_assert_eq(row_present(c, 8)->blocks[POL_TIER_GPU],
		    2); /* none could go */
	t_assert_eq(row_present(c, 8)->limit_moves, 0);
	t_ok(pol_cache_unpin(c, 6));
	t_ok(pol_cache_unpin(c, 9));
	touch(c, 20, 8); /* 6 and 9 go, 20 stays */
	t_assert_eq(row_present(c, 8)->blocks[POL_TIER_GPU], 1);
	t_assert_eq(pol_cache_tier_of(c, 20), POL_TIER_GPU);
	t_assert_eq(row_present(c, 8)->limit_moves, 2);
	/* every row taken: a new tenant's limit is refused, a known one
	 * is not */
	for (uint32_t u = 0; u < POL_TENANT_ROWS - 3; u++)
		touch(c, 1000 + u, 50000 + u);
	t_assert_eq(pol_cache_tenants(c, NULL, 0), POL_TENANT_ROWS - 1);
	t_assert(!row(c, POL_TENANT_OTHERS));
	t_assert_eq(limit(c, 99999, 1, 0, 0), -ENOSPC);
	t_assert(!row(c, 99999));
	/* refused without making the others' row */
	t_assert_eq(pol_cache_tenants(c, NULL, 0), POL_TENANT_ROWS - 1);
	t_ok(limit(c, 50000, 1, 0, 0));
	pol_cache_destroy(c);
}

/*
 * A GPU hit never moves the block hit (its user is about to take it);
 * an access whose block went down for its tenant's limit reports it
 * cached even when the GPU stays over its capacity; a limit being set
 * looks at all the tenant's blocks, an access at 64 of them at a time,
 * rotating those it passes to the recent end.
 */
static void hits_and_scan(void)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_LRU,
				    .capacity = { 1000, 1000 },
				    .prefix_rule = 0 };
	struct pol_cache *c;

	t_ok(pol_cache_create(&o, &c));
	touch(c, 1, 5);
	touch(c, 2, 5);
	t_ok(pol_cache_ref(c, 1));
	t_ok(pol_cache_ref(c, 2));
	t_ok(limit(c, 5, 1, 0, 0)); /* both in use: 5 stays over */
	t_assert_eq(row_present(c, 5)->blocks[POL_TIER_GPU], 2);
	t_ok(pol_cache_unref(c, 2));
	touch(c, 2, 5); /* a hit: 2 is the only one that could go */
	t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_GPU);
	t_assert_eq(row_present(c, 5)->limit_moves, 0);
	t_ok(pol_cache_unref(c, 1));
	touch(c, 2, 5); /* now 1 can go */
	t_assert_eq(pol_cache_tier_of(c, 1), POL_TIER_HOST);
	t_assert_eq(pol_cache_tier_of(c, 2), POL_TIER_GPU);
	pol_cache_destroy(c);

	/* 200 blocks of tenant 6 on the GPU, its oldest 150 in use */
	t_ok(pol_cache_create(&o, &c));
	for (uint64_t h = 1; h <= 200; h++) {
		touch(c, h, 6);
		if (h <= 150)
			t_ok(pol_cache_ref(c, h));
	}
	/* set: all 200 looked at, 151-200 go at once */
	t_ok(limit(c, 6, 10, 0, 0));
	t_assert_eq(row_present(c, 6)->blocks[POL_TIER_GPU], 150);
	t_assert_eq(row_present(c, 6)->limit_moves, 50);
	for (uint64_t h = 151; h <= 200; h++)
		t_assert_eq(pol_cache_tier_of(c, h), POL_TIER_HOST);
	/* an access: 64 looked at (1-64, now at the recent end), all in
	 * use: 1001 goes itself; then 65-128: 1002 */
	touch(c, 1001, 6);
	t_assert_eq(pol_cache_tier_of(c, 1001), POL_TIER_HOST);
	t_assert_eq(row_present(c, 6)->limit_moves, 51);
	touch(c, 1002, 6);
	t_assert_eq(pol_cache_tier_of(c, 1002), POL_TIER_HOST);
	t_assert_eq(row_present(c, 6)->blocks[POL_TIER_GPU], 150);
	t_assert_eq(row_present(c, 6)->limit_moves, 52);
	for (uint64_t h = 1; h <= 150; h++)
		t_ok(pol_cache_unref(c, h));
	touch(c, 1003, 6); /* free: back to 10, the 9 last used and 1003 */
	t_assert_eq(row_present(c, 6)->blocks[POL_TIER_GPU], 10);
	t_assert_eq(pol_cache_tier_of(c, 1003), POL_TIER_GPU);
	pol_cache_destroy(c);

	/* the GPU pinned over its capacity; tenant 7's new block goes down
	 * for its limit: cached, 0 */
	o.capacity[POL_TIER_GPU] = 4;
	t_ok(pol_cache_create(&o, &c));
	for (uint64_t h = 1; h <= 4; h++) {
		touch(c, h, h == 4 ? 7 : 8);
		t_ok(pol_cache_pin(c, h));
	}
	t_ok(limit(c, 7, 1, 0, 0));
	t_assert_eq(pol_cache_set_capacity(c, POL_TIER_GPU, 2), -ENOSPC);
	{
		struct pol_block_desc d = { .hash = 5, .tenant = 7 };

		t_ok(pol_cache_access(c, &d, NULL));
	}
	t_assert_eq(pol_cache_tier_of(c, 5), POL_TIER_HOST);
	pol_cache_destroy(c);
}

/*
 * An owner that charges POL_TENANT_OTHERS itself before the rows fill
 * (kvmmd does, for the tenants past its own 255) takes no tenant's row:
 * 255 tenants still get rows of their own, and can be limited.
 */
static void others_first(void)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_LRU,
				    .capacity = { 1000 },
				    .prefix_rule = 0 };
	struct pol_cache *c;

	t_ok(pol_cache_create(&o, &c));
	touch(c, 1, POL_TENANT_OTHERS);
	for (uint32_t u = 0; u < POL_TENANT_ROWS - 1; u++)
		touch(c, 100 + u, 7000 + u);
	t_assert_eq(pol_cache_tenants(c, NULL, 0), POL_TENANT_ROWS);
	t_assert(row(c, 7000 + POL_TENANT_ROWS - 2));
	t_ok(limit(c, 7000 + POL_TENANT_ROWS - 2, 1, 0, 0));
	touch(c, 2, 9999); /* one more: the others' */
	t_assert(!row(c, 9999));
	t_assert_eq(row_present(c, POL_TENANT_OTHERS)->blocks[POL_TIER_GPU], 2);
	t_assert_eq(limit(c, 9999, 1, 0, 0), -ENOSPC);
	pol_cache_destroy(c);
}

/* With the prefix rule a tenant over its limit gives up a leaf. */
static void prefix_rule(void)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_ASYM,
				    .capacity = { 8, 8 },
				    .prefix_rule = 1 };
	const uint64_t h[] = { 1, 2, 3, 4 };
	struct pol_cache *c;

	t_ok(pol_cache_create(&o, &c));
	t_ok(limit(c, 3, 2, 0, 0));
	touch_child(c, 1, 0, 3);
	touch_child(c, 2, 1, 3);
	/* 1 is the least recent but the parent of 2: 3 goes itself */
	touch_child(c, 3, 2, 3);
	expect_tiers(c, h, 3, "ggh");
	/* a sibling: 2 still has no child on the GPU, so it goes */
	touch_child(c, 4, 1, 3);
	expect_tiers(c, h, 4, "ghhg");
	pol_cache_destroy(c);
}

/*
 * Whether row r has a block on the GPU that could go, skip (a hit block)
 * aside: brute force over the hashes of the random workload.
 */
static bool could_go(struct pol_cache *c, uint16_t r, uint64_t skip)
{
	for (uint64_t h = 1; h <= 300; h++) {
		struct pol_block *b = pol_cache_lookup(c, h);

		if (h != skip && b && b->tier == POL_TIER_GPU &&
		    b->tenant == r && pol_cache_evictable(c, b))
			return true;
	}
	return false;
}

/*
 * Every policy, with and without the prefix rule, pins coming and
 * going: right after a limited tenant's access it is within its GPU
 * limit, or none of its GPU blocks can go; the tiers' counts are the
 * rows' sums; the unlimited tenants never gave up a block for a limit.
 */
static void random_all_policies(void)
{
	static const uint64_t lim[3][POL_TIER_COUNT] = { { 3, 0, 0 },
							 { 2, 5, 0 },
							 { 0, 0, 7 } };
	static struct pol_tenant_count rows[POL_TENANT_ROWS];

	for (int prefix = 0; prefix < 2; prefix++)
		for (int k = 0; k < POL_KIND_COUNT; k++) {
			struct pol_cache_opts o = { .size = sizeof(o),
						    .kind = (enum pol_kind)k,
						    .capacity = { 16, 32, 64 },
						    .prefix_rule = prefix };
			uint64_t moves = 0, over = 0, pinned[4] = { 0 };
			struct pol_cache *c;
			unsigned npin = 0;

			srand(11);
			t_ok(pol_cache_create(&o, &c));
			/* rows 0-5: limits make 0-2, a block each 3-5 */
			for (uint32_t u = 0; u < 3; u++)
				t_ok(limit(c, u, lim[u][0], lim[u][1],
					   lim[u][2]));
			for (uint32_t u = 3; u < 6; u++)
				touch(c, 1000 + u, u);
			for (int i = 0; i < 6000; i++) {
				uint64_t h = 1 + (uint64_t)(rand() % 300);
				uint32_t u = (uint32_t)(rand() % 6);
				struct pol_block_desc d = {
					.hash = h,
					.parent_hash = h > 1 ? h - 1 : 0,
					.flags = (h > 1 && rand() % 2) ?
							 POL_BLOCK_HAS_PARENT :
							 0,
					.tenant = u,
					.next_use = (uint64_t)(rand() % 1000),
				};

				unsigned was;
				int r;

				pol_cache_set_clock(c, ++clock_now);
				/* -ENOSPC: every GPU block pinned or a
				 * pinned one's ancestor */
				r = pol_cache_access(c, &d, &was);
				t_assert(r == 0 || r == -ENOSPC);
				t_assert_eq(pol_cache_tenants(c, rows,
							      POL_TENANT_ROWS),
					    6);
				if (u < 3 && lim[u][0] &&
				    rows[u].blocks[POL_TIER_GPU] > lim[u][0]) {
					t_assert(!could_go(
						c, (uint16_t)u,
						was == POL_TIER_GPU ? h : 0));
					over++;
				}
				/* up to 4 pins at a time, oldest let go */
				if (rand() % 20 == 0 && !pol_cache_pin(c, h)) {
					if (pinned[npin % 4])
						(void)pol_cache_unpin(
							c, pinned[npin % 4]);
					pinned[npin++ % 4] = h;
				}
			}
			for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
				uint64_t sum = 0;

				for (uint16_t r = 0; r < 6; r++)
					sum += rows[r].blocks[t];
				t_assert_eq(sum, pol_cache_count(c, t));
			}
			for (uint16_t r = 0; r < 6; r++) {
				t_assert_eq(rows[r].id, r);
				if (r >= 3)
					t_assert_eq(rows[r].limit_moves, 0);
				moves += rows[r].limit_moves;
			}
			printf("%-6s prefix rule %d: %llu limit moves, %llu "
			       "accesses left over a limit (pinned)\n",
			       pol_kind_string((enum pol_kind)k), prefix,
			       (unsigned long long)moves,
			       (unsigned long long)over);
			t_assert(moves > 100); /* the limits did work */
			pol_cache_destroy(c);
		}
}

int main(void)
{
	by_hand();
	pins_and_errors();
	hits_and_scan();
	others_first();
	prefix_rule();
	random_all_policies();
	printf("ok: tenants over their limits give up their own blocks\n");
	return 0;
}
