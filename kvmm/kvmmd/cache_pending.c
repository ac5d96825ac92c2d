// SPDX-License-Identifier: MIT
/*
 * The prefix opens that wait for restores (pending): their records, the
 * reply each sends once no block before its first failed one waits
 * (kc_pending_finish()), and the settle that runs from the loop whenever
 * migrations complete and answers those that can go (kc_settle()).  The
 * walk that makes a record is in cache_prefix.c; what an early open's
 * record does after its reply, in cache_ready.c.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/policy/restore_plan.h"
#include "kvmm/kvmmd/abi_play.h"
#include "kvmm/kvmmd/cache_plan.h"

struct kc_pending *kc_pending_new(uint32_t n)
{
	struct kc_pending *pr = calloc(1, sizeof(*pr));

	if (!pr)
		return NULL;
	pr->state = calloc(1, n + 1);
	pr->from = calloc(1, n + 1);
	pr->acts = calloc(1, n + 4);
	pr->att = calloc(1, n + 1);
	if (!pr->state || !pr->from || !pr->acts || !pr->att) {
		kc_pending_free(pr);
		return NULL;
	}
	return pr;
}

void kc_pending_free(struct kc_pending *pr)
{
	free(pr->hashes);
	free(pr->state);
	free(pr->from);
	free(pr->acts);
	free(pr->att);
	free(pr);
}

/* The reply can go: no block before the first failed one still waits
 * (early: still waits without its pages). */
bool kc_pending_ready(const struct kc_pending *pr)
{
	if (!pr->nwait)
		return true;
	for (uint32_t i = 0; i < pr->lim; i++) {
		if ((pr->state[i] == KC_SLOT_WAIT && !pr->att[i]) ||
		    pr->state[i] == KC_SLOT_BUSY)
			return false;
		if (pr->state[i] == KC_SLOT_WAIT)
			continue; /* attached: the reply does not wait */
		if (pr->state[i] != KC_SLOT_READY)
			return true;
	}
	return true;
}

/*
 * After an early reply that handed out blocks [0, hit): the blocks past
 * them left the sequence; the record is kept (true) while some of those
 * blocks still load.
 */
static bool kc_early_keep(struct kd_cache *c, struct kc_pending *pr,
			  uint32_t hit)
{
	for (uint32_t i = hit; i < pr->lim; i++)
		kc_early_unlend(c, pr, i);
	pr->lim = hit;
	pr->nwait = kc_ready_pending(pr, hit);
	pr->replied = true;
	return pr->nwait > 0;
}

/*
 * Does block b of the reply go to the client read-only?  A block shared
 * from the GPU or restored is the cache's copy, which every reader maps:
 * its pages go as read-only fds (kd_session_reply_pages()), so the
 * client cannot map them writable, whatever libkvmm does.  The
 * sequence's own blocks stay writable: RECOMPUTE and holes (fresh pages),
 * and an early open's block still loading, whose pages become the
 * sequence's own if the reload fails (the client recomputes the block in
 * them after SEQ_WAIT_READY; lifecycle.md says what that leaves open).
 */
static bool kc_block_readonly(const struct kc_pending *pr, uint32_t b)
{
	return pr->acts[b] != KVMM_BLOCK_RECOMPUTE &&
	       pr->from[b] < POL_TIER_COUNT && pr->state[b] == KC_SLOT_READY;
}

/*
 * Answer a PREFIX_OPEN: the prefix is the leading READY blocks (early:
 * and attached WAIT ones); what the sequence holds beyond it (blocks
 * shared or restored after a failed one) goes back.  Frees pr, or keeps
 * it in the pending list (an early open whose reloads still run); a
 * deferred session reads its socket again (and may end, when the reply
 * could not be sent).
 */
void kc_pending_finish(struct kd_cache *c, struct kc_pending *pr)
{
	struct kd_session *s = pr->s;
	struct kd_daemon *d = c->d;
	/* a COLLECT open's session was never deferred */
	bool deferred = pr->deferred && !pr->collect, keep = false;
	uint32_t from_tier[POL_TIER_COUNT] = { 0 };
	struct kvmm_prefix_open_reply *rep = NULL;
	uint32_t hit = 0, nrecompute = 0, nholes = 0, nfds = 0, npages;
	uint32_t nloading = 0;
	struct kd_region *r;
	struct kd_seq *q;
	size_t rep_len, acts_len = 0;
	int *fds = NULL, err = -ENOENT;
	uint32_t *ro = NULL;

	if (pr->deferred)
		c->st.prefix_opens_pending--;
	if (kd_region_lookup(s, pr->region_id, &r))
		goto err_reply; /* cannot happen: paused, or -EBUSY */
	q = &r->seqs[pr->seq];
	q->opening = false; /* the client's from this reply on */
	while (hit < pr->lim &&
	       (pr->state[hit] == KC_SLOT_READY ||
		(pr->state[hit] == KC_SLOT_WAIT && pr->att[hit])) &&
	       kd_seq_block(q, hit))
		hit++;
	/* the prefix ends with a block found (holes only between them):
	 * when a later block failed, the holes before it go back too */
	while (hit && pr->from[hit - 1] >= POL_TIER_COUNT)
		hit--;
	kd_seq_drop_blocks(r, pr->seq, hit, false);
	for (uint32_t b = 0; b < hit; b++) {
		if (pr->from[b] >= POL_TIER_COUNT) {
			nholes++; /* a hole: RECOMPUTE, no hit */
			nrecompute++;
			continue;
		}
		if (pr->state[b] == KC_SLOT_WAIT) {
			/* handed out still loading: a hit once it lands
			 * (kc_restore_hand_out()), never when it fails */
			nloading++;
		} else {
			kc_count_hit(c, pr, pr->from[b]);
		}
		if (pr->acts[b] == KVMM_BLOCK_RECOMPUTE) {
			/* cached below the GPU, recomputed all the same */
			nrecompute++;
			if (pr->from[b] == POL_TIER_HOST)
				c->st.plan_recomputes_host++;
			else if (pr->from[b] == POL_TIER_NVME)
				c->st.plan_recomputes_nvme++;
			continue;
		}
		from_tier[pr->from[b]]++;
		/* what the segments bought (a block still loading when it
		 * lands, as its hit) */
		if (nholes && pr->state[b] != KC_SLOT_WAIT)
			c->st.prefix_blocks_after_hole++;
	}
	c->st.prefix_holes += nholes;
	if (hit < pr->lim && pr->state[hit] == KC_SLOT_BUSY_FAILED)
		c->st.busy_misses++;
	else if (hit < pr->lim || pr->stop == KC_STOP_MISS || nholes)
		c->st.misses++;
	/* kvmm:access: each block the prefix found, and where (a hole: a
	 * miss), then the first one it did not (to be recomputed); named
	 * as the cache names them (not to be renamed as a client's) */
	if (pr->n && kvmm_tel_want(d->tel_local, access)) {
		struct kvmm_access_rec *recs = calloc(hit + 1, sizeof(*recs));
		uint64_t who = (uint64_t)s->id << 32 | pr->seq;
		uint32_t nrec = 0;

		for (uint32_t b = 0; recs && b < hit; b++)
			recs[nrec++] = (struct kvmm_access_rec){
				pr->hashes[b], who,
				pr->from[b] < POL_TIER_COUNT ?
					pr->from[b] :
					KVMM_TEL_TIER_MISS,
				KVMM_ACCESS_NAMED
			};
		if (recs && hit < pr->n)
			recs[nrec++] =
				(struct kvmm_access_rec){ pr->hashes[hit], who,
							  KVMM_TEL_TIER_MISS,
							  KVMM_ACCESS_NAMED };
		if (recs)
			kvmm_tel_access(d->tel_local, pr->open_id, recs, nrec);
		free(recs);
	}
	c->st.prefix_blocks_hit += hit - nholes - nloading;
	if (nloading) {
		c->st.early_opens++;
		c->st.early_reloads += nloading;
	}
	q->len = hit * r->tokens_per_block;

	npages = hit * r->pages_per_block;
	if (pr->want_acts)
		acts_len = (hit + 3) & ~3u;
	rep_len = sizeof(*rep) + npages * sizeof(uint32_t) + acts_len;
	rep = calloc(1, rep_len);
	fds = calloc(npages + 1, sizeof(*fds));
	ro = calloc(npages + 1, sizeof(*ro));
	if (!rep || !fds || !ro) {
		kd_seq_close(r, pr->seq, false);
		err = -ENOMEM;
		goto err_reply;
	}
	rep->size = rep_len;
	rep->seq_id = pr->seq;
	/* 0 to a 1.0 client: no opening named (abi_play.h) */
	rep->seq_gen = KD_ABI_BEFORE(s, KD_ABI_SEQ_GEN) ? 0 : q->gen;
	rep->nr_blocks = hit;
	rep->pages_per_block = r->pages_per_block;
	rep->len = q->len;
	rep->from_gpu = from_tier[POL_TIER_GPU];
	rep->from_host = from_tier[POL_TIER_HOST];
	rep->from_nvme = from_tier[POL_TIER_NVME];
	rep->nr_recompute = nrecompute;
	if (acts_len)
		memcpy(rep->page_ids + npages, pr->acts, acts_len);
	for (uint32_t b = 0, k = 0; b < hit; b++) {
		struct kd_block *blk = q->blocks[b];
		bool shared = kc_block_readonly(pr, b);

		blk->ro_sent |= shared; /* SEQ_UNSHARE copies it (unshare.c) */
		for (uint32_t i = 0; i < blk->nr_pages; i++, k++) {
			rep->page_ids[k] = blk->pages[i];
			if (s->held[blk->pages[i]]) {
				rep->page_ids[k] |= KVMM_PAGE_HELD;
			} else {
				ro[nfds] = shared ? blk->pages[i] :
						    KD_PAGE_AS_IS;
				fds[nfds++] =
					vmm_pool_page_fd(d->pool, blk->pages[i],
							 kd_cache_owner(s));
			}
			kd_hold_page(s, blk->pages[i]);
		}
	}
	rep->nr_fds = nfds;
	kd_session_reply_pages(s, &pr->h, 0, rep, rep_len, fds, ro, nfds);
	if (pr->early)
		keep = kc_early_keep(c, pr, hit);
	goto out;

err_reply:
	kd_session_reply(s, &pr->h, err, NULL, 0, NULL, 0);
out:
	free(ro);
	free(fds);
	free(rep);
	pr->deferred = false;
	if (keep) {
		/* SEQ_WAIT_READY finds it (the session's end drops it) */
		pr->next = c->pending;
		c->pending = pr;
	} else {
		kc_pending_free(pr);
	}
	if (deferred)
		kd_session_resume(s); /* last: it may end the session */
}

/*
 * The next ended restore to settle, unlinked if `take`: the one submitted
 * next after the last settled (or one that never ran).  The engine's
 * workers end copies in any order, but each settle is a use for the
 * policy, and the order of uses is what asym learns from (a prefix's
 * blocks at consecutive ticks from the root): in submission order, which
 * is prefix order, the policy sees the same uses whatever the timing, as
 * in kvmm-replay --model-daemon.  The wait is for copies already running
 * (the engine needs nothing from the loop to end them); at shutdown any
 * order goes.
 */
static struct kc_entry *kc_restored_next(struct kd_cache *c, bool take)
{
	struct kc_entry **pp, **found = NULL;

	for (pp = &c->restored; *pp; pp = &(*pp)->restored_next) {
		uint64_t no = (*pp)->restore_no;

		if (!no || no == c->restores_settled + 1 || c->closing) {
			found = pp;
			break;
		}
	}
	if (found && take) {
		struct kc_entry *e = *found;

		*found = e->restored_next;
		e->restored_next = NULL;
		c->nr_restored--;
		if (e->restore_no > c->restores_settled)
			c->restores_settled = e->restore_no;
		e->restore_no = 0;
		return e;
	}
	return found ? *found : NULL;
}

/*
 * On the loop: settle the restores that ended, then answer the opens that
 * no longer wait.  Replies go after every list walk (a reply that fails
 * ends its session, which drops that session's pending open).
 */
void kc_settle(struct kd_cache *c)
{
	struct kc_pending *done = NULL, **pp;
	struct kc_entry *e;

	if (c->restored && c->pol)
		pol_cache_set_clock(c->pol, kd_now_ns());
	do {
		while ((e = kc_restored_next(c, true))) {
			kc_restore_settle(c, e);
			/* what its policy call killed goes now, not whenever
			 * the next copy ends */
			kc_reap_dead(c);
		}
		/* settled restores and ended demotions gave slots back:
		 * NVMe slots to writes waiting for them first (once they
		 * run, the host slots they hold count as coming back for
		 * the lines below), restores (a client waits), then
		 * demotions (one that cannot get a slot ever is dropped: a
		 * busy open sees it) */
		kc_nvme_pump(c, !c->opened || c->closing);
		kc_staging_pump(c, !c->opened || c->closing);
		kc_demote_pump(c, !c->opened || c->closing);
		kc_busy_retry(c);
		kc_staging_pump(c, !c->opened || c->closing);
	} while (kc_restored_next(c, false));
	kc_reap_dead(c);
	for (pp = &c->pending; *pp;) {
		struct kc_pending *pr = *pp;

		if (pr->replied || !kc_pending_ready(pr)) {
			pp = &pr->next;
			continue;
		}
		if (pr->collect) {
			/* its PREFIX_COLLECT takes the reply: tell the
			 * client once */
			if (!pr->told) {
				pr->told = true;
				kd_ring_notify(pr->s);
			}
			pp = &pr->next;
			continue;
		}
		*pp = pr->next;
		pr->next = done;
		done = pr;
	}
	while (done) {
		struct kc_pending *pr = done;

		done = pr->next;
		kc_pending_finish(c, pr);
	}
	/* early opens: SEQ_WAIT_READYs answered, records done with */
	kc_ready_sweep(c);
	/* copies that ended gave pool pages back: the commands parked for
	 * them run again */
	if (!kd_fifo_empty(&kc_line(c)->parked))
		kc_park_run(kc_line(c));
}

/* Does a pending open (or an early one after its reply) still wait for
 * the restore of hash? */
bool kc_restore_wanted(struct kd_cache *c, uint64_t hash)
{
	for (struct kc_pending *pr = c->pending; pr; pr = pr->next)
		for (uint32_t i = 0; i < pr->lim; i++)
			if (pr->state[i] == KC_SLOT_WAIT &&
			    pr->hashes[i] == hash)
				return true;
	return false;
}
