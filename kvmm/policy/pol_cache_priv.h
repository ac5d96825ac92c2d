/* SPDX-License-Identifier: MIT */
/*
 * What the tiered cache's files share (cache.c and its neighbours: see
 * its top comment): the cache itself, the last tier's choice made at
 * creation and at each capacity change, and the tenant limit check made
 * on each entry into a tier.  Private to kvmm/policy.
 */
#ifndef KVMM_POLICY_POL_CACHE_PRIV_H
#define KVMM_POLICY_POL_CACHE_PRIV_H

#include "kvmm/policy/policy.h"
#include "kvmm/policy/pol_tenant.h"

struct pol_cache {
	struct pol_index ix;
	enum pol_kind kind;
	bool prefix_rule;
	bool msa; /* pol_cache_opts.msa */
	unsigned last_tier; /* lowest tier with a capacity */
	/* each tier's next one down with a capacity, POL_TIER_NONE for
	 * none: worked out with last_tier, read on every move down */
	uint8_t lower[POL_TIER_COUNT];
	uint64_t cap[POL_TIER_COUNT];
	uint64_t count[POL_TIER_COUNT];
	const struct pol_ops *ops;
	void *priv[POL_TIER_COUNT];
	pol_move_fn move_fn;
	void *move_arg;
	uint64_t now;
	uint64_t ticks;
	const struct pol_cost_model *cost;
	uint64_t block_bytes;
	/* make_room's second pass: demotable TTLs do not hold a block */
	bool ttl_demoting;
	/* blocks set aside (POL_BLOCK_ASIDE) by the calls under way, by id:
	 * a stack, each call releasing what it pushed (fits()) */
	uint32_t *aside;
	uint32_t naside, cap_aside;
	struct pol_cache_stats st;
	struct pol_tenants tenants; /* who brought what each tier holds */
};

void pol_cache_set_last_tier(struct pol_cache *c);

/* pol_cache_lower_tier() for a tier that exists (t < POL_TIER_COUNT) */
static inline unsigned lower_tier(const struct pol_cache *c, unsigned t)
{
	return c->lower[t];
}
void pol_cache_tenant_room_slow(struct pol_cache *c, uint16_t row, unsigned t,
				struct pol_block *in, bool in_may_go);

/*
 * Bring tenant row within its limit in tier t
 * (pol_cache_tenant_room_slow(), only for a limited row: one test for
 * the others).  in (may be NULL): the block whose entry or use made the
 * check, which goes itself only when in_may_go and none of the tenant's
 * others there can.
 */
static inline void tenant_room(struct pol_cache *c, uint16_t row, unsigned t,
			       struct pol_block *in, bool in_may_go)
{
	if (__builtin_expect(c->tenants.row[row].limited, 0))
		pol_cache_tenant_room_slow(c, row, t, in, in_may_go);
}

#endif
