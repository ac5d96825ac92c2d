// SPDX-License-Identifier: MIT
/*
 * PREFIX_OPEN: walk the asked prefix once (share GPU blocks, plan
 * recomputes, start restores), keep the open pending while restores run,
 * and reply from the loop when no block before the first failed one
 * waits (kc_settle(), cache_pending.c).  With KVMM_PREFIX_OPEN_SEGMENTS
 * the walk goes on past blocks in no tier (holes): each comes back as a RECOMPUTE block on
 * fresh pages, like a block the plan recomputes, and the reply ends at
 * the last block found.  With KVMM_PREFIX_OPEN_EARLY the sequence takes
 * each restore's fresh pages as soon as it is submitted and the reply goes
 * once every block has pages; the record stays for SEQ_WAIT_READY
 * (cache_ready.c) until the reloads are done.  With
 * KVMM_PREFIX_OPEN_COLLECT an open that waits answers at once that it
 * does, the session's socket stays read, and the reply goes to the
 * PREFIX_COLLECT that comes after the ring's notify word moved
 * (cache_ready.c).
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/policy/restore_plan.h"
#include "kvmm/kvmmd/cache_plan.h"

/* A hash the walk finds in no tier (a hole, with _SEGMENTS) */
static bool kc_gone(const struct kc_entry *e)
{
	return !e || e->dead || e->drop_after;
}

/*
 * The tiers of the blocks an open plans for, into tiers[]: the leading
 * blocks in some tier or, with segments, every block up to the last one
 * in some tier (POL_TIER_NONE for the holes).  Returns how many.
 */
static uint32_t kc_prefix_tiers(struct kd_cache *c, const uint64_t *hashes,
				uint32_t n, bool segments, uint8_t *tiers)
{
	uint32_t lim = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct kc_entry *e = kc_find(c, hashes[i]);

		if (kc_gone(e)) {
			if (!segments)
				break;
			tiers[i] = POL_TIER_NONE;
			continue;
		}
		tiers[i] = e->tier; /* where a demotion goes to */
		lim = i + 1;
	}
	return lim;
}

/*
 * Does the walk (kc_prefix_walk()) take fresh pool pages for e, planned
 * `act`?  A block to recompute always does (e may be in any state, even
 * missing: a hole); a lower-tier block it restores does, unless it is being
 * restored already (the open waits for that restore and shares it) or
 * being demoted (restored once the move ended, by kc_busy_retry(), which
 * takes its pages then, in line: kc_pages_in_line()).
 */
static bool kc_walk_takes_pages(const struct kc_entry *e, uint8_t act)
{
	if (act == POL_RESTORE_RECOMPUTE)
		return true;
	return !e->rblk && !e->job && e->tier != POL_TIER_GPU;
}

/* Pin blocks [0, lim) of a prefix that can be, for a reclaim. */
static void kc_prefix_pin(struct kd_cache *c, const uint64_t *hashes,
			  uint32_t lim, bool *pinned)
{
	for (uint32_t i = 0; i < lim; i++) {
		struct kc_entry *e = kc_find(c, hashes[i]);

		/* host blocks too: the cascade from the demotions must not
		 * push them on (or drop them); not the holes */
		pinned[i] = !kc_gone(e) && !e->rblk && e->in_pol &&
			    pol_cache_pin(c->pol, hashes[i]) == 0;
	}
}

/* ... and unpin them after it. */
static void kc_prefix_unpin(struct kd_cache *c, const uint64_t *hashes,
			    uint32_t lim, bool *pinned)
{
	for (uint32_t i = 0; i < lim; i++)
		if (pinned[i])
			(void)pol_cache_unpin(c->pol, hashes[i]);
	/* all false again: kc_prefix_walk() sets only what it pins */
	memset(pinned, 0, lim * sizeof(*pinned));
}

/*
 * Before a prefix open takes pool pages (restores, blocks to recompute):
 * make room in a full pool for them, with the prefix's own blocks pinned
 * so the reclaim does not demote (or push on, or drop) what the prefix is
 * about to use.  The pages counted are those the walk takes, block by
 * block, with the walk's own plan (`mode`; tiers and plan are the
 * caller's buffers of n + 1, as is pinned, all false on entry and on
 * return), past a block being demoted too: they are free beyond the
 * earmarks of the commands parked before, or the open parks behind
 * them.  Entries the reclaim's cascade moves or drops are
 * found (or not) again by the hit loop, which plans again, and takes
 * pages only in line as well.  kd_cache_reclaim()'s answer: -EINPROGRESS
 * parks the open until the victims' copies are done; otherwise the walk
 * goes on (a restore without pages is a miss).  The prefix is pinned only
 * when victims are taken: not when the pages are free, nor on each run of
 * a parked open that still waits (kc_reclaim_check()).  The holes (with
 * segments) count only as far as the session's quota has room for them:
 * the walk stops at -EDQUOT there anyway, and made-up hashes before one
 * cached block must not push other users' blocks out of the GPU.
 * (Restores count in full, as before segments.)  Short of quota for the
 * restores and holes, the uid's own idle cached blocks make room first,
 * the prefix pinned as for the pool (kc_quota_reclaim(): -EINPROGRESS
 * parks the open too).  Short still, of the quota or of the pool, the
 * open asks the other processes of the uid for their blocks mapped
 * ahead, as an extend does (ABI 1.20, cache_lend.c: -EINPROGRESS parks
 * it for --lend-wait at most, and run again it asks nobody new and goes
 * on with what room there is once that wait is over or nobody is left
 * to wait for: the walk stops at the quota, or restores become misses).
 */
static int kc_prefix_room(struct kd_cache *c, struct kd_session *s,
			  const uint64_t *hashes, uint32_t n, uint32_t mode,
			  bool segments, bool early, uint8_t *tiers,
			  uint8_t *plan, bool *pinned)
{
	uint64_t need = 0, holes = 0;
	uint32_t lim;
	int err;

	lim = kc_prefix_tiers(c, hashes, n, segments, tiers);
	kd_cache_plan(mode, c->d->cost, tiers, lim, segments, early, plan);
	for (uint32_t i = 0; i < lim; i++)
		if (tiers[i] >= POL_TIER_COUNT) /* a hole */
			holes += c->ppb;
		else if (kc_walk_takes_pages(kc_find(c, hashes[i]), plan[i]))
			need += c->ppb;
	if (need + holes && s->quota && s->quota->limit_pages &&
	    s->quota->used_pages + need + holes > s->quota->limit_pages) {
		kc_prefix_pin(c, hashes, lim, pinned);
		err = kc_quota_reclaim(c, s, need + holes, true);
		kc_prefix_unpin(c, hashes, lim, pinned);
		if (err == -EDQUOT)
			err = kd_cache_lend_ask(s, need + holes, err);
		if (err == -EINPROGRESS)
			return err;
	}
	if (holes && s->quota && s->quota->limit_pages) {
		uint64_t used = s->quota->used_pages + need;
		uint64_t left = used < s->quota->limit_pages ?
					s->quota->limit_pages - used :
					0;

		if (holes > left)
			holes = left - left % c->ppb;
	}
	need += holes;
	if (!need)
		return 0;
	err = kc_reclaim_check(c->d, need);
	if (err == 1) {
		kc_prefix_pin(c, hashes, lim, pinned);
		err = kc_reclaim_take(c, need);
		kc_prefix_unpin(c, hashes, lim, pinned);
	}
	if (err == -ENOSPC)
		err = kd_cache_lend_ask(s, need, err);
	return err;
}

/* Block i of an open is a cached GPU block: shared as it is. */
static void kc_prefix_share(struct kd_cache *c, struct kc_pending *pr,
			    struct kd_region *r, uint32_t i, struct kc_entry *e)
{
	struct pol_block_desc desc = { .hash = e->hash,
				       .parent_hash = e->parent,
				       .position = i,
				       .tenant = pr->tenant };
	bool was_in_pol = e->in_pol;

	/* the sequence takes the block first, so the policy cannot pick it
	 * as its own victim */
	kc_prefix_attach(r, &r->seqs[pr->seq], i, e->blk);
	e->uses++;
	pr->state[i] = KC_SLOT_READY;
	pr->from[i] = POL_TIER_GPU;
	pr->acts[i] = KVMM_BLOCK_GPU_SHARED;
	if (e->parent)
		desc.flags = POL_BLOCK_HAS_PARENT;
	if (r->seqs[pr->seq].few_new)
		desc.flags |= POL_BLOCK_FEW_NEW;
	/* an admission (a block the sequence's owner kept) may be sent
	 * straight down, by the policy or its tenant's limit: cached below,
	 * copied from these pages (kc_move()), not referenced, as a
	 * publish's */
	if (pol_cache_access(c->pol, &desc, NULL) == 0 && !e->dead &&
	    (e->tier != POL_TIER_GPU || pol_cache_ref(c->pol, e->hash) == 0)) {
		e->in_pol = true;
	} else if (!was_in_pol && !e->dead) {
		/* no room to cache it: the sequence owns it */
		e->in_pol = false;
		kc_put_block(c, e);
		kc_free(c, e);
	}
}

/*
 * An early open's block i waits for e's restore: its sequence takes the
 * restore's pages now (the reply hands them out before they are filled),
 * unless another early sequence holds them already: when a reload fails
 * its pages are left to one client to recompute, never to two, so this
 * one waits for the restore to end, as without the flag.
 */
static void kc_early_attach(struct kc_pending *pr, struct kd_region *r,
			    uint32_t i, struct kc_entry *e)
{
	if (!pr->early || !r || !e->rblk || e->rblk_lent)
		return;
	kc_prefix_attach(r, &r->seqs[pr->seq], i, e->rblk);
	e->rblk_lent = true;
	pr->att[i] = 1;
	pr->from[i] = e->tier; /* where the restore comes from */
	pr->acts[i] = e->tier == POL_TIER_HOST ? KVMM_BLOCK_RELOADED_HOST :
						 KVMM_BLOCK_RELOADED_NVME;
}

/* Block i of an early open no longer holds the pages of the restore it
 * waits for (the sequence let them go): another early open may take
 * them. */
void kc_early_unlend(struct kd_cache *c, struct kc_pending *pr, uint32_t i)
{
	struct kc_entry *e;

	if (!pr->att[i])
		return;
	pr->att[i] = 0;
	if (pr->state[i] != KC_SLOT_WAIT)
		return;
	e = kc_find(c, pr->hashes[i]);
	if (e && e->rblk)
		e->rblk_lent = false;
}

/*
 * Blocks [from, to) of pr no longer want their reloads (the open went
 * away, or its sequence let them go): the pages lent to them may go to
 * another early open, and a restore that no other open waits for is
 * called off if it has not started (else it ends in the cache,
 * kc_restore_settle()).  pr must no longer count them (out of the pending
 * list, or its lim lowered) or kc_restore_wanted() would find it.
 */
void kc_pending_call_off(struct kd_cache *c, struct kc_pending *pr,
			 uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i < to; i++) {
		struct kc_entry *e;

		if (pr->state[i] != KC_SLOT_WAIT)
			continue;
		kc_early_unlend(c, pr, i);
		e = kc_find(c, pr->hashes[i]);
		if (e && e->rblk && !kc_restore_wanted(c, e->hash))
			kc_restore_cancel(c, e);
	}
}

/*
 * The restore of a block an open found being demoted takes fresh pages
 * charged to the open's session, as the walk's restores do.  Short of
 * quota for them, the uid's own idle cached blocks make room first, as
 * they would have for a restore the walk started (kc_prefix_room()):
 * without it a busy block was a miss where a block already below would
 * have been restored.  e is pinned for the call (the victims' cascade
 * must not push it on); the prefix's other blocks are the sequence's or
 * pinned by their restores.  0: room (or no quota); -EINPROGRESS: the
 * victims' copies run, their pages come back when done (the block stays
 * BUSY, tried again from the settle then); -EDQUOT.
 */
static int kc_busy_quota(struct kd_cache *c, struct kd_session *s,
			 struct kc_entry *e)
{
	struct kd_quota *q = s->quota;
	/* a park's count: this is no park (kd_cache_park() reads it) */
	uint64_t park_need = kc_line(c)->park_need;
	bool pinned;
	int err;

	if (!q || !q->limit_pages || q->used_pages + c->ppb <= q->limit_pages)
		return 0;
	pinned = e->in_pol && !pol_cache_pin(c->pol, e->hash);
	err = kc_quota_reclaim(c, s, c->ppb, false);
	if (pinned)
		(void)pol_cache_unpin(c->pol, e->hash);
	kc_line(c)->park_need = park_need;
	return err;
}

/*
 * Blocks pending opens found being demoted: once the move ended, share
 * the block (a failed copy left it on the GPU), restore it from where it
 * landed, join a restore another open started meanwhile, or give up when
 * it was dropped.
 *
 * The restore's fresh pages are taken in line, like every other
 * command's: not while the free pages are earmarked for commands parked
 * before (kc_reserved()).  It cannot park as they do: its open is half
 * done (sequence open, blocks attached, restores in flight, reply
 * deferred) and cannot run again from the start.  So the block stays
 * BUSY, counted in busy_in_line, and is tried again whenever a command
 * leaves the line (kc_park_line_moved() arms the settle).  This cannot
 * deadlock: the line never waits for it (its earmarks do not count it),
 * and every parked command leaves within KD_PARK_MAX_MS.  Once nothing
 * earmarked stands before it, it is restored or, in a pool still short,
 * a busy miss, as it always was (it takes no victims).
 */
void kc_busy_retry(struct kd_cache *c)
{
	c->busy_in_line = 0;
	for (struct kc_pending *pr = c->pending; pr; pr = pr->next) {
		struct kd_region *r;

		if (pr->replied)
			continue; /* no BUSY block left */
		if (kd_region_lookup(pr->s, pr->region_id, &r))
			r = NULL; /* cannot happen: the session is paused */
		for (uint32_t i = 0; i < pr->lim; i++) {
			struct kc_entry *e;
			int err;

			if (pr->state[i] != KC_SLOT_BUSY)
				continue;
			e = kc_find(c, pr->hashes[i]);
			/* still moving, or a restore called off that has
			 * not settled yet (kc_prefix_walk()) */
			if (r && e && !e->dead && !e->drop_after && e->job &&
			    (!e->rblk || e->restore_cancelled))
				continue;
			if (r && e && !e->dead && !e->drop_after) {
				if (e->rblk) {
					pr->state[i] = KC_SLOT_WAIT;
					c->st.restores_waited++;
					kc_early_attach(pr, r, i, e);
					continue;
				}
				if (e->tier == POL_TIER_GPU) {
					kc_prefix_share(c, pr, r, i, e);
					pr->nwait--;
					continue;
				}
				if (kc_reserved(c) &&
				    !kc_pages_in_line(c, c->ppb)) {
					/* the free pages are earmarked for
					 * commands parked before: wait until
					 * they left the line (then it is
					 * restored, or misses as it always
					 * did in a full pool) */
					c->busy_in_line++;
					continue;
				}
				err = kc_busy_quota(c, pr->s, e);
				if (err == -EINPROGRESS)
					continue; /* victims' copies run */
				if (!err &&
				    kc_restore_submit(c, pr->s, e) == 0) {
					pr->state[i] = KC_SLOT_WAIT;
					kc_early_attach(pr, r, i, e);
					continue;
				}
			}
			pr->state[i] = KC_SLOT_BUSY_FAILED;
			pr->nwait--;
		}
	}
}

/* The session's opens and drops in one size's cache. */
static void kc_session_end_one(struct kd_cache *c, struct kd_session *s)
{
	struct kc_pending **pp, *gone = NULL;

	kc_drop_session_end(c, s);
	for (pp = &c->pending; *pp;) {
		struct kc_pending *pr = *pp;

		if (pr->s != s) {
			pp = &pr->next;
			continue;
		}
		/* its sequence goes with the session's regions */
		*pp = pr->next;
		if (pr->deferred)
			c->st.prefix_opens_pending--;
		pr->next = gone;
		gone = pr;
	}
	/* the restores it waited for that no other open waits for */
	while (gone) {
		struct kc_pending *pr = gone;

		gone = pr->next;
		kc_pending_call_off(c, pr, 0, pr->lim);
		kc_pending_free(pr);
	}
}

void kd_cache_session_end(struct kd_session *s)
{
	struct kd_daemon *d = s->d;
	struct kd_cache *c;
	uint32_t i;

	if (!d->cache)
		return;
	kc_park_session_end(d->cache, s);
	kc_for_each(d, c, i)
		kc_session_end_one(c, s);
}

/*
 * The synchronous part of a PREFIX_OPEN: walk the prefix once, sharing
 * GPU blocks, handing out fresh pages for blocks the plan recomputes, and
 * submitting a restore for every lower-tier block (all of them in flight
 * together) or joining the restore another open started; a block being
 * demoted is waited for.  Stops at the first block in no tier (with
 * segments: after the last block in some tier; the holes before it get
 * fresh pages to recompute) or whose restore cannot start.  pinned: the
 * caller's buffer of n + 1.
 */
static void kc_prefix_walk(struct kd_cache *c, struct kc_pending *pr,
			   struct kd_region *r, uint8_t *tiers, uint8_t *plan,
			   bool *pinned)
{
	struct kd_daemon *d = c->d;
	struct kd_session *s = pr->s;
	struct kd_seq *q = &r->seqs[pr->seq];
	const uint64_t *hashes = pr->hashes;
	uint32_t n = pr->n, nplan, hit;

	/* the clock was set and room made (kc_prefix_room()) just before:
	 * pin the prefix first: restoring one of its blocks must not demote
	 * or drop a later one (it would be a busy miss); with segments every
	 * block that can be pinned, past holes and blocks on the move */
	for (uint32_t i = 0; i < n; i++) {
		struct kc_entry *pe = kc_find(c, hashes[i]);

		pinned[i] = !kc_gone(pe) && !(pe->job && !pe->rblk) &&
			    pe->in_pol && !pol_cache_ref(c->pol, hashes[i]);
		if (!pinned[i] && !pr->segments)
			break;
	}
	/* the restore plan, for the blocks matched now; the loop below
	 * looks each block up again (an unpinned one may have moved) */
	nplan = kc_prefix_tiers(c, hashes, n, pr->segments, tiers);
	kd_cache_plan(pr->want_acts ? d->cfg.restore_mode : KD_RESTORE_RELOAD,
		      d->cost, tiers, nplan, pr->segments, pr->early, plan);
	for (hit = 0; hit < n; hit++) {
		struct kc_entry *e = kc_find(c, hashes[hit]);

		if (hit < nplan && plan[hit] == POL_RESTORE_RECOMPUTE) {
			struct kd_block *blk;

			/* fresh pages the client fills; the cached copy
			 * stays where it is until the client publishes
			 * them (kc_publish_promote() then makes them the
			 * GPU copy) */
			if (!kc_pages_in_line(c, r->pages_per_block) ||
			    kc_block_new(s, r->pages_per_block,
					 KD_OWNER_UID(s->uid), &blk)) {
				pr->stop = KC_STOP_MISS;
				break;
			}
			q->blocks[hit] = blk;
			s->pages_owned += blk->nr_pages;
			pr->state[hit] = KC_SLOT_READY;
			pr->acts[hit] = KVMM_BLOCK_RECOMPUTE;
			pr->from[hit] = tiers[hit]; /* POL_TIER_NONE: a hole */
			if (!kc_gone(e) && tiers[hit] < POL_TIER_COUNT)
				e->uses++;
			continue;
		}
		if (kc_gone(e)) {
			pr->stop = KC_STOP_MISS;
			break;
		}
		if (e->rblk && !e->restore_cancelled) {
			/* being restored (for another open, or for this
			 * one's duplicate hash): wait for it, share it.  One
			 * called off (every open that wanted it went away)
			 * will not land: this open waits for it to settle
			 * like a block on the move below, and restores it
			 * then (kc_busy_retry()) */
			pr->state[hit] = KC_SLOT_WAIT;
			pr->nwait++;
			c->st.restores_waited++;
			kc_early_attach(pr, r, hit, e);
			continue;
		}
		if (e->job) {
			/* being demoted: its bytes are in two places and
			 * neither is final; restored once the move ended
			 * (kc_busy_retry()) */
			pr->state[hit] = KC_SLOT_BUSY;
			pr->nwait++;
			continue;
		}
		if (e->tier != POL_TIER_GPU) {
			if (!kc_pages_in_line(c, c->ppb) ||
			    kc_restore_submit(c, s, e)) {
				pr->stop = KC_STOP_MISS;
				break;
			}
			pr->state[hit] = KC_SLOT_WAIT;
			pr->nwait++;
			kc_early_attach(pr, r, hit, e);
			continue;
		}
		kc_prefix_share(c, pr, r, hit, e);
	}
	pr->lim = hit;
	kc_staging_pump(c, false);
	for (uint32_t i = 0; i < n; i++)
		if (pinned[i])
			pol_cache_unref(c->pol, hashes[i]);
	kc_reap_dead(c);
}

int kd_cache_prefix_open(struct kd_session *s, const struct kvmm_msg_hdr *h,
			 const void *p, size_t len)
{
	struct kd_daemon *d = s->d;
	struct kd_cache *c = d->cache;
	struct kvmm_prefix_open po;
	struct kc_pending *pr = NULL;
	uint8_t *tiers = NULL, *plan = NULL;
	uint64_t *hashes = NULL;
	struct kd_region *r;
	uint32_t n, seq;
	bool few_new = false, segments, *pinned = NULL;
	/* a KVMM_PREFIX_OPEN_COLLECT open parked for pool pages, run again:
	 * its sequence (seq) is open since it parked (ABI 1.17) */
	bool rerun = kd_cache_park_rerun(s, &seq);
	int err, opened;

	err = kc_copy_var(&po, sizeof(po), p, len,
			  offsetof(struct kvmm_prefix_open, nr_hashes), &hashes,
			  &n);
	if (err)
		goto out; /* a parked one's error is for its PREFIX_COLLECT */
	err = -EINVAL;
	if ((po.flags & ~(KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_SEGMENTS |
			  KVMM_PREFIX_OPEN_EARLY | KVMM_PREFIX_OPEN_COLLECT)) ||
	    !kw_all_zero(po.reserved, sizeof(po.reserved)))
		goto out;
	/* holes come back as RECOMPUTE, and an early reply's reloads may
	 * fail: only to a client that reads the actions */
	segments = po.flags & KVMM_PREFIX_OPEN_SEGMENTS;
	if ((po.flags & (KVMM_PREFIX_OPEN_SEGMENTS | KVMM_PREFIX_OPEN_EARLY)) &&
	    !(po.flags & KVMM_PREFIX_OPEN_ACTIONS))
		goto out;
	err = kd_region_lookup(s, po.region_id, &r);
	if (err)
		goto out;
	n = kc_prefix_bound(r, n);
	/* what can fail cheaply fails before any room is made: a region
	 * with no free sequence slot answers kd_seq_open()'s -ENOSPC
	 * without demoting anything */
	err = -ENOSPC;
	if (!rerun && r->nr_open >= r->max_seqs)
		goto out;
	/* and a session whose block tables are at their budget, before
	 * anything else (the walk's blocks go into a table of n) */
	err = -ENOBUFS;
	if (!kd_seq_slots_room(s, n))
		goto out;
	err = -ENOMEM;
	pr = kc_pending_new(n);
	tiers = malloc(n + 1);
	plan = malloc(n + 1);
	pinned = calloc(n + 1, sizeof(*pinned));
	if (!pr || !tiers || !plan || !pinned)
		goto out;
	/* the cache of the region's block size (or the first, which
	 * answers for an open no cache serves) */
	opened = n ? kc_for(d, r->pages_per_block, &c) : -ENOENT;
	if (opened == -EXDEV)
		kc_say_uncached(c, r);
	if (!opened) {
		pol_cache_set_clock(c->pol, kd_now_ns());
		/* before anything of the open touches the policy */
		few_new = pol_cache_few_new(c->pol, hashes, n);
		if (kc_prefix_room(c, s, hashes, n,
				   po.flags & KVMM_PREFIX_OPEN_ACTIONS ?
					   d->cfg.restore_mode :
					   KD_RESTORE_RELOAD,
				   segments, po.flags & KVMM_PREFIX_OPEN_EARLY,
				   tiers, plan, pinned) == -EINPROGRESS) {
			/* the restores' pages come back when demotion copies
			 * end: the open runs again from the loop then
			 * (cache_park.c), nothing of it done yet; with
			 * COLLECT, the session's socket is read meanwhile */
			err = po.flags & KVMM_PREFIX_OPEN_COLLECT ?
				      kc_prefix_park_collect(s, h, p, len, r,
							     rerun) :
				      kd_cache_park(s, h, p, len);
			goto out;
		}
		/* counted when it had asked for blocks ahead and got them */
		kd_cache_lend_filled(s);
	}
	err = rerun ? 0 : kd_seq_open(r, &seq);
	if (err)
		goto out;
	err = kd_seq_reserve(r, seq, n);
	if (err) {
		if (!rerun) /* else closed when its error is collected */
			kd_seq_close(r, seq, false);
		goto out;
	}
	r->seqs[seq].few_new = few_new;
	pr->s = s;
	pr->tenant = kd_tenant_charge(d, s);
	pr->h = *h;
	pr->region_id = po.region_id;
	pr->seq = seq;
	pr->n = n;
	pr->want_acts = po.flags & KVMM_PREFIX_OPEN_ACTIONS;
	pr->segments = segments;
	pr->early = po.flags & KVMM_PREFIX_OPEN_EARLY;
	pr->collect = po.flags & KVMM_PREFIX_OPEN_COLLECT;
	pr->gen = r->seqs[seq].gen;
	pr->hashes = hashes;
	hashes = NULL;
	c->st.prefix_opens++;
	kd_tenant(d, pr->tenant)->prefix_opens++;
	c->st.prefix_blocks_asked += n;
	pr->open_id = c->st.prefix_opens;
	if (!opened)
		kc_prefix_walk(c, pr, r, tiers, plan, pinned);
	/* blocks past [0, lim) get none from this open: their room goes
	 * back to the session's budget */
	kd_seq_trim(r, seq, pr->lim);
	free(tiers);
	free(plan);
	free(pinned);
	if (rerun)
		kd_cache_park_done(s, 1, NULL, 0); /* pr answers from here */
	if (kc_pending_ready(pr) && !rerun) {
		/* replies, frees pr (or, early, keeps it for the reloads) */
		kc_pending_finish(c, pr);
		return 0;
	}
	/* the reply waits for the restores: kc_settle() sends it */
	pr->deferred = true;
	pr->next = c->pending;
	c->pending = pr;
	c->st.prefix_opens_pending++;
	r->seqs[seq].opening = true;
	if (rerun) {
		/* told it waits when it parked; its reply may be ready */
		if (kc_pending_ready(pr)) {
			pr->told = true;
			kd_ring_notify(s);
		}
		return 0;
	}
	if (pr->collect) {
		kc_pending_say_pending(s, h, r, pr);
		return 0;
	}
	kd_session_defer(s);
	return 0;

out:
	if (rerun && err) {
		/* its PREFIX_COLLECT answers the error */
		kd_cache_park_done(s, err, NULL, 0);
		err = 0;
	}
	if (pr)
		kc_pending_free(pr);
	free(tiers);
	free(plan);
	free(pinned);
	free(hashes);
	return err;
}
