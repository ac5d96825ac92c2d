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
 * blocks charged to it that nothing holds (no sequence, pin or TTL).
 * When they and those already on their way down are too few, nothing
 * moves: -EDQUOT (a prefix open asks for what there is, and its walk
 * stops where the quota does).  Otherwise the policy picks the victims
 * among them, as pool pressure has it pick among all (the GPU tier's
 * capacity is lowered and brought back, kc_reclaim_round()), with every
 * other GPU block pinned for that call: they move to the host tier, or
 * are dropped when it has no room or there is none, as any demotion.  A
 * dropped block's pages leave the quota at once, a demoted one's when
 * its copy is done: the command parks (cache_park.c) and runs again then.
 *
 * Cost: a walk over the cache's GPU copies (kd_cache.gpu) when a quota
 * check fails while the uid has cached pages; nothing otherwise.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>

static struct kc_entry *kc_gpu_of(struct kd_fifo_node *n)
{
	return n ? kd_fifo_entry(n, struct kc_entry, gpu) : NULL;
}

/* q's GPU copies that may go now (idle), and those on their way down whose
 * pages come back when their copy is done (leaving), in pages. */
static void kc_quota_scan(struct kd_cache *c, const struct kd_quota *q,
			  uint64_t *idle, uint64_t *leaving)
{
	uint64_t now = pol_cache_clock(c->pol);

	*idle = *leaving = 0;
	for (struct kc_entry *e = kc_gpu_of(kd_fifo_first(&c->gpu)); e;
	     e = kc_gpu_of(kd_fifo_next(&e->gpu))) {
		const struct pol_block *b;

		/* pages a sequence holds stay with it wherever the block
		 * goes (a held copy's too) */
		if (e->blk->charged != q || e->blk->refcnt > 1)
			continue;
		if (e->tier != POL_TIER_GPU) {
			*leaving += e->blk->nr_pages;
			continue;
		}
		if (!e->in_pol || e->dead)
			continue;
		/* not the prefix rule: a parent goes once its children did */
		b = pol_cache_lookup(c->pol, e->hash);
		if (b && !b->refcount && !b->pins && b->ttl_expiry <= now)
			*idle += e->blk->nr_pages;
	}
}

/* Have the policy move down `want` of q's GPU blocks, every other GPU
 * block pinned meanwhile; returns how many went. */
static uint64_t kc_quota_take(struct kd_cache *c, const struct kd_quota *q,
			      uint64_t want)
{
	uint64_t gpu = pol_cache_count(c->pol, POL_TIER_GPU);
	uint64_t cap = pol_cache_capacity(c->pol, POL_TIER_GPU), taken;
	struct kc_entry *e;

	for (e = kc_gpu_of(kd_fifo_first(&c->gpu)); e;
	     e = kc_gpu_of(kd_fifo_next(&e->gpu)))
		e->quota_pinned = e->tier == POL_TIER_GPU && e->in_pol &&
				  !e->dead && e->blk->charged != q &&
				  !pol_cache_pin(c->pol, e->hash);
	(void)pol_cache_set_capacity(c->pol, POL_TIER_GPU,
				     gpu > want ? gpu - want : 0);
	(void)pol_cache_set_capacity(c->pol, POL_TIER_GPU, cap);
	/* a pinned entry neither moved nor left the list (nor was freed:
	 * the dead wait for kc_reap_dead()) */
	for (e = kc_gpu_of(kd_fifo_first(&c->gpu)); e;
	     e = kc_gpu_of(kd_fifo_next(&e->gpu))) {
		if (!e->quota_pinned)
			continue;
		e->quota_pinned = false;
		(void)pol_cache_unpin(c->pol, e->hash);
	}
	taken = pol_cache_count(c->pol, POL_TIER_GPU);
	taken = gpu > taken ? gpu - taken : 0;
	kc_reap_dead(c);
	return taken;
}

int kc_quota_reclaim(struct kd_cache *c, struct kd_session *s, uint64_t pages,
		     bool partial)
{
	struct kd_quota *q = s->quota;
	bool final = c->rerun && c->rerun_final;
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
		taken = kc_quota_take(c, q,
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
		c->park_need = pages;
		return -EINPROGRESS;
	}
	return -EDQUOT;
}

int kd_cache_quota_reclaim(struct kd_session *s, uint64_t pages)
{
	struct kd_quota *q = s->quota;
	struct kd_cache *c = s->d->cache;

	if (!q || !q->limit_pages || q->used_pages + pages <= q->limit_pages)
		return 0;
	if (!c || !c->pol)
		return -EDQUOT;
	return kc_quota_reclaim(c, s, pages, false);
}
