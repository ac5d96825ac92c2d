// SPDX-License-Identifier: MIT
/*
 * Pool-pressure reclaim: an extend or a prefix open that needs more pool
 * pages than are free has the policy move cached GPU blocks down (or
 * out) until enough are free, or parks the command while demotion
 * copies are in flight and will give pages back (cache_park.c), or
 * fails it -ENOSPC.  The victims are the policy's (kc_tier_shed()); the
 * copies they start are cache_demote.c's.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>

uint64_t kc_pool_free(struct kd_daemon *d)
{
	struct vmm_pool_stats ps;

	vmm_pool_get_stats(d->pool, &ps);
	return ps.capacity > ps.allocated ? ps.capacity - ps.allocated : 0;
}

uint64_t kc_tier_shed(struct kd_cache *c, unsigned tier, uint64_t want)
{
	uint64_t had = pol_cache_count(c->pol, tier);
	uint64_t cap = pol_cache_capacity(c->pol, tier), left;

	/* the victims move down through kc_move(); then the capacity
	 * comes back */
	(void)pol_cache_set_capacity(c->pol, tier, had > want ? had - want : 0);
	(void)pol_cache_set_capacity(c->pol, tier, cap);
	left = pol_cache_count(c->pol, tier);
	return had > left ? had - left : 0;
}

uint64_t kc_gpu_shed(struct kd_cache *c, uint64_t want)
{
	return kc_tier_shed(c, POL_TIER_GPU, want);
}

/* One round of kd_cache_reclaim(): demote enough victims for `pages`
 * beyond the free pages not earmarked (`reserved`) for parked commands
 * (the policy's LRU ones); returns how many blocks it took.  Their pages
 * come back when their copies are done (dropped ones at once). */
static uint64_t kc_reclaim_round(struct kd_cache *c, uint64_t pages,
				 uint64_t reserved)
{
	struct kd_daemon *d = c->d;
	uint64_t free = kc_pool_free(d), avail, taken;

	avail = free > reserved ? free - reserved : 0;
	if (!pol_cache_count(c->pol, POL_TIER_GPU) || avail >= pages)
		return 0;
	taken = kc_gpu_shed(c, (pages - avail + c->ppb - 1) / c->ppb);
	c->st.pressure_reclaims += taken;
	kc_reap_dead(c);
	return taken;
}

/* Copies in flight (or waiting for a slot), of any size's cache, that
 * may give pages back. */
static bool kc_copies_pending(struct kd_cache *c)
{
	struct kd_cache *o;
	uint32_t i;

	kc_for_each(c->d, o, i)
		if (o->mig &&
		    (o->st.migrations_in_flight || o->demotions_queued))
			return true;
	return false;
}

/* The command parks for `pages` (kd_cache_park() records them). */
static int kc_reclaim_park(struct kd_cache *c, uint64_t pages)
{
	kc_line(c)->park_need = pages;
	return -EINPROGRESS;
}

/* Some size's cache is open: it has victims to give. */
static bool kc_any_open(struct kd_daemon *d)
{
	struct kd_cache *c;
	uint32_t i;

	kc_for_each(d, c, i)
		if (c->pol && c->ppb)
			return true;
	return false;
}

int kc_reclaim_check(struct kd_daemon *d, uint64_t pages)
{
	struct kd_cache *c = d->cache;
	uint64_t reserved = c ? kc_reserved(c) : 0;

	/* without parked commands (reserved 0) the test it always was */
	if (kc_pool_free(d) >= pages + reserved)
		return 0;
	if (!c || !kc_any_open(d))
		return -ENOSPC;
	if (c->rerun) {
		/* a parked command run again: its time is up, or the copies
		 * it waits for are not all done (no new victims meanwhile,
		 * as the blocking wait took none), or commands parked before
		 * it still wait for the free pages */
		if (c->rerun_final)
			return -ENOSPC;
		if (reserved || kc_copies_pending(c))
			return kc_reclaim_park(c, pages);
	}
	return 1;
}

int kc_reclaim_take(struct kd_cache *c, uint64_t pages)
{
	struct kd_daemon *d = c->d;
	uint64_t reserved = kc_reserved(c);
	struct kd_cache *o;
	uint32_t i;

	kc_for_each(d, o, i)
		if (o->pol) /* TTL pins end on time */
			pol_cache_set_clock(o->pol, kd_now_ns());
	/* A victim whose pages a client still maps (its revocation is not
	 * acknowledged yet) frees nothing now: they stay REVOKING.  Then
	 * take more victims, while the policy has any, rather than fail
	 * with evictable blocks left (every round takes at least one).
	 * The pool is every size's: c's victims (the caller's own size, or
	 * the first's), and only when it has none another size's. */
	for (;;) {
		uint64_t taken = c->pol ? kc_reclaim_round(c, pages, reserved) :
					  0;

		kc_for_each(d, o, i)
			if (!taken && o != c && o->pol)
				taken = kc_reclaim_round(o, pages, reserved);
		if (kc_pool_free(d) >= pages + reserved)
			return 0;
		/* commands parked before this one are served first: it
		 * waits in line behind them (they end within their time) */
		if (reserved || kc_copies_pending(c))
			return kc_reclaim_park(c, pages); /* the caller parks */
		if (!taken)
			return -ENOSPC;
	}
}

int kd_cache_reclaim(struct kd_daemon *d, uint64_t pages)
{
	int r = kc_reclaim_check(d, pages);

	return r == 1 ? kc_reclaim_take(d->cache, pages) : r;
}
