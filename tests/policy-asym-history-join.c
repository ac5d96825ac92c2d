/* SPDX-License-Identifier: MIT */
/*
 * asym follows block lives for a history sized from the tiers'
 * capacities (twice their sum, at least 2^17 uses).  A tier that joins
 * later (kvmmd's NVMe tier whose file opens late, pol_cache_opts
 * .joins_later) must size it again when it gets its capacity, or asym
 * never learns the returns at the ages that tier keeps blocks for.
 *
 * Block A is used, then RUN one-use blocks, then A again: its return
 * comes RUN + 1 uses later, past the history of a GPU + host tier of
 * 16 blocks each (2^17) and within the 2^18 that an NVMe tier of 70,000
 * blocks asks for.  The saved state's described returns count it:
 *   - NVMe tier of 70,000 from the start: 1 return;
 *   - NVMe tier joining at 70,000 a few uses in (before A): 1 return;
 *   - joining 10,000 uses after A's first use: 1 return, A's open life
 *     moved to the larger ring.  With A at use 140,011 the small ring
 *     has wrapped, so A's life moves to another slot, and the ring's
 *     other slots must hold no lives: one that held a copy of A's life
 *     would end it, unresolved, before A comes back;
 *   - NVMe tier joining at 70,000 only after A came back: 0 (the life
 *     had ended, unresolved, with the smaller history);
 *   - no NVMe tier: 0.
 * Built with asym's self-checks (POL_ASYM_CHECK, as policy-asym-windows):
 * every return asserts that the ring holds the block's open life, every
 * recount that its histogram matches a direct count of the ring.
 */
#define POL_ASYM_CHECK
/* every file of asym: the linker then takes none from the library */
#include "kvmm/policy/pol_asym.c"
#include "kvmm/policy/pol_asym_stats.c"
#include "kvmm/policy/pol_asym_victim.c"
#include "kvmm/policy/pol_asym_win.c"

#include <stdlib.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

#define RUN 150000 /* > 2^17, < 2^18 */
#define NVME 70000 /* 2 x (16 + 16 + 70,000) > 2^17 */
#define AFTER 10000 /* uses from A to the join (AFTER_A) */
#define WRAP 140000 /* uses before A: the small ring has wrapped */

enum join { FROM_START, BEFORE_A, AFTER_A, AFTER_RETURN, NEVER };

static uint64_t next_hash = 1000;

static void use(struct pol_cache *c, uint64_t hash)
{
	struct pol_block_desc d = { .hash = hash, .next_use = UINT64_MAX };

	t_ok(pol_cache_access(c, &d, NULL));
}

static double returns(struct pol_cache *c)
{
	struct pol_learned_summary sum;
	size_t len = pol_cache_learned_save(c, NULL, 0);
	void *buf = malloc(len);
	double all = 0;

	t_assert(buf != NULL);
	t_assert_eq(pol_cache_learned_save(c, buf, len), len);
	t_ok(pol_learned_describe(buf, len, &sum));
	for (unsigned k = 0; k < sum.nclass; k++)
		all += sum.cls[k].returns;
	free(buf);
	return all;
}

static double run(enum join when, int before)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_ASYM,
				    .capacity = { 16, 16, 0 },
				    .prefix_rule = -1 };
	struct pol_cache *c;
	double r;

	if (when == FROM_START)
		o.capacity[POL_TIER_NVME] = NVME;
	else if (when != NEVER)
		o.joins_later = 1u << POL_TIER_NVME;
	t_ok(pol_cache_create(&o, &c));
	for (int i = 0; i < before; i++)
		use(c, next_hash++);
	if (when == BEFORE_A)
		t_ok(pol_cache_set_capacity(c, POL_TIER_NVME, NVME));
	use(c, 1); /* A */
	for (int i = 0; i < AFTER; i++)
		use(c, next_hash++);
	if (when == AFTER_A)
		t_ok(pol_cache_set_capacity(c, POL_TIER_NVME, NVME));
	for (int i = 0; i < RUN - AFTER; i++)
		use(c, next_hash++);
	use(c, 1); /* A again, RUN + 1 uses later */
	if (when == AFTER_RETURN)
		t_ok(pol_cache_set_capacity(c, POL_TIER_NVME, NVME));
	/* the counts are read at the periodic recount: push one through */
	for (int i = 0; i < 5000; i++)
		use(c, next_hash++);
	r = returns(c);
	pol_cache_destroy(c);
	return r;
}

int main(void)
{
	t_assert_eq(run(FROM_START, 10), 1);
	t_assert_eq(run(BEFORE_A, 10), 1);
	t_assert_eq(run(AFTER_A, 10), 1);
	t_assert_eq(run(AFTER_A, WRAP), 1);
	t_assert_eq(run(AFTER_RETURN, 10), 0);
	t_assert_eq(run(NEVER, 10), 0);
	t_assert_eq(run(NEVER, WRAP), 0);
	printf("asym's history grew with a tier that joined later: a return "
	       "%d uses apart was learned\n",
	       RUN + 1);
	return 0;
}
