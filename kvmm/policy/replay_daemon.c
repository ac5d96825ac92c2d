/* SPDX-License-Identifier: MIT */
/*
 * kvmmd's side of a replayed request (pol_replay_opts.daemon_model,
 * kvmm-replay --model-daemon): the policy calls kvmmd's cache makes for
 * a prefix open, the restores, the publish and the close, in its order,
 * and its restore plan for a segmented open.  Apart from replay.c, which
 * drives the trace through it, because it follows kvmmd's cache code
 * (cache_prefix.c, cache_restore.c, cache_publish.c, cache.c) and changes
 * with it.
 */
#include <string.h>

#include "kvmm/policy/replay_priv.h"
#include "kvmm/policy/restore_plan.h"

/* One block as kvmmd's cache_publish.c touches it: access, then a
 * reference from the sequence if the block stayed resident. */
static void daemon_touch(struct pol_cache *c, const uint64_t *h, uint32_t i,
			 unsigned few, uint32_t tenant, uint64_t *refd,
			 uint32_t *nref, uint64_t *down, uint32_t *ndown)
{
	struct pol_block_desc d = { .hash = h[i],
				    .parent_hash = i ? h[i - 1] : 0,
				    .position = i,
				    .flags = (i ? POL_BLOCK_HAS_PARENT : 0) |
					     few,
				    .tenant = tenant };

	if (pol_cache_access(c, &d, NULL))
		return;
	/* the policy moved the block it just admitted out of the GPU tier:
	 * kvmmd copies the pages the sequence holds down (kc_move(),
	 * held_copy), the block stays cached below, unreferenced, and the
	 * sequence's publish of it is a duplicate; in the last tier it was
	 * dropped (in no tier) */
	if (pol_cache_tier_of(c, h[i]) != POL_TIER_GPU) {
		if (pol_cache_tier_of(c, h[i]) != POL_TIER_NONE)
			down[(*ndown)++] = h[i];
		return;
	}
	if (pol_cache_ref(c, h[i]) == 0)
		refd[(*nref)++] = h[i];
}

/* The block went down from the pages this request holds (daemon_touch). */
static bool daemon_went_down(const uint64_t *down, uint32_t ndown,
			     uint64_t hash)
{
	for (uint32_t j = 0; j < ndown; j++)
		if (down[j] == hash)
			return true;
	return false;
}

/*
 * kvmmd's plan for an open with KVMM_PREFIX_OPEN_ACTIONS |
 * KVMM_PREFIX_OPEN_SEGMENTS in restore mode "plan" (kd_cache_plan() over
 * kc_prefix_tiers()): the blocks up to the last one in some tier, where[]
 * their tiers; a lower-tier block the plan (with allow_segments, cost
 * model m) recomputes becomes DM_RECOMPUTE and in no tier in where[] (the
 * client recomputes it: a miss).  The opens are not early
 * (KVMM_PREFIX_OPEN_EARLY): the reply waits for every reload, so kvmmd
 * plans them serially (no_overlap), and on the reference profile, where
 * a reload beats recomputing its block, recomputes none.  A plan that
 * cannot be built reloads everything, as kvmmd's.
 */
void replay_daemon_plan(const struct pol_cost_model *m, uint8_t *where,
			uint32_t n, uint8_t *act)
{
	struct pol_restore_opts o = { .size = sizeof(o),
				      .allow_segments = true,
				      .no_overlap = true };
	struct pol_restore_plan p;
	uint32_t lim = 0;
	bool lower = false;

	for (uint32_t i = 0; i < n; i++)
		if (where[i] != POL_TIER_NONE) {
			lim = i + 1;
			lower |= where[i] != POL_TIER_GPU;
		}
	for (uint32_t i = 0; i < n; i++)
		act[i] = i >= lim		   ? DM_NEW :
			 where[i] == POL_TIER_NONE ? DM_HOLE :
			 where[i] == POL_TIER_GPU  ? DM_USE :
						     DM_RELOAD;
	if (!lower)
		return; /* shares and holes: nothing to decide */
	memset(&p, 0, sizeof(p));
	if (pol_restore_plan_build(m, where, lim, &o, &p))
		return;
	for (uint32_t i = 0; i < lim && i < p.nblocks; i++)
		if (act[i] == DM_RELOAD &&
		    p.action[i] == POL_RESTORE_RECOMPUTE) {
			act[i] = DM_RECOMPUTE;
			where[i] = POL_TIER_NONE;
		}
	pol_restore_plan_free(&p);
}

/*
 * A request as kvmmd sees it (pol_replay_opts.daemon_model): act[0..n)
 * says what its open did with each block (the hits a leading run without
 * msa); refd has room for 2 * n hashes.  The order of the policy calls
 * is kvmmd's (cache_prefix.c, cache_restore.c, cache_publish.c,
 * cache.c):
 *
 *   PREFIX_OPEN (kc_prefix_walk)  pin every cached block of the matched
 *                                 prefix (past holes); share the GPU
 *                                 blocks in prefix order; submit the
 *                                 restores; unpin (the restored blocks
 *                                 stay pinned while their copies run);
 *                                 reap
 *   restores settle               in submission (prefix) order, each
 *                                 unpinned, touched, reaped
 *   BLOCK_PUBLISH                 from the first block recomputed (hole,
 *                                 planned recompute) or new on: a block
 *                                 on the GPU is a duplicate, one in no
 *                                 tier admitted (a shared or restored
 *                                 block too, when its own touch lost
 *                                 it), one below promoted when the GPU
 *                                 can take it
 *   SEQ_CLOSE                     the sequence's references go
 */
void replay_daemon_request(struct pol_cache *c, const uint64_t *h, uint32_t n,
			   const uint8_t *act, uint64_t clock, uint32_t tenant,
			   uint64_t *refd)
{
	uint64_t *down = refd + n;
	uint32_t nref = 0, ndown = 0, p0 = n;
	/* kvmmd asks at PREFIX_OPEN, before it touches anything, and keeps
	 * the answer with the sequence for its publishes */
	unsigned few = pol_cache_few_new(c, h, n) ? POL_BLOCK_FEW_NEW : 0;

	pol_cache_set_clock(c, clock); /* PREFIX_OPEN: pins the prefix */
	for (uint32_t i = 0; i < n; i++)
		if (act[i] == DM_USE || act[i] == DM_RELOAD ||
		    act[i] == DM_RECOMPUTE)
			pol_cache_ref(c, h[i]);
	/* kvmmd shares the GPU blocks at once and releases its pins on the
	 * prefix; the blocks it restores from a lower tier stay pinned while
	 * their copies run and are touched when the restores are settled,
	 * after the pin is released (kc_restore_settle), in prefix order
	 * (the order it submitted them, kc_restored_next), each followed by
	 * a reap; a block the plan recomputes is left where it is */
	for (uint32_t i = 0; i < n; i++)
		if (act[i] == DM_USE)
			daemon_touch(c, h, i, few, tenant, refd, &nref, down,
				     &ndown);
	for (uint32_t i = 0; i < n; i++)
		if (act[i] == DM_USE || act[i] == DM_RECOMPUTE)
			pol_cache_unref(c, h[i]);
	for (uint32_t i = 0; i < n; i++)
		if (act[i] == DM_RELOAD) {
			pol_cache_unref(c, h[i]);
			daemon_touch(c, h, i, few, tenant, refd, &nref, down,
				     &ndown);
		}
	/* one publish, from the first block the client fills on (as
	 * tinylm does, and kvmm-replay --daemon) */
	for (uint32_t i = 0; i < n && p0 == n; i++)
		if (act[i] != DM_USE && act[i] != DM_RELOAD)
			p0 = i;
	pol_cache_set_clock(c, clock + 1); /* BLOCK_PUBLISH */
	for (uint32_t i = p0; i < n; i++) {
		unsigned t = pol_cache_tier_of(c, h[i]);

		/* a block it shared or restored is still on the GPU, held,
		 * and a duplicate; or the policy gave it up in the call
		 * that took it (daemon_touch() above) and the cache let go
		 * of the pages (kc_put_block()): the publish caches them
		 * again, like any block in no tier */
		if (daemon_went_down(down, ndown, h[i])) {
			/* copied down from these very pages (held_copy):
			 * the sequence's block keeps the hash, a
			 * duplicate */
			continue;
		} else if (t == POL_TIER_NONE) {
			daemon_touch(c, h, i, few, tenant, refd, &nref, down,
				     &ndown);
		} else if (t != POL_TIER_GPU &&
			   pol_cache_can_promote(c, POL_TIER_GPU, h[i]) &&
			   !pol_cache_pin(c, h[i])) {
			/* cached below past the first miss (or handed out
			 * to recompute): the published pages become its
			 * GPU copy (kc_publish_promote(), pinned while it
			 * moves up), when the GPU tier has a victim other
			 * than the block's parent, kvmmd's own test; kvmmd
			 * too while its copy down or its host -> NVMe write
			 * runs (kc_call_off_copy()) */
			daemon_touch(c, h, i, few, tenant, refd, &nref, down,
				     &ndown);
			(void)pol_cache_unpin(c, h[i]);
		}
	}
	for (uint32_t i = 0; i < nref; i++) /* SEQ_CLOSE */
		pol_cache_unref(c, refd[i]);
}
