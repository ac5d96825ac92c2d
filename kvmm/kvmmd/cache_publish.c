// SPDX-License-Identifier: MIT
/*
 * BLOCK_PUBLISH: a sequence's full blocks become cache entries, named by
 * the client's hashes (kd_cache_publish_check() first, from proto.c, then
 * kd_cache_publish()).  A hash the cache already holds on the GPU is a
 * duplicate; one it holds idle in the host or NVMe tier is promoted, the
 * published pages becoming its GPU copy (kc_publish_promote()), a copy
 * down still running called off (kc_call_off_copy()).  The entry index
 * it fills is cache.c's.
 *
 * Everything here runs on the event-loop thread.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/abi_play.h"

/* blk (a sequence's block) becomes e's GPU copy: the cache's reference */
static void kc_take_block(struct kd_cache *c, struct kc_entry *e,
			  struct kd_block *blk)
{
	kc_set_tier(c, e, POL_TIER_GPU);
	kc_set_block(c, e, blk);
	blk->refcnt++;
	blk->hash = e->hash;
}

/*
 * The policy's references on GPU block e: one per sequence using it, as
 * kd_cache_block_unref() drops one at every put.  Pages several sequences
 * already share when one publishes them (a restore that stayed below
 * handed the same uncached pages to every open waiting for it) take one
 * for each: a single one let the first holder's put leave a block in use
 * evictable (found by a review).
 */
static int kc_ref_users(struct kd_cache *c, struct kc_entry *e)
{
	for (uint32_t k = 1; k < e->blk->refcnt; k++) {
		int r = pol_cache_ref(c->pol, e->hash);

		if (r) {
			while (--k >= 1)
				pol_cache_unref(c->pol, e->hash);
			return r;
		}
	}
	return 0;
}

/*
 * The copy down of e that a publish promoting it calls off
 * (kc_publish_promote()): afterwards e holds no job, no GPU pages and no
 * host slot of that copy, as if it had ended at once.  A copy still
 * waiting in line (for a host slot, or an NVMe write for an NVMe slot)
 * never started: it is dropped from the line, and the pages it would
 * have read go back (a host slot it holds is freed with e's lower copy
 * by the caller).  A GPU -> host copy a worker runs cannot be stopped:
 * it moves, with the pages it reads and the host slot it fills, to an
 * entry of its own that only the job knows, in the state of an entry
 * the policy dropped during its copy (drop_after, out of the index:
 * kc_unhash_dropped()), which kc_job_done() releases and frees whatever
 * the copy's outcome; held pages (held_copy) stay the sequences' and
 * lose the hash, as any the cache no longer holds.  A host -> NVMe
 * write that runs moves the same way, with the host slot it reads, and
 * the NVMe slot it fills is freed when it ends: in memory only, so its
 * header on disk is a stale copy of the block's tenant that the tier
 * records (tier_nvme_free_tenant()), as a restore to the GPU leaves the
 * old NVMe copy, for a drop to find.  Until then a write of the hash
 * waits (kc_nvme_write_off()): the tier dedups by hash, and a second
 * entry's write landing on the slot it fills would lose that slot when
 * this one freed it.  -ENOMEM: nothing changed.
 */
static int kc_call_off_copy(struct kd_cache *c, struct kc_entry *e)
{
	enum migrate_kind kind;
	struct kc_entry *copy;

	if (!e->job)
		return 0;
	if (kc_demote_unqueue(c, e)) {
		kc_put_block(c, e);
		goto done;
	}
	kind = e->job->kind;
	if (kind != MIGRATE_GPU_TO_HOST && kind != MIGRATE_HOST_TO_NVME)
		return -EBUSY;
	copy = calloc(1, sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	copy->hash = e->hash;
	copy->nvme_slot = MIGRATE_NO_SLOT;
	copy->tenant = e->tenant;
	copy->drop_after = true;
	copy->unhashed = true;
	copy->held_copy = e->held_copy;
	if (kind == MIGRATE_GPU_TO_HOST) {
		/* its pages are on their way out, as a demoting entry's are
		 * (a quota reclaim counts them as leaving) */
		kc_set_tier(c, copy, POL_TIER_HOST);
		kc_set_block(c, copy, kc_unset_block(c, e));
	} else {
		kc_set_tier(c, copy, POL_TIER_NVME);
		/* the write that tries a tier out of service for writes is
		 * still that try */
		copy->nvme_probe = e->nvme_probe;
		e->nvme_probe = false;
		kd_fifo_push_tail(&c->nvme_off, &copy->nvme_off);
	}
	copy->host_slot = e->host_slot;
	e->host_slot = MIGRATE_NO_SLOT;
	copy->job = e->job;
	copy->job->owner = copy;
	e->job = NULL;
done:
	e->held_copy = false;
	e->then_nvme = false;
	e->kept_retries = 0;
	return 0;
}

/*
 * A sequence publishes, from its own GPU pages, content the cache holds
 * in the host or NVMe tier (typically a block a restore plan handed out
 * to recompute, KVMM_BLOCK_RECOMPUTE): those pages become the block's GPU
 * copy, as a restore's would when it settles (kc_restore_settle()), and
 * the lower copy is freed, so the tiers stay exclusive and the next open
 * shares the block instead of reloading it again.  Returns 1 when it did,
 * 0 when e stays where it is (the publish is a duplicate, as before), or
 * -ENOSPC when the policy refused the GPU tier after all (e is then
 * dropped, as a fresh block it refuses is not cached).
 */
static int kc_publish_promote(struct kd_cache *c, struct kc_entry *e,
			      struct kd_block *blk,
			      const struct pol_block_desc *desc)
{
	unsigned int from = e->tier;
	int r;

	if (from != POL_TIER_HOST && from != POL_TIER_NVME)
		return 0;
	/*
	 * A restore in flight reads the lower copy into pages of its own
	 * that waiting opens will share and that kc_restore_settle() makes
	 * the GPU copy: taking the published pages too would give the entry
	 * two GPU copies, so the publish stays a duplicate (in the policy
	 * the block is on the GPU already, as an instant restore would have
	 * put it).  A copy down in flight is called off
	 * (kc_call_off_copy()): the promotion does not wait for it, so what
	 * the cache decides does not depend on whether a worker has ended
	 * the copy yet (until 6 December the publish was a duplicate then,
	 * and the block stayed below: tinylm's counts varied from run to
	 * run), a host -> NVMe write already running included.  Cold NVMe
	 * blocks (found at startup, not in the policy) are left alone:
	 * making room below may drop a cold block to make room on NVMe
	 * (kc_nvme_room()), which could be this one.
	 */
	if (e->rblk || e->dead || e->drop_after || !e->in_pol)
		return 0;
	/*
	 * Should nothing on the GPU be evictable (every block in use or
	 * pinned), or only the block's parent (which stops being a leaf
	 * once the block is there: pol_cache_can_promote()), the block
	 * stays where it is: pol_cache_access() would move it up and then
	 * drop it, lower copy and all.  Otherwise it
	 * moves up first and the GPU's victim goes down into the room it
	 * leaves, as a reload's would (kc_restore_settle()): making room
	 * first would push the victim into a lower tier that the block
	 * still fills, and evict one more block there for nothing.  The
	 * slot goes before the policy call, so the victim's demotion finds
	 * it free; pinned meanwhile, the block is not its own victim.
	 */
	if (!pol_cache_can_promote(c->pol, POL_TIER_GPU, e->hash) ||
	    pol_cache_pin(c->pol, e->hash))
		return 0;
	if (kc_call_off_copy(c, e)) {
		(void)pol_cache_unpin(c->pol, e->hash);
		return 0;
	}
	kc_take_block(c, e, blk);
	kc_release_lower(c, e);
	r = pol_cache_access(c->pol, desc, NULL);
	(void)pol_cache_unpin(c->pol, e->hash);
	if (!r && !e->dead && e->in_pol)
		r = kc_ref_users(c, e);
	if (r || e->dead || !e->in_pol) {
		/* should not happen (there was room): kc_move() dropped it
		 * (the cache's reference went), the sequence keeps its
		 * pages */
		if (!e->dead)
			kc_kill(c, e);
		return -ENOSPC;
	}
	c->st.tiers[from].promotions_by_publish++;
	/* a demotion waiting for a host slot may take the one freed; an
	 * open that found the block moving (BUSY) shares it now */
	if (((from == POL_TIER_HOST &&
	      (!kd_fifo_empty(&c->slotq) || !kd_fifo_empty(&c->staging))) ||
	     c->pending) &&
	    !c->settle_timer.armed)
		kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
	return 1;
}

/*
 * A publish meets e, an entry the policy dropped while a move of it runs
 * (drop_after: it lives until the move ends, kc_job_done()).  When that
 * move is a demotion copy to the host tier, e leaves the index (true) and
 * the publish makes a new entry for the hash, as it does once the copy
 * has ended; only the job finds e from then on (kd_cache_fini() reaps
 * every job before it walks the index).  The two share nothing: a GPU
 * block has no NVMe slot (the tiers are exclusive), its copy fills a host
 * slot of its own, found by number, and no open waits for e (one that
 * found it moving, BUSY, looks the hash up again: kc_busy_retry()).
 * Refusing it instead made the cache's decisions depend on whether a copy
 * worker had run, and the loop reaped its job, before the client's next
 * request: on a loaded machine now and then not, and a block the next turn
 * of a conversation would have shared was missing (tinylm-prefix-early's
 * counters differed from run to run).  A move that involves NVMe (a
 * write, a restore's read: the tier dedups by hash, so a second entry's
 * write would land on e's slot and keep it after e freed it) or a restore
 * (its settle hands pages to the opens waiting for the hash) keeps e in
 * the index (false): that publish is not cached.
 */
static bool kc_unhash_dropped(struct kd_cache *c, struct kc_entry *e)
{
	if (!e->job || e->job->kind != MIGRATE_GPU_TO_HOST || e->rblk ||
	    e->nvme_slot != MIGRATE_NO_SLOT || e->unhashed)
		return false;
	kd_htab_del(&c->index, &e->node);
	e->unhashed = true;
	return true;
}

/*
 * BLOCK_PUBLISH's checks of the request, before kd_cache_publish_busy()
 * and kd_cache_publish(), which rely on them: a malformed publish is -EINVAL
 * (the size rule's -E2BIG, the ids' -ENOENT / -EPERM) whatever state its
 * blocks are in; one of a block a revocation took is -ESTALE for a client
 * of ABI 1.20 (kd_seq_revoked()), -EINVAL as before for an older one.
 * kd_cache_publish_busy()'s -EBUSY, which says to try again later, used
 * to come first: a bad request over a block still loading was told to
 * retry.
 */
int kd_cache_publish_check(struct kd_session *s, const void *body, size_t len)
{
	const size_t known = sizeof(struct kvmm_block_publish);
	const char *p = body;
	struct kvmm_block_publish bp;
	struct kd_region *r;
	struct kd_seq *q;
	bool stale = false;
	int err;

	if (len < known)
		return -EINVAL;
	memcpy(&bp, p, known);
	if (bp.size < known || bp.nr_blocks > KVMM_PREFIX_MAX_BLOCKS ||
	    len != bp.size + bp.nr_blocks * 8ull)
		return -EINVAL;
	if (!kw_all_zero(p + known, bp.size - known))
		return -E2BIG;
	if (bp.flags || !kw_all_zero(bp.reserved, sizeof(bp.reserved)))
		return -EINVAL;
	err = kd_region_lookup(s, bp.region_id, &r) ?:
		      kd_seq_lookup_client(r, bp.seq_id, &q);
	if (err)
		return err;
	if (!bp.nr_blocks || bp.first_block >= r->max_blocks ||
	    bp.nr_blocks > r->max_blocks - bp.first_block)
		return -EINVAL;
	for (uint32_t i = 0; i < bp.nr_blocks; i++) {
		uint32_t b = bp.first_block + i;
		struct kd_block *blk = kd_seq_block(q, b);
		uint64_t hash;

		memcpy(&hash, p + bp.size + i * 8ull, sizeof(hash));
		if (!hash || (blk && blk->hash && blk->hash != hash))
			return -EINVAL;
		if (blk && (uint64_t)(b + 1) * r->tokens_per_block <= q->len)
			continue;
		/* not the client's (any more): a revocation's doing is said
		 * apart from a request that was never right, once every
		 * block's hash was checked (ABI 1.20) */
		if (!kd_seq_revoked(q, b) || s->client_minor < KD_ABI_REVOKED)
			return -EINVAL;
		stale = true;
	}
	return stale ? -ESTALE : 0;
}

int kd_cache_publish(struct kd_session *s, const struct kvmm_msg_hdr *h,
		     const void *p, size_t len)
{
	struct kd_cache *c;
	struct kvmm_block_publish bp;
	struct kvmm_block_publish_reply rep = { .size = sizeof(rep) };
	uint64_t *hashes = NULL;
	struct kd_region *r;
	struct kd_seq *q;
	uint32_t n;
	int err;

	err = kc_copy_var(&bp, sizeof(bp), p, len,
			  offsetof(struct kvmm_block_publish, nr_blocks),
			  &hashes, &n);
	if (err)
		return err;
	/* the request passed kd_cache_publish_check() (proto.c) */
	err = kd_region_lookup(s, bp.region_id, &r) ?:
		      kd_seq_lookup_client(r, bp.seq_id, &q);
	if (err)
		goto out;
	err = kc_for(s->d, r->pages_per_block, &c);
	if (err == -EXDEV) {
		kc_say_uncached(c, r);
		err = -EOPNOTSUPP; /* no cache may take this block size */
	}
	if (err)
		goto out;
	uint64_t parent = bp.parent_hash;
	uint32_t tenant = kd_tenant_charge(s->d, s);

	pol_cache_set_clock(c->pol, kd_now_ns()); /* tie-breaks by age */
	for (uint32_t i = 0; i < n; i++, parent = hashes[i - 1]) {
		uint32_t b = bp.first_block + i;
		struct kd_block *blk = q->blocks[b];
		struct pol_block_desc desc = { .hash = hashes[i],
					       .parent_hash = parent,
					       .position = b,
					       .tenant = tenant };
		struct kc_entry *e;

		if (parent)
			desc.flags = POL_BLOCK_HAS_PARENT;
		if (q->few_new)
			desc.flags |= POL_BLOCK_FEW_NEW;
		if (blk->hash) { /* published before: the same block */
			rep.duplicates++;
			continue;
		}
		e = kc_find(c, hashes[i]);
		if (e && !e->in_pol && e->drop_after &&
		    kc_unhash_dropped(c, e)) {
			e = NULL; /* a new entry below */
		} else if (e && !e->in_pol && e->drop_after) {
			/*
			 * Dropped while a move of it that involves NVMe, or a
			 * restore, runs: the entry lives until the move ends
			 * (kc_job_done()).  A second entry for the hash would
			 * meet its NVMe slot (the tier dedups by hash), keep it
			 * after the first frees it, and later read another
			 * block there (a restore failed with -ENOENT) or free
			 * it under one: not cached this time.
			 */
			rep.not_cached++;
			continue;
		}
		if (e && !e->in_pol && e->dead)
			e = NULL; /* dropped (freed after this call): gone */
		if (e) {
			int r = kc_publish_promote(c, e, blk, &desc);

			e->uses++;
			if (r > 0) { /* the pages are its GPU copy now */
				rep.published++;
				rep.promoted++;
			} else if (r < 0) {
				rep.not_cached++;
			} else {
				/* same content cached already: keep that
				 * copy */
				rep.duplicates++;
			}
			continue;
		}
		e = kc_add(c, hashes[i]);
		if (!e) {
			err = -ENOMEM;
			break;
		}
		e->parent = parent;
		e->position = b;
		e->uses = 1;
		e->in_pol = true;
		kc_take_block(c, e, blk); /* the cache's reference */
		err = pol_cache_access(c->pol, &desc, NULL);
		/* the policy may have sent it down at once: copied from
		 * these pages (kc_move()), cached below, not referenced */
		if (!err && !e->dead && e->tier == POL_TIER_GPU)
			err = kc_ref_users(c, e);
		if (err || e->dead) {
			/* no room: every cached GPU block is in use */
			if (!e->dead) {
				e->in_pol = false;
				kc_put_block(c, e);
				kc_free(c, e);
			} /* else removed by kc_reap_dead() below */
			rep.not_cached++;
			err = 0;
			continue;
		}
		rep.published++;
	}
	/*
	 * Counted from the reply, so that publishes = published + duplicates
	 * + not_cached, summed over tenants' published_blocks (a block an
	 * -ENOMEM stopped at is in none: the publish failed there).  A
	 * re-publish (the block has its hash: published before, or shared
	 * into the sequence by a prefix open) was in the reply's duplicates
	 * only, and publishes drifted ahead of the three.
	 */
	c->st.publishes += rep.published + rep.duplicates + rep.not_cached;
	c->st.duplicates += rep.duplicates;
	c->st.not_cached += rep.not_cached;
	kc_reap_dead(c);
	kd_tenant(s->d, tenant)->published_blocks += rep.published;
	/* a reserved word before 1.4 (abi_play.h) */
	if (KD_ABI_BEFORE(s, KD_ABI_PROMOTED))
		rep.promoted = 0;
	if (!err)
		kd_session_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
out:
	free(hashes);
	return err;
}
