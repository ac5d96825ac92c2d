/* SPDX-License-Identifier: MIT */
/*
 * The tiered cache (see policy.h): index + per-tier policy instances +
 * the bookkeeping every policy shares (tier membership, child counts for
 * the prefix rule, pins, TTLs, move reporting) and the moves between
 * tiers (pol_cache_access(), make_room(), move_down(), and
 * pol_cache_tenant_room_slow() for a tenant over its limit).
 *
 * Admission inserts first and evicts after, so a policy may pick the
 * block it was just given (a bypass, which belady needs to be optimal).
 * Entry pointers are not kept across pol_index_get(), which may move the
 * entry array; ids are.
 *
 * Beside it: cache_create.c (creation and the accessors), cache_lookup.c
 * (lookups by hash), cache_tenant.c (tenant rows and limits),
 * cache_kind.c (policy kinds and the learned state), cache_fits.c (the
 * checks before a move: pol_cache_fits(), pol_cache_promotable(),
 * pol_cache_can_*()), and pol_cache_priv.h (struct pol_cache and what
 * they share: the prefix rule's leaf test, setting blocks aside, the
 * victim choice, inline).  The pins, refs and TTLs stay here, beside the
 * moves that read them: the compiler inlines the same calls on an access
 * as when they were one file.
 */
#include <errno.h>

#include "kvmm/policy/pol_cache_priv.h"

static int make_room(struct pol_cache *c, unsigned t);

int pol_cache_set_capacity(struct pol_cache *c, unsigned tier, uint64_t cap)
{
	/* a tier exists when it had a capacity at create time (it has a
	 * policy instance); 0 empties it for now, and it can come back */
	if (tier >= POL_TIER_COUNT || !c->priv[tier])
		return -EINVAL;
	c->cap[tier] = cap;
	/*
	 * A tier at 0 passes blocks by (pol_cache_lower_tier()), one raised
	 * from 0 takes them again: the last tier may be another now, and
	 * with it what may be dropped (leaf_in()) and what the instances
	 * keep of it (asym's tie-break, arc's target).
	 */
	pol_cache_set_last_tier(c);
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		if (c->priv[t] && c->ops->on_capacity)
			c->ops->on_capacity(c->priv[t]);
	return make_room(c, tier);
}

int pol_cache_drain(struct pol_cache *c, unsigned to)
{
	int err = 0;

	if (to >= POL_TIER_COUNT || !c->priv[to])
		return -EINVAL;
	for (unsigned t = 0; t < to; t++) {
		unsigned lower = t + 1;
		int r;

		if (!c->priv[t])
			continue;
		while (lower < to && !c->priv[lower])
			lower++;
		/* room in the tier below for every block of t: no move
		 * down there asks whether it fits */
		if (lower < to && c->cap[lower] < c->count[lower] + c->count[t])
			(void)pol_cache_set_capacity(
				c, lower, c->count[lower] + c->count[t]);
		r = pol_cache_set_capacity(c, t, 0);
		if (r && !err)
			err = r;
	}
	for (unsigned t = 0; t < to; t++)
		if (c->priv[t] && c->count[t])
			return -ENOSPC;
	return err;
}

unsigned pol_cache_lower_tier(const struct pol_cache *c, unsigned tier)
{
	return tier < POL_TIER_COUNT ? lower_tier(c, tier) : POL_TIER_NONE;
}

bool pol_cache_is_leaf(const struct pol_cache *c, const struct pol_block *b)
{
	return b->tier >= POL_TIER_COUNT || leaf_in(c, b, b->tier);
}

bool pol_cache_evictable(const struct pol_cache *c, const struct pol_block *b)
{
	if (b->pins || b->refcount || (b->flags & POL_BLOCK_ASIDE))
		return false;
	if (b->ttl_expiry && b->ttl_expiry > c->now &&
	    !(c->ttl_demoting && (b->flags & POL_BLOCK_TTL_DEMOTE)))
		return false;
	return pol_cache_is_leaf(c, b);
}

void pol_cache_hold(struct pol_cache *c, struct pol_block *b)
{
	b->holds++;
}

static void maybe_free(struct pol_cache *c, struct pol_block *b)
{
	if (b->tier == POL_TIER_NONE && !b->holds)
		pol_index_del(&c->ix, pol_index_id(&c->ix, b));
}

void pol_cache_release(struct pol_cache *c, struct pol_block *b)
{
	if (b->holds)
		b->holds--;
	maybe_free(c, b);
}

/*
 * b->parent_id is a hint that saves a table probe (the dominant cost at
 * 1M blocks); it is checked against the hash because ids are reused, so
 * the answer does not depend on how ids were handed out.
 */
struct pol_block *pol_cache_parent(struct pol_cache *c, struct pol_block *b)
{
	uint32_t pid = b->parent_id;
	struct pol_block *p;

	if (!(b->flags & POL_BLOCK_HAS_PARENT))
		return NULL;
	if (pid != POL_NONE && pid < c->ix.high_water) {
		p = pol_index_at(&c->ix, pid);
		if (p->live && p->hash == b->parent_hash)
			return p;
	}
	pid = pol_index_find(&c->ix, b->parent_hash);
	b->parent_id = pid;
	return pid == POL_NONE ? NULL : pol_index_at(&c->ix, pid);
}

/* Account b (now in tier t) in its parent's child counts. */
static void count_in_parent(struct pol_cache *c, struct pol_block *b)
{
	struct pol_block *p;

	if (!c->prefix_rule)
		return;
	p = pol_cache_parent(c, b);
	if (!p)
		return;
	if (p->tier == POL_TIER_NONE || p == b)
		return;
	p->nchild[b->tier]++;
	b->counted = b->tier;
	notify_change(c, p);
}

static void uncount_in_parent(struct pol_cache *c, struct pol_block *b)
{
	struct pol_block *p;
	unsigned t = b->counted;

	if (t == POL_TIER_NONE)
		return;
	b->counted = POL_TIER_NONE;
	p = pol_cache_parent(c, b);
	if (!p)
		return;
	if (p->nchild[t])
		p->nchild[t]--;
	notify_change(c, p);
}

/* Put b (in no tier) into tier t. */
static void enter_tier(struct pol_cache *c, struct pol_block *b, unsigned t)
{
	b->tier = (uint8_t)t;
	c->count[t]++;
	pol_tenant_enter(&c->tenants, &c->ix, b, t);
	c->ops->on_insert(c->priv[t], b);
	count_in_parent(c, b);
}

static void leave_tier(struct pol_cache *c, struct pol_block *b)
{
	unsigned t = b->tier;

	uncount_in_parent(c, b);
	c->ops->on_remove(c->priv[t], b);
	c->count[t]--;
	pol_tenant_leave(&c->tenants, &c->ix, b, t);
	b->tier = POL_TIER_NONE;
}

/*
 * b left the cache (dropped, or removed by its owner): its entry may stay
 * as a policy's history (arc's ghosts, asym's return statistics), which
 * keeps what ranks a block's return, never what held it.  Its owner let
 * go of those with the block (kvmmd forgets its pin records and never
 * gives back its sequences' references), so a block admitted again
 * starts unheld, as one whose entry was freed (lru, lfu, belady); kept,
 * they held it in its tier for good.  After leave_tier(): the policy
 * takes b out of its structures by what held it there.
 */
static inline void forget_holds(struct pol_block *b)
{
	b->pins = 0;
	b->refcount = 0;
	b->ttl_expiry = 0;
	b->priority = 0;
	b->flags &= (uint8_t)~POL_BLOCK_TTL_DEMOTE;
}

static void report(struct pol_cache *c, const struct pol_block *b,
		   unsigned from, unsigned to)
{
	if (c->move_fn)
		c->move_fn(c->move_arg, b, from, to);
}

/* room_victim()'s second pass, with a lower tier: a block that only a
 * demotable TTL holds (apart: it is rarely needed). */
__attribute__((noinline)) struct pol_block *
pol_cache_ttl_victim(struct pol_cache *c, unsigned t, bool *ttl)
{
	struct pol_block *v;

	/*
	 * Nothing else can go: rather than refuse the block that needs the
	 * room (a running request's), move a block whose TTL allows it down
	 * a tier.  It stays cached and comes back by a reload, not a
	 * recompute.
	 */
	c->ttl_demoting = true;
	v = c->ops->victim(c->priv[t]);
	c->ttl_demoting = false;
	*ttl = v != NULL;
	return v;
}

/* May b (in some tier) be dropped: evictable as from the last tier? */
static bool droppable(const struct pol_cache *c, const struct pol_block *b)
{
	return !b->pins && !b->refcount &&
	       !(b->ttl_expiry && b->ttl_expiry > c->now) &&
	       leaf_in(c, b, c->last_tier);
}

/* inline: each decision of a one-tier cache ends in it (move_down()),
 * where the call cost 20 instructions (bench/policy's callgrind count) */
static inline __attribute__((always_inline)) void drop(struct pol_cache *c,
						       struct pol_block *v)
{
	unsigned from = v->tier;

	leave_tier(c, v);
	forget_holds(v);
	c->st.drops++;
	c->tenants.row[v->tenant].dropped++;
	report(c, v, from, POL_TIER_NONE);
	maybe_free(c, v);
}

/*
 * Start the misses of what follows while the policy takes v out of its
 * structures: its parent's child counts.
 */
static inline void prefetch_parent(struct pol_cache *c,
				   const struct pol_block *v)
{
	if (v->counted != POL_TIER_NONE && v->parent_id < c->ix.high_water)
		pol_index_prefetch_entry(&c->ix, v->parent_id, 1);
}

/*
 * move_down() into lower, the tier below t.  Apart from the drop from
 * the last tier, which every decision of a one-tier cache makes and
 * which then needs no room for the many registers of this one (bench
 * policy's callgrind count).
 */
static __attribute__((noinline)) int
demote(struct pol_cache *c, struct pol_block *v, unsigned t, unsigned lower)
{
	if (c->count[lower] >= c->cap[lower] &&
	    !pol_cache_fits(c, lower, v, true)) {
		c->st.refused++;
		return -ENOSPC;
	}
	prefetch_parent(c, v);
	leave_tier(c, v);
	c->st.demotions[t]++;
	report(c, v, t, lower);
	enter_tier(c, v, lower);
	tenant_room(c, v->tenant, lower, v, true);
	/* pol_cache_fits() said there is room; should the lower tier have been over
	 * its capacity already, v goes only if it may (else it stays, over) */
	if (make_room(c, lower) == -ENOSPC && v->tier == lower &&
	    droppable(c, v))
		drop(c, v);
	return 0;
}

/*
 * Move v (evictable, in tier t) down a tier, or drop it from the last:
 * 0.  -ENOSPC, and nothing done, when the tier below is full and could
 * make no room for v (pol_cache_fits()): everything there is pinned, referenced,
 * held by a TTL or a parent of a cached child, and v cannot pass through
 * it either.  Dropping v instead could drop a parent whose children are
 * cached below (v is a leaf of t, not of the tiers under it), or break
 * a TTL, so the caller picks another victim (make_room()).
 */
static int move_down(struct pol_cache *c, struct pol_block *v, unsigned t)
{
	unsigned lower = lower_tier(c, t);

	if (lower != POL_TIER_NONE)
		return demote(c, v, t, lower);
	/* and v's slot in the index table, which the drop frees */
	prefetch_parent(c, v);
	pol_index_prefetch(&c->ix, v->hash);
	drop(c, v);
	return 0;
}

static int make_room_aside(struct pol_cache *c, unsigned t,
			   struct pol_block *refused);

/*
 * Bring tier t back within its capacity by moving victims down (or
 * dropping them from the last tier).  Victims go into the lower tier
 * first, which then makes room the same way.  A victim that cannot go
 * down (move_down()) is set aside and the policy asked for another
 * (make_room_aside()).
 */
static int make_room(struct pol_cache *c, unsigned t)
{
	while (c->count[t] > c->cap[t]) {
		bool ttl;
		struct pol_block *v = room_victim(c, t, &ttl);

		if (!v) {
			c->st.no_victim++;
			return -ENOSPC;
		}
		if (move_down(c, v, t))
			return make_room_aside(c, t, v);
		if (ttl)
			c->st.ttl_demotions++;
	}
	return 0;
}

/*
 * make_room() from its first victim that could not go down (refused) on,
 * setting aside each such victim until the tier is within its capacity
 * or nothing is left to ask for.  Apart, so that the loop every decision
 * runs keeps no aside mark: what calls nested in make_room() set aside
 * they release, so the mark taken here is the one it would have taken.
 */
static __attribute__((noinline)) int
make_room_aside(struct pol_cache *c, unsigned t, struct pol_block *refused)
{
	uint32_t mark = c->naside;
	int r = 0;

	if (!set_aside(c, refused))
		return -ENOSPC;
	while (c->count[t] > c->cap[t]) {
		bool ttl;
		struct pol_block *v = room_victim(c, t, &ttl);

		if (!v) {
			c->st.no_victim++;
			r = -ENOSPC;
			break;
		}
		if (move_down(c, v, t)) {
			if (!set_aside(c, v)) {
				r = -ENOSPC;
				break;
			}
			continue;
		}
		if (ttl)
			c->st.ttl_demotions++;
	}
	release_aside(c, mark);
	return r;
}

/* How many of a tenant's least recently used blocks a victim search on
 * an access looks at (bounded: a tenant over its limit with many blocks
 * in use would otherwise be walked through at every access; a limit
 * being set looks at them all, once). */
#define TENANT_SCAN 64

/*
 * The least recently used block of row's in tier t that can go, but for
 * skip.  Blocks that cannot go (in use, pinned, a parent of a cached
 * child) are moved to the recent end as they are passed, as the kernel's
 * LRU rotates referenced pages: the next search starts past them.
 */
static struct pol_block *tenant_victim(struct pol_cache *c, uint16_t row,
				       unsigned t, const struct pol_block *skip,
				       uint64_t bound)
{
	struct pol_tenants *tn = &c->tenants;
	uint64_t n = tn->row[row].blocks[t];

	/* each block looked at once at most */
	for (uint64_t i = 0; i < n && i < bound; i++) {
		uint32_t id = tn->head[row][t];
		struct pol_block *b = pol_index_at(&c->ix, id);

		if (b != skip && pol_cache_evictable(c, b))
			return b;
		pol_tenant_list_del(tn, &c->ix, row, t, id);
		pol_tenant_list_add(tn, &c->ix, row, t, id);
	}
	return NULL;
}

/*
 * Bring tenant row within its limit in tier t by moving its own least
 * recently used blocks down (policy.h, "Tenants"); it stays over when
 * none of them can go.  The fallback to in comes after a search of 64:
 * with more of the tenant's blocks in use at the old end, in may go
 * while an older idle block stays, until the rotation brings that one
 * up (one copy either way; bounded work comes first).
 */
void pol_cache_tenant_room_slow(struct pol_cache *c, uint16_t row, unsigned t,
				struct pol_block *in, bool in_may_go)
{
	struct pol_tenant_count *r = &c->tenants.row[row];

	while (r->limited && r->limit[t] && r->blocks[t] > r->limit[t]) {
		struct pol_block *v = tenant_victim(
			c, row, t, in, in ? TENANT_SCAN : UINT64_MAX);

		if (!v && in_may_go && in && in->tier == t &&
		    pol_cache_evictable(c, in))
			v = in;
		if (!v)
			return;
		if (move_down(c, v, t))
			return; /* nowhere to go below: over until later */
		r->limit_moves++;
	}
}

int pol_cache_access(struct pol_cache *c, const struct pol_block_desc *d,
		     unsigned *was_tier)
{
	struct pol_block *b;
	bool created;
	uint32_t id;
	unsigned from;

	if (c->ops->prefetch)
		c->ops->prefetch(c->priv[POL_TIER_GPU], d->hash);
	id = pol_index_get(&c->ix, d->hash, &created);
	if (id == POL_NONE)
		return -ENOMEM;
	b = pol_index_at(&c->ix, id);
	b->few_new = (d->flags & POL_BLOCK_FEW_NEW) ? 1 : 0;
	from = b->tier;
	if (was_tier)
		*was_tier = from;
	if (from == POL_TIER_NONE) {
		b->parent_hash = d->parent_hash;
		b->position = d->position;
		b->flags = (uint8_t)(d->flags &
				     ~(POL_BLOCK_WARM_LINEAGE |
				       POL_BLOCK_TTL_DEMOTE |
				       POL_BLOCK_FEW_NEW | POL_BLOCK_ASIDE));
		b->bytes = d->bytes ? d->bytes : c->block_bytes;
		b->parent_id = POL_NONE;
		if (!b->access_count)
			b->turn = 1;
		if (b->flags & POL_BLOCK_HAS_PARENT) {
			struct pol_block *p = pol_cache_parent(c, b);

			if (p && p->tier != POL_TIER_NONE &&
			    p->access_count >= 2)
				b->flags |= POL_BLOCK_WARM_LINEAGE;
			/* a block created under a parent that an earlier
			 * request made starts the next turn of its chain */
			if (p && !b->access_count) {
				unsigned turn =
					p->turn + (p->access_count >= 2);

				b->turn = turn < 255 ? turn : 255;
			}
		}
	} else if (from != POL_TIER_GPU &&
		   !pol_cache_promotable(c, b, POL_TIER_GPU, true)) {
		/*
		 * Cached below, and the GPU could make no room for it
		 * (everything there in use, pinned, held, or only its
		 * parent): it stays where it is, untouched, and the access
		 * is a miss.  Moving it up would leave it nowhere to go but
		 * out, lower copy, pins and all.
		 */
		c->st.refused++;
		return -ENOSPC;
	}
	b->next_use = d->next_use;
	b->last_access = c->now;
	b->tick = ++c->ticks;
	b->access_count++;
	if (from != POL_TIER_NONE && from != POL_TIER_GPU && c->ops->on_touch)
		c->ops->on_touch(c->priv[from], b);
	if (from == POL_TIER_GPU) {
		c->st.hits[POL_TIER_GPU]++;
		c->ops->on_access(c->priv[POL_TIER_GPU], b);
		if (c->tenants.row[b->tenant].limited) {
			/* refreshed, and within its limit again if it was
			 * over with nothing that could go; never by moving b,
			 * which its user is about to take */
			pol_tenant_touch(&c->tenants, &c->ix, b, POL_TIER_GPU);
			tenant_room(c, b->tenant, POL_TIER_GPU, b, false);
		}
		return 0;
	}
	if (from != POL_TIER_NONE) {
		c->st.hits[from]++;
		c->st.promotions++;
		leave_tier(c, b);
		report(c, b, from, POL_TIER_GPU);
	} else {
		c->st.inserts++;
		/* charged to whoever admits it, in every tier it goes to */
		b->tenant = pol_tenant_row(&c->tenants, d->tenant);
		c->tenants.row[b->tenant].admitted++;
		report(c, b, POL_TIER_NONE, POL_TIER_GPU);
	}
	enter_tier(c, b, POL_TIER_GPU);
	/* at its limit with nothing else that can go, b goes down itself
	 * (a bypass, as a policy may choose) */
	tenant_room(c, b->tenant, POL_TIER_GPU, b, true);
	if (make_room(c, POL_TIER_GPU) == -ENOSPC) {
		/* b went down for its tenant's limit: it is cached, and the
		 * GPU was over capacity before it came */
		if (b->tier != POL_TIER_GPU && b->tier != POL_TIER_NONE)
			return 0;
		/* Everything else is pinned: the new block is not cached
		 * (one from below stays over, should it not be droppable:
		 * pol_cache_promotable() said there was room, which the lower tiers'
		 * answer can get wrong only when over their capacity).  A
		 * drop, counted as one (its tenant admitted it above): the
		 * owner counts the report as a GPU drop, and a tenant's
		 * admitted less dropped must stay what it has cached */
		if (b->tier == POL_TIER_GPU &&
		    (from == POL_TIER_NONE || droppable(c, b)))
			drop(c, b);
		return -ENOSPC;
	}
	return 0;
}

static int remove_block(struct pol_cache *c, uint64_t hash, bool dropped)
{
	struct pol_block *b = pol_cache_lookup(c, hash);
	unsigned from;

	if (!b)
		return -ENOENT;
	from = b->tier;
	leave_tier(c, b);
	forget_holds(b);
	if (dropped) {
		c->st.drops++;
		c->tenants.row[b->tenant].dropped++;
	}
	report(c, b, from, POL_TIER_NONE);
	maybe_free(c, b);
	return 0;
}

int pol_cache_remove(struct pol_cache *c, uint64_t hash)
{
	return remove_block(c, hash, false);
}

int pol_cache_remove_dropped(struct pol_cache *c, uint64_t hash)
{
	return remove_block(c, hash, true);
}

int pol_cache_return(struct pol_cache *c, uint64_t hash, unsigned tier)
{
	struct pol_block *b = pol_cache_lookup(c, hash);

	if (!b)
		return -ENOENT;
	if (tier >= POL_TIER_COUNT || !c->priv[tier] || b->tier <= tier)
		return -EINVAL;
	/* not reported: the owner asked for the move, and has made it */
	leave_tier(c, b);
	enter_tier(c, b, tier);
	tenant_room(c, b->tenant, tier, b, true);
	/*
	 * The tier takes one more block than it had room for: its victim
	 * goes down (or out of the last tier) as for any block that came
	 * in; b itself only when the policy picks it.  With nothing that
	 * may go, b goes if it may (as move_down() does), else the tier
	 * stays over until a block leaves.
	 */
	if (make_room(c, tier) == -ENOSPC) {
		if (b->tier == tier && droppable(c, b))
			drop(c, b);
		return -ENOSPC;
	}
	return 0;
}

int pol_cache_admit_at(struct pol_cache *c, const struct pol_block_desc *d,
		       unsigned tier)
{
	uint32_t mark = c->naside, id;
	struct pol_block *b;
	bool created;

	if (tier >= POL_TIER_COUNT || !c->priv[tier] || !c->cap[tier])
		return -EINVAL;
	id = pol_index_get(&c->ix, d->hash, &created);
	if (id == POL_NONE)
		return -ENOMEM;
	b = pol_index_at(&c->ix, id);
	if (b->tier != POL_TIER_NONE)
		return -EEXIST;
	/* what an admission by pol_cache_access() sets, but no use: the
	 * tick and the use count stay (they count accesses), and a block
	 * with history keeps it */
	b->parent_hash = d->parent_hash;
	b->position = d->position;
	b->flags = (uint8_t)(d->flags &
			     ~(POL_BLOCK_WARM_LINEAGE | POL_BLOCK_TTL_DEMOTE |
			       POL_BLOCK_FEW_NEW | POL_BLOCK_ASIDE));
	b->bytes = d->bytes ? d->bytes : c->block_bytes;
	b->parent_id = POL_NONE;
	b->few_new = 0;
	b->next_use = d->next_use;
	b->last_access = c->now;
	b->tick = c->ticks;
	if (!b->access_count)
		b->turn = 1;
	c->st.inserts++;
	b->tenant = pol_tenant_row(&c->tenants, d->tenant);
	c->tenants.row[b->tenant].admitted++;
	/* not reported: the owner holds the bytes in tier already */
	enter_tier(c, b, tier);
	/*
	 * The owner admits b to hold it (kvmmd pins it next): it is set
	 * aside while the tier and its tenant make room, so the victim is
	 * another block; with none that may go, the tier (or the tenant)
	 * stays over until a block leaves, as pol_cache_return() leaves a
	 * block that may not go.
	 */
	if (set_aside(c, b)) {
		tenant_room(c, b->tenant, tier, b, false);
		(void)make_room(c, tier);
	}
	release_aside(c, mark);
	return 0;
}

#define RESIDENT_OR_ENOENT(c, hash, b)                   \
	struct pol_block *b = pol_cache_lookup(c, hash); \
	if (!b)                                          \
	return -ENOENT

int pol_cache_pin(struct pol_cache *c, uint64_t hash)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	b->pins++;
	notify_change(c, b);
	return 0;
}

int pol_cache_unpin(struct pol_cache *c, uint64_t hash)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	if (!b->pins)
		return -EINVAL;
	b->pins--;
	notify_change(c, b);
	return 0;
}

int pol_cache_ref(struct pol_cache *c, uint64_t hash)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	b->refcount++;
	notify_change(c, b);
	return 0;
}

int pol_cache_unref(struct pol_cache *c, uint64_t hash)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	if (!b->refcount)
		return -EINVAL;
	b->refcount--;
	notify_change(c, b);
	return 0;
}

int pol_cache_set_ttl(struct pol_cache *c, uint64_t hash, uint64_t until)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	b->ttl_expiry = until;
	notify_change(c, b);
	return 0;
}

int pol_cache_set_ttl_demotable(struct pol_cache *c, uint64_t hash,
				bool demotable)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	if (demotable)
		b->flags |= POL_BLOCK_TTL_DEMOTE;
	else
		b->flags &= (uint8_t)~POL_BLOCK_TTL_DEMOTE;
	notify_change(c, b);
	return 0;
}

int pol_cache_set_priority(struct pol_cache *c, uint64_t hash, int priority)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	if (priority < -128 || priority > 127)
		return -ERANGE;
	b->priority = (int8_t)priority;
	notify_change(c, b);
	return 0;
}

int pol_cache_set_cookie(struct pol_cache *c, uint64_t hash, uint64_t cookie)
{
	RESIDENT_OR_ENOENT(c, hash, b);
	b->cookie = cookie;
	return 0;
}

void pol_cache_set_next_use(struct pol_cache *c, struct pol_block *b,
			    uint64_t next_use)
{
	b->next_use = next_use;
	notify_change(c, b);
}
