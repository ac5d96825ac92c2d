/* SPDX-License-Identifier: MIT */
/*
 * What the tiered cache's files share (cache.c and its neighbours: see
 * its top comment): the cache itself, the last tier's choice made at
 * creation and at each capacity change, the tenant limit check made on
 * each entry into a tier, and what cache.c's moves and cache_fits.c's
 * checks both use: the prefix rule's leaf test, setting blocks aside
 * and the victim choice.  Those are inline here, as they were in one
 * file: room_victim() runs in every decision (make_room()), and a call
 * cost instructions there (bench/policy's callgrind count).  Private to
 * kvmm/policy.
 */
#ifndef KVMM_POLICY_POL_CACHE_PRIV_H
#define KVMM_POLICY_POL_CACHE_PRIV_H

#include <stdlib.h>

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
	 * a stack, each call releasing what it pushed (set_aside()) */
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

/* Would b be a leaf in tier t (the prefix rule)? */
static inline bool leaf_in(const struct pol_cache *c, const struct pol_block *b,
			   unsigned t)
{
	unsigned upto;

	if (!c->prefix_rule)
		return true;
	/* From the last tier a block is dropped: no child may stay anywhere. */
	upto = t == c->last_tier ? POL_TIER_COUNT - 1 : t;
	for (unsigned u = 0; u <= upto; u++)
		if (b->nchild[u])
			return false;
	return true;
}

static inline void notify_change(struct pol_cache *c, struct pol_block *b)
{
	if (b->tier < POL_TIER_COUNT && c->ops->on_change)
		c->ops->on_change(c->priv[b->tier], b);
}

/*
 * Setting blocks aside: while the cache looks for a block that can make
 * room, the ones it has ruled out are flagged POL_BLOCK_ASIDE, which
 * pol_cache_evictable() reads, so that the policy's next victim is
 * another.  The policy is told (on_change: asym forgets a candidate's
 * value), nothing moves in its structures.  Each call releases what it
 * set aside before it returns (release_aside() to the mark it took).
 */
static inline bool set_aside(struct pol_cache *c, struct pol_block *b)
{
	if (b->flags & POL_BLOCK_ASIDE)
		return true;
	if (c->naside == c->cap_aside) {
		uint32_t n = c->cap_aside ? 2 * c->cap_aside : 16;
		uint32_t *a = realloc(c->aside, n * sizeof(*a));

		if (!a)
			return false;
		c->aside = a;
		c->cap_aside = n;
	}
	c->aside[c->naside++] = pol_index_id(&c->ix, b);
	b->flags |= POL_BLOCK_ASIDE;
	notify_change(c, b);
	return true;
}

static inline void release_aside(struct pol_cache *c, uint32_t mark)
{
	while (c->naside > mark) {
		struct pol_block *b =
			pol_index_at(&c->ix, c->aside[--c->naside]);

		b->flags &= (uint8_t)~POL_BLOCK_ASIDE;
		notify_change(c, b);
	}
}

struct pol_block *pol_cache_ttl_victim(struct pol_cache *c, unsigned t,
				       bool *ttl);

/*
 * make_room()'s choice: the policy's victim, or with a lower tier one
 * that only a demotable TTL holds (counted by the caller).  Inline: a
 * call here cost each decision 13 instructions (bench/policy's callgrind
 * count).
 */
static inline __attribute__((always_inline)) struct pol_block *
room_victim(struct pol_cache *c, unsigned t, bool *ttl)
{
	struct pol_block *v = c->ops->victim(c->priv[t]);

	*ttl = false;
	if (v || lower_tier(c, t) == POL_TIER_NONE)
		return v;
	return pol_cache_ttl_victim(c, t, ttl);
}

/* The checks before a move (cache_fits.c): could tier t take v, could b
 * move up into t. */
bool pol_cache_fits(struct pol_cache *c, unsigned t, struct pol_block *v,
		    bool self);
bool pol_cache_promotable(struct pol_cache *c, struct pol_block *b, unsigned t,
			  bool self);

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
