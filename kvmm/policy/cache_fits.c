/* SPDX-License-Identifier: MIT */
/*
 * The tiered cache's checks before a move: could tier t take a block,
 * making room as make_room() would (pol_cache_fits()), could a block
 * cached below move up into t (pol_cache_promotable()), and what kvmmd
 * asks before it moves bytes (pol_cache_can_admit(), _can_promote(),
 * _can_access()).  cache.c's moves ask them too: a demotion into a full
 * tier (pol_cache_fits()), an access to a block cached below
 * (pol_cache_promotable()).
 *
 * Side-effect free: what a check sets aside while it asks the policy for
 * victims (set_aside(), pol_cache_priv.h) it releases before it returns,
 * and a victim choice changes nothing in any policy.  Nothing here is on
 * the path of a one-tier cache's decisions.
 */
#include "kvmm/policy/pol_cache_priv.h"

/*
 * pol_cache_evictable() for b as it would be in tier t (it is in another
 * one, or about to enter t): a live TTL lets it go only down a tier (the
 * second pass of room_victim()), never out of the last.
 */
static bool evictable_in(const struct pol_cache *c, const struct pol_block *b,
			 unsigned t)
{
	/* not POL_BLOCK_ASIDE: pol_cache_promotable() sets the block it
	 * asks about aside in the tier it leaves */
	if (b->pins || b->refcount)
		return false;
	if (b->ttl_expiry && b->ttl_expiry > c->now &&
	    !((b->flags & POL_BLOCK_TTL_DEMOTE) &&
	      lower_tier(c, t) != POL_TIER_NONE))
		return false;
	return leaf_in(c, b, t);
}

/* How many candidates pol_cache_fits() rules out before it gives up (a
 * tier below that is stuck would otherwise be searched through, block by
 * block). */
#define FITS_TRIES 16

/* Can x, evictable in tier t, leave it: dropped from the last tier (its
 * evictability there says no child stays anywhere), or into the next? */
static bool way_down(struct pol_cache *c, struct pol_block *x, unsigned t)
{
	unsigned lower = lower_tier(c, t);

	return lower == POL_TIER_NONE || pol_cache_fits(c, lower, x, true);
}

/*
 * Could tier t take v (NULL: a block new to the cache, with no parent
 * there) and end no fuller than it is, by moving down or dropping a block
 * that may go (v itself among them, with self) as make_room() would?
 * Within its capacity, for a tier at it; one over it stays so.  Side-effect
 * free.  Exact but for the bound on the candidates; a no refuses the
 * move, which is safe.
 */
bool pol_cache_fits(struct pol_cache *c, unsigned t, struct pol_block *v,
		    bool self)
{
	uint32_t mark = c->naside;
	uint64_t need;
	struct pol_block *p;
	bool ttl;

	if (c->count[t] < c->cap[t])
		return true;
	/*
	 * One block must leave for v, even where t is over its capacity
	 * already (an admission that found nothing else to go,
	 * pol_cache_admit_at(): a pin of a recovered block into a tier full
	 * of pinned ones).  This asked for every block over as well, so v
	 * could not even pass through such a tier on its way out (dropped
	 * from the last one, as at capacity): with the tiers above full, a
	 * new block was not cached at all (tests/cache-cold-full.c).
	 * make_room() still takes what more it can once v is in.
	 */
	need = 1;
	/* v in t makes its parent, in t or below, a parent of a block
	 * above it or beside it: no longer a victim there */
	p = v && c->prefix_rule ? pol_cache_parent(c, v) : NULL;
	if (p && p->tier != POL_TIER_NONE && p->tier >= t && !set_aside(c, p))
		goto out;
	if (v && self && evictable_in(c, v, t) && way_down(c, v, t))
		need--;
	for (unsigned i = 0; need && i < FITS_TRIES; i++) {
		struct pol_block *x = room_victim(c, t, &ttl);

		if (!x || x == v)
			break;
		if (way_down(c, x, t))
			need--;
		if (need && !set_aside(c, x))
			break;
	}
out:
	release_aside(c, mark);
	return !need;
}

bool pol_cache_can_admit(struct pol_cache *c, unsigned tier)
{
	if (tier >= POL_TIER_COUNT || !c->priv[tier])
		return false;
	/* a victim choice has no side effect in any policy: asym only
	 * remembers the values it computed */
	return pol_cache_fits(c, tier, NULL, false);
}

/*
 * Can b, cached in a tier below t, move up into t?  Its place below is
 * free once it leaves (what goes down from t may take it), and it is not
 * a victim there meanwhile.  self: b may be its own victim (moved up and
 * straight back down, which an access does; kvmmd asks beforehand
 * whether anything else could go, pol_cache_can_promote()).
 */
bool pol_cache_promotable(struct pol_cache *c, struct pol_block *b, unsigned t,
			  bool self)
{
	uint32_t mark = c->naside;
	unsigned from = b->tier;
	bool ok;

	if (c->count[t] < c->cap[t])
		return true;
	/* a block that may go from t goes from there, wherever it came from:
	 * if t's lower tier is full, b's own place may be its way down */
	if (!set_aside(c, b))
		return false;
	c->count[from]--;
	ok = pol_cache_fits(c, t, b, self);
	c->count[from]++;
	release_aside(c, mark);
	return ok;
}

bool pol_cache_can_promote(struct pol_cache *c, unsigned tier, uint64_t hash)
{
	struct pol_block *b;

	if (tier >= POL_TIER_COUNT || !c->priv[tier])
		return false;
	b = pol_cache_lookup(c, hash);
	if (!b)
		return pol_cache_fits(c, tier, NULL, false);
	if (b->tier <= tier)
		return true;
	return pol_cache_promotable(c, b, tier, false);
}

bool pol_cache_can_access(struct pol_cache *c, uint64_t hash)
{
	struct pol_block *b = pol_cache_lookup(c, hash);

	/* pol_cache_access()'s own test, before it changes anything */
	return !b || b->tier == POL_TIER_GPU ||
	       pol_cache_promotable(c, b, POL_TIER_GPU, true);
}
