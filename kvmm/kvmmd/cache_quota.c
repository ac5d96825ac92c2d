// SPDX-License-Identifier: MIT
/*
 * A uid at its quota gets its own idle cached blocks back before it is
 * told -EDQUOT, as a memory cgroup at its limit reclaims its own page
 * cache before a charge fails.
 *
 * A block the cache keeps on the GPU stays charged to the uid whose
 * session made its pages: the publisher, or for a restored block the
 * session whose open restored it (kc_restore_submit(): the reader pays
 * for what it brings onto the GPU, so a uid's quota bounds what it can
 * hold through opens too).  Those pages count in its used_pages, and in
 * its cached_pages while the cache keeps them (kc_set_block()).  Nothing
 * gave them back but another tenant's pool pressure: a uid that published
 * its quota's worth and closed its sequences, or that only read its
 * quota's worth of another tenant's blocks, got -EDQUOT for every new
 * block with the pool nearly empty.
 *
 * When s's quota has no room for `pages`, the candidates are the GPU
 * blocks charged to it that nothing holds (no sequence, pin or TTL) and,
 * under the prefix rule, whose GPU children can all go too
 * (kc_quota_mark_stuck()).  When they and those already on their way
 * down are too few, nothing moves: -EDQUOT (a prefix open asks for what there is, and its walk
 * stops where the quota does).  Otherwise the policy picks the victims
 * among them, as pool pressure has it pick among all (the GPU tier's
 * capacity is lowered and brought back, kc_gpu_shed()), with every
 * other GPU block pinned for that call: they move to the host tier, or
 * are dropped when it has no room or there is none.  Room below is free
 * room or s's uid's own blocks there, never another uid's: a victim
 * entering a full tier makes room by sending a block there down a tier
 * (or out of the last), a cost to whoever owns that block.  So in every
 * tier below that cannot take all the victims in its free room, the
 * blocks of other tenants (by the policy's tenant: who admitted them)
 * are pinned for the call too, as kc_prefix_room() pins the host blocks
 * of the prefix it makes room for: the policy moves the uid's own blocks
 * there down instead, or drops the victim itself, and its view of every
 * block stays true.  (A tenant limit makes a tenant reclaim its own
 * blocks below too, but one set for the call would replace an
 * operator's, move blocks when that is set back, and build its lists
 * from the whole index anyway.)  A dropped block's pages leave the quota
 * at once, a demoted one's when its copy is done: the command parks
 * (cache_park.c) and runs again then.
 *
 * Cost: a walk over the cache's GPU copies (kd_cache.gpu) when a quota
 * check fails while the uid has cached pages (two more under the prefix
 * rule, with a hash lookup per GPU block at most), and one over the
 * blocks of the tiers below that the victims would not fit in (the host
 * tier, and NVMe when that is full too; kd_cache.below) and over those it
 * pinned; nothing otherwise.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>

static struct kc_entry *kc_gpu_of(struct kd_fifo_node *n)
{
	return n ? kd_fifo_entry(n, struct kc_entry, gpu) : NULL;
}

/* A block of the policy's GPU tier. */
static bool kc_on_gpu(const struct kc_entry *e)
{
	return e && e->blk && e->tier == POL_TIER_GPU && e->in_pol && !e->dead;
}

/* Could the policy move GPU block e down for q's reclaim, the prefix rule
 * aside: q's, and nothing holds it (no sequence, pin or TTL; every other
 * uid's block is pinned for the call, kc_quota_take()). */
static bool kc_quota_idle(struct kd_cache *c, const struct kd_quota *q,
			  const struct kc_entry *e, uint64_t now)
{
	const struct pol_block *b;

	if (e->blk->charged != q || e->blk->refcnt > 1)
		return false;
	b = pol_cache_lookup(c->pol, e->hash);
	return b && !b->refcount && !b->pins && b->ttl_expiry <= now;
}

/*
 * Under the prefix rule a block leaves the GPU only once it has no child
 * there (pol_cache_is_leaf()): a GPU block that cannot go keeps its
 * parent, and that one its own, on the GPU.  Mark those ancestors
 * (quota_stuck) so that the count leaves them out: the count then agrees
 * with what the policy can move, rather than saying "enough" where it
 * could move only part (X dropped, and -EDQUOT all the same:
 * tests/daemon-quota-reclaim-prefix.c).  A walk up from each GPU block
 * that cannot go, stopping at a block marked already or not on the GPU (a
 * parent below is no obstacle: leafness looks at the tier and above):
 * each block is marked once, O(GPU blocks) lookups.  What the count
 * still does not see is a victim with no way down (a full tier below,
 * all pinned, and the block a parent of one there, so not droppable):
 * then fewer move, and the answer is -EDQUOT or a park for what did.
 */
static void kc_quota_mark_stuck(struct kd_cache *c, const struct kd_quota *q,
				uint64_t now)
{
	for (struct kc_entry *e = kc_gpu_of(kd_fifo_first(&c->gpu)); e;
	     e = kc_gpu_of(kd_fifo_next(&e->gpu))) {
		struct kc_entry *p = e;

		if (!kc_on_gpu(e) || kc_quota_idle(c, q, e, now))
			continue;
		while (p->parent) {
			p = kc_find(c, p->parent);
			if (!kc_on_gpu(p) || p->quota_stuck)
				break;
			p->quota_stuck = true;
		}
	}
}

/* q's GPU copies that may go now (idle), and those on their way down whose
 * pages come back when their copy is done (leaving), in pages. */
static void kc_quota_scan(struct kd_cache *c, const struct kd_quota *q,
			  uint64_t *idle, uint64_t *leaving)
{
	uint64_t now = pol_cache_clock(c->pol);
	bool prefix_rule = pol_cache_prefix_rule(c->pol);
	struct kc_entry *e;

	*idle = *leaving = 0;
	if (prefix_rule)
		kc_quota_mark_stuck(c, q, now);
	for (e = kc_gpu_of(kd_fifo_first(&c->gpu)); e;
	     e = kc_gpu_of(kd_fifo_next(&e->gpu))) {
		/* pages a sequence holds stay with it wherever the block
		 * goes (a held copy's too) */
		if (e->blk->charged != q || e->blk->refcnt > 1)
			continue;
		if (e->tier != POL_TIER_GPU) {
			*leaving += e->blk->nr_pages;
			continue;
		}
		if (kc_on_gpu(e) && !e->quota_stuck &&
		    kc_quota_idle(c, q, e, now))
			*idle += e->blk->nr_pages;
	}
	if (prefix_rule)
		for (e = kc_gpu_of(kd_fifo_first(&c->gpu)); e;
		     e = kc_gpu_of(kd_fifo_next(&e->gpu)))
			e->quota_stuck = false;
}

/*
 * The tiers below the GPU that the victims could push another uid's
 * blocks out of, as a mask of (1 << tier): from the host tier down, each
 * one with less free room than `want` blocks (at most that many come
 * into it, or pass through it to the next); the first with the room
 * takes them all, and nothing goes on below it.
 */
static unsigned kc_quota_full_tiers(struct kd_cache *c, uint64_t want)
{
	unsigned mask = 0;

	for (unsigned t = pol_cache_lower_tier(c->pol, POL_TIER_GPU);
	     t != POL_TIER_NONE; t = pol_cache_lower_tier(c->pol, t)) {
		if (pol_cache_count(c->pol, t) + want <=
		    pol_cache_capacity(c->pol, t))
			break;
		mask |= 1u << t;
	}
	return mask;
}

/*
 * The policy's tenant row of s's own blocks below the GPU, those it may
 * push down or out: the row of its uid when the cache's tenants are uids
 * and it has a row of its own (UINT32_MAX: none, every block is another's).
 */
static uint32_t kc_quota_own_row(struct kd_cache *c, const struct kd_session *s)
{
	size_t n = pol_cache_tenants(c->pol, NULL, 0);
	uint32_t id = kd_tenant_charge(s->d, s), row = UINT32_MAX;
	struct pol_tenant_count *rows;

	if (id != s->uid || id == POL_TENANT_OTHERS || !n)
		return UINT32_MAX;
	rows = calloc(n, sizeof(*rows));
	if (!rows)
		return UINT32_MAX; /* all pinned: only free room is taken */
	n = pol_cache_tenants(c->pol, rows, n);
	for (size_t i = 0; i < n; i++)
		if (rows[i].id == id)
			row = (uint32_t)i;
	free(rows);
	return row;
}

/*
 * Pin the blocks of the tiers in mask that are not of row own, for the
 * policy call; kc_quota_unpin_lower() unpins them after it.  Only those
 * tiers' entries are looked at (kd_cache.below: an entry's tier is the
 * policy's, kc_set_tier() at every move), and the unpin only the pinned
 * ones (kd_cache.quota_pinned): this walked the whole index twice, every
 * NVMe block and hash bucket when only the host tier was full.
 */
static void kc_quota_pin_lower(struct kd_cache *c, unsigned mask, uint32_t own)
{
	for (unsigned t = POL_TIER_GPU + 1; t < POL_TIER_COUNT; t++) {
		if (!(mask & (1u << t)))
			continue;
		for (struct kd_fifo_node *n = kd_fifo_first(&c->below[t]); n;
		     n = kd_fifo_next(n)) {
			struct kc_entry *e =
				kd_fifo_entry(n, struct kc_entry, below);
			const struct pol_block *b;

			/* cppcheck-suppress nullPointer ; n is not NULL
			 * here, nor then e (kd_fifo_entry()) */
			if (!e->in_pol || e->dead || e->quota_pinned ||
			    e->quota_lower_pinned)
				continue;
			b = pol_cache_lookup(c->pol, e->hash);
			if (!b || b->tier >= POL_TIER_COUNT ||
			    !(mask & (1u << b->tier)) || b->tenant == own)
				continue;
			e->quota_lower_pinned = !pol_cache_pin(c->pol, e->hash);
			if (!e->quota_lower_pinned)
				continue;
			e->quota_next = c->quota_pinned;
			c->quota_pinned = e;
		}
	}
}

static void kc_quota_unpin_lower(struct kd_cache *c)
{
	while (c->quota_pinned) {
		struct kc_entry *e = c->quota_pinned;

		c->quota_pinned = e->quota_next;
		e->quota_next = NULL;
		e->quota_lower_pinned = false;
		(void)pol_cache_unpin(c->pol, e->hash);
	}
}

/* Have the policy move down `want` of q's GPU blocks, every other GPU
 * block pinned meanwhile, and below it every other uid's block in a tier
 * the victims could push it out of; returns how many went. */
static uint64_t kc_quota_take(struct kd_cache *c, const struct kd_session *s,
			      uint64_t want)
{
	const struct kd_quota *q = s->quota;
	unsigned lower = kc_quota_full_tiers(c, want);
	struct kc_entry *e;
	uint64_t taken;

	for (e = kc_gpu_of(kd_fifo_first(&c->gpu)); e;
	     e = kc_gpu_of(kd_fifo_next(&e->gpu)))
		e->quota_pinned = e->tier == POL_TIER_GPU && e->in_pol &&
				  !e->dead && e->blk->charged != q &&
				  !pol_cache_pin(c->pol, e->hash);
	if (lower)
		kc_quota_pin_lower(c, lower, kc_quota_own_row(c, s));
	taken = kc_gpu_shed(c, want);
	/* a pinned entry neither moved nor left the list or the index (nor
	 * was freed: the dead wait for kc_reap_dead()).  A host entry whose
	 * copy down runs is on this list too, pinned by kc_quota_pin_lower()
	 * alone: this walk leaves it to that chain's unpin (its quota_pinned
	 * is false).  With one flag for both it was unpinned twice, and a
	 * client's BLOCK_PIN on it went with the second */
	for (e = kc_gpu_of(kd_fifo_first(&c->gpu)); e;
	     e = kc_gpu_of(kd_fifo_next(&e->gpu))) {
		if (!e->quota_pinned)
			continue;
		e->quota_pinned = false;
		(void)pol_cache_unpin(c->pol, e->hash);
	}
	kc_quota_unpin_lower(c);
	kc_reap_dead(c);
	return taken;
}

int kc_quota_reclaim(struct kd_cache *c, struct kd_session *s, uint64_t pages,
		     bool partial)
{
	struct kd_quota *q = s->quota;
	bool final = kc_line(c)->rerun && kc_line(c)->rerun_final;
	uint64_t over, idle, leaving, taken;

	if (!q || !q->limit_pages || q->used_pages + pages <= q->limit_pages)
		return 0;
	if (!c->pol || !c->ppb || !q->cached_pages)
		return -EDQUOT;
	over = q->used_pages + pages - q->limit_pages;
	pol_cache_set_clock(c->pol, kd_now_ns()); /* TTL pins end on time */
	kc_quota_scan(c, q, &idle, &leaving);
	/* not enough however long it waited: nothing moves (a prefix open
	 * takes what there is: its walk stops where the quota does) */
	if (partial && idle + leaving < over)
		over = idle + leaving;
	if (!over || idle + leaving < over)
		return -EDQUOT;
	if (leaving < over) {
		taken = kc_quota_take(c, s,
				      (over - leaving + c->ppb - 1) / c->ppb);
		c->st.quota_reclaims += taken;
		if (q->used_pages + pages <= q->limit_pages)
			return 0; /* dropped: their pages went at once */
		kc_quota_scan(c, q, &idle, &leaving);
	}
	/* as much as there was, all dropped (a prefix open) */
	if (partial && !leaving)
		return -EDQUOT;
	/* their pages come back when the copies are done: run again then
	 * (not once its time is up) */
	if (leaving && !final) {
		kc_line(c)->park_need = pages;
		return -EINPROGRESS;
	}
	return -EDQUOT;
}

int kd_cache_quota_reclaim(struct kd_session *s, uint64_t pages)
{
	struct kd_quota *q = s->quota;
	struct kd_cache *c;
	int err = -EDQUOT;
	uint32_t i;

	if (!q || !q->limit_pages || q->used_pages + pages <= q->limit_pages)
		return 0;
	/* each size's idle blocks of the uid in turn, until one frees
	 * enough (or its copies down will: -EINPROGRESS) */
	kc_for_each(s->d, c, i) {
		if (!c->pol)
			continue;
		err = kc_quota_reclaim(c, s, pages, false);
		if (err != -EDQUOT)
			break;
	}
	return err;
}
