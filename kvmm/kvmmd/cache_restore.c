// SPDX-License-Identifier: MIT
/*
 * The block cache's way up: restore jobs that bring a block from the host
 * or NVMe tier into fresh pool pages, the host slots NVMe restores stage
 * in, and settling a finished restore: the waiting PREFIX_OPENs
 * (cache_pending.c) get the pages, the block joins the GPU tier.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"

/* A fresh block of ppb pool pages for owner (KD_OWNER_*()) charged to s,
 * within its quota. */
int kc_block_new(struct kd_session *s, uint32_t ppb, uint64_t owner,
		 struct kd_block **out)
{
	if (s->quota && s->quota->limit_pages &&
	    s->quota->used_pages + ppb > s->quota->limit_pages)
		return -EDQUOT;
	return kd_block_new_for(s, ppb, owner, out);
}

/*
 * Start bringing e's bytes from the host or NVMe tier into fresh pages
 * charged to s: a HOST_TO_GPU job (the host slot is the source) or an
 * NVME_TO_GPU job (read into a host staging slot, CRC checked, copied).
 * Until kc_restore_settle() the entry owns the pages (rblk), is pinned in
 * the policy and counts as busy for everything that would move or free
 * its lower copy.
 */
int kc_restore_submit(struct kd_cache *c, struct kd_session *s,
		      struct kc_entry *e)
{
	bool nvme = e->tier == POL_TIER_NVME;
	struct migrate_job *job;
	struct kd_block *blk;
	int err;

	if (!c->mig || (nvme ? e->nvme_slot : e->host_slot) == MIGRATE_NO_SLOT)
		return -ENOENT;
	/* the cached block's pages: an early open of any client of its
	 * scope may map them before the copy lands, so they are scrubbed
	 * against the scope, not only against s's uid */
	err = kc_block_new(s, c->ppb, kd_cache_owner(s), &blk);
	if (err)
		return err;
	job = migrate_job_new(nvme ? MIGRATE_NVME_TO_GPU : MIGRATE_HOST_TO_GPU,
			      c->ppb);
	if (!job) {
		err = -ENOMEM;
		goto err_put;
	}
	job->hash = e->hash;
	job->layout_id = c->ppb;
	e->restore_tenant = kd_tenant_charge(c->d, s);
	job->length = c->block_bytes;
	job->owner = e;
	for (uint32_t i = 0; i < c->ppb; i++) {
		job->pages[i].page_id = blk->pages[i];
		job->pages[i].handle =
			vmm_pool_page_handle(c->d->pool, blk->pages[i]);
	}
	job->nvme_slot = e->nvme_slot;
	job->host_slot = nvme ? MIGRATE_NO_SLOT : e->host_slot;
	if (nvme && (!kd_fifo_empty(&c->staging) ||
		     tier_host_alloc(c->host, &job->host_slot))) {
		/* no host slot to stage in now: queued, submitted by
		 * kc_staging_pump() when a migration gives one back (the
		 * loop does not wait) */
		job->host_slot = MIGRATE_NO_SLOT;
		kd_fifo_push_tail(&c->staging, &e->staging);
	} else {
		err = migrate_submit(c->mig, job);
		if (err) {
			if (nvme)
				tier_host_free(c->host, job->host_slot);
			migrate_job_free(job);
			goto err_put;
		}
		c->st.migrations_in_flight++;
		if (nvme)
			c->nvme_in_flight++;
		e->restore_no = ++c->restores_submitted;
	}
	e->job = job;
	e->rblk = blk;
	if (e->in_pol)
		e->restore_pinned = pol_cache_pin(c->pol, e->hash) == 0;
	return 0;

err_put:
	kd_block_put(c->d, blk);
	return err;
}

/*
 * Submit queued NVMe restores while host slots are free to stage them.
 * When none is free and no migration is in flight, none will come back:
 * the queued restores fail (misses), as a blocking wait would have.
 * At shutdown (fail_all) every queued restore fails.
 */
void kc_staging_pump(struct kd_cache *c, bool fail_all)
{
	while (!kd_fifo_empty(&c->staging)) {
		struct kc_entry *e = kd_fifo_entry(kd_fifo_first(&c->staging),
						   struct kc_entry, staging);
		struct migrate_job *job = e->job;
		int err = kc_queued_slot(c, job, fail_all);

		if (err == -EAGAIN)
			return;
		kd_fifo_unlink(&c->staging, &e->staging);
		if (!err)
			err = migrate_submit(c->mig, job);
		if (!err) {
			c->st.migrations_in_flight++;
			c->nvme_in_flight++;
			e->restore_no = ++c->restores_submitted;
			continue;
		}
		if (job->host_slot != MIGRATE_NO_SLOT)
			tier_host_free(c->host, job->host_slot);
		job->host_slot = MIGRATE_NO_SLOT;
		job->state = MIGRATE_CANCELLED; /* never ran */
		job->result = err;
		kc_restore_done(c, job);
	}
}

/*
 * Nobody waits for e's restore any more (the PREFIX_OPENs that did went
 * away): call it off if it has not started.  One waiting for a staging
 * slot never reached the engine; one queued in the engine is cancelled
 * there (reaped as CANCELLED).  Either way it settles as a restore that
 * did not happen: the fresh pages go back, the block stays where it was.
 * A restore already running ends normally and its block is cached.
 */
void kc_restore_cancel(struct kd_cache *c, struct kc_entry *e)
{
	struct migrate_job *job = e->job;

	if (!e->rblk || !job || e->restore_cancelled)
		return;
	if (kd_fifo_linked(&c->staging, &e->staging)) {
		kd_fifo_unlink(&c->staging, &e->staging);
		e->restore_cancelled = true;
		c->st.restores_cancelled++;
		job->state = MIGRATE_CANCELLED; /* never ran */
		job->result = -ECANCELED;
		kc_restore_done(c, job);
		return;
	}
	if (c->mig && migrate_cancel(c->mig, job) == 0) {
		e->restore_cancelled = true;
		c->st.restores_cancelled++;
	}
}

/*
 * A restore job ended (reaped, or cancelled before it reached the
 * engine).  The staging slot goes back at once (a burst of
 * NVMe restores needs the slots), the rest waits for kc_settle() on the
 * loop, where the waiting PREFIX_OPENs get the block.
 */
void kc_restore_done(struct kd_cache *c, struct migrate_job *job)
{
	struct kc_entry *e = job->owner;

	/* DONE: the staging copy is READY, the pages have the bytes; failed
	 * or cancelled: the engine freed it already */
	if (job->kind == MIGRATE_NVME_TO_GPU &&
	    job->host_slot != MIGRATE_NO_SLOT) {
		tier_host_free(c->host, job->host_slot);
		job->host_slot = MIGRATE_NO_SLOT;
	}
	e->restored_next = c->restored;
	c->restored = e;
	c->nr_restored++;
	if (!c->settle_timer.armed)
		kd_timer_arm(&c->d->loop, &c->settle_timer, 0);
}

void kc_prefix_attach(struct kd_region *r, struct kd_seq *q, uint32_t b,
		      struct kd_block *blk)
{
	struct kd_session *s = r->owner;

	q->blocks[b] = blk;
	blk->refcnt++;
	s->pages_owned += blk->nr_pages;
}

/* Sequence pr->seq still holds blk at block i (an early open's attached
 * restore: the sequence may have been cut or revoked since). */
static bool kc_early_holds(struct kc_pending *pr, struct kd_region *r,
			   uint32_t i, struct kd_block *blk)
{
	struct kd_seq *q;

	if (!r || kd_seq_lookup(r, pr->seq, &q))
		return false;
	return q->gen == pr->gen && kd_seq_block(q, i) == blk;
}

/* Is there a hole (a block in no tier) before block i of pr? */
static bool kc_after_hole(const struct kc_pending *pr, uint32_t i)
{
	for (uint32_t j = 0; j < i; j++)
		if (pr->from[j] >= POL_TIER_COUNT)
			return true;
	return false;
}

/*
 * Give a restored block (blk) to every pending open waiting for e, or
 * fail their waits (blk NULL).  An early open's sequence holds the pages
 * already (att): they are READY now, or FAILED: the client recomputes
 * them (SEQ_WAIT_READY says so).  Returns how many sequences took it, and
 * the position in the first that took it (the pending list is newest
 * first), whether its request was short (POL_BLOCK_FEW_NEW or 0) and its
 * tenant, for the policy.
 */
static uint32_t kc_restore_hand_out(struct kd_cache *c, struct kc_entry *e,
				    struct kd_block *blk, unsigned int from,
				    uint32_t *pos, unsigned int *few,
				    uint32_t *tenant)
{
	uint32_t taken = 0;

	for (struct kc_pending *pr = c->pending; pr; pr = pr->next) {
		struct kd_region *r = NULL;

		if (!pr->nwait)
			continue;
		/* an early open's session is not paused after the reply:
		 * its region may be gone (kd_cache_seq_cut() said so) */
		if (blk && kd_region_lookup(pr->s, pr->region_id, &r))
			r = NULL;
		for (uint32_t i = 0; i < pr->lim; i++) {
			if (pr->state[i] != KC_SLOT_WAIT ||
			    pr->hashes[i] != e->hash)
				continue;
			pr->nwait--;
			if (pr->replied) /* an early open's waiter asks again */
				kd_ring_notify(pr->s);
			if (!r) {
				pr->state[i] = KC_SLOT_FAILED;
				/* after an early reply: the client recomputes
				 * it (before, the prefix stops there) */
				if (!blk && pr->replied)
					c->st.early_reload_failures++;
				continue;
			}
			if (pr->att[i]) {
				pr->state[i] = KC_SLOT_READY;
				if (!kc_early_holds(pr, r, i, blk))
					continue; /* let go of meanwhile */
				if (pr->replied) {
					/* handed out loading: a hit now */
					kc_count_hit(c, pr, pr->from[i]);
					c->st.prefix_blocks_hit++;
					if (kc_after_hole(pr, i))
						c->st.prefix_blocks_after_hole++;
				}
				e->uses++;
				if (!taken++) {
					*pos = i;
					*few = r->seqs[pr->seq].few_new ?
						       POL_BLOCK_FEW_NEW :
						       0;
					*tenant = pr->tenant;
				}
				continue;
			}
			kc_prefix_attach(r, &r->seqs[pr->seq], i, blk);
			pr->state[i] = KC_SLOT_READY;
			pr->from[i] = (uint8_t)from;
			pr->acts[i] = from == POL_TIER_HOST ?
					      KVMM_BLOCK_RELOADED_HOST :
					      KVMM_BLOCK_RELOADED_NVME;
			e->uses++;
			if (!taken++) {
				*pos = i;
				*few = r->seqs[pr->seq].few_new ?
					       POL_BLOCK_FEW_NEW :
					       0;
				*tenant = pr->tenant;
			}
		}
	}
	return taken;
}

/*
 * e's restore could not wait for its copy (-EINPROGRESS): the copy may
 * still land in blk's pages, which never go back to the pool.  An early
 * open's sequence that holds them since its reply must not keep them
 * either: told the reload failed, the client would recompute the block
 * in those pages and the late copy could overwrite its work.  So the
 * sequence is revoked from that block on, as the admin's revocation
 * does: SEQ_WAIT_READY over it answers -ERANGE, the client unmaps the
 * pages and extends onto fresh ones to recompute.  A session whose
 * revocation cannot be posted whole (no ring, no room) is cut off
 * instead: its holds are quarantined until its process exits.
 */
static void kc_restore_take_back(struct kd_cache *c, struct kc_entry *e,
				 struct kd_block *blk)
{
	for (struct kc_pending *pr = c->pending; pr; pr = pr->next) {
		struct kd_region *r;

		if (!pr->replied || !pr->nwait ||
		    kd_region_lookup(pr->s, pr->region_id, &r))
			continue;
		for (uint32_t i = 0; i < pr->lim; i++) {
			uint32_t from = i;
			int err;

			if (pr->state[i] != KC_SLOT_WAIT || !pr->att[i] ||
			    pr->hashes[i] != e->hash ||
			    !kc_early_holds(pr, r, i, blk))
				continue;
			/* a reload that failed after the reply, as any */
			c->st.early_reload_failures++;
			err = kd_revoke_seq(pr->s, r, pr->seq, i, &from);
			if (!err || err == -EAGAIN)
				kd_cache_seq_cut(r, pr->seq, from);
			vmm_log(err ? VMM_LOG_ERR : VMM_LOG_WARN,
				"cache: session %u region %u seq %u: block %u's reload may still land in its pages: %s",
				pr->s->id, pr->region_id, pr->seq, i,
				err ? "no revocation, session cut off" :
				      "revoked from there");
			if (err)
				kd_session_doom(
					pr->s, "pages a late copy may land in");
			break; /* one block of pr has blk at most */
		}
	}
}

/*
 * Whether a restored block stays cached in its lower tier: the policy
 * would refuse to take it (pol_cache_can_access(), the test
 * pol_cache_access() makes first): the GPU tier has no victim to make
 * room with (every block there in use, pinned or held by a TTL, or only
 * the block's parent) and the block cannot be its own victim on the GPU
 * either (a client's pin or TTL holds it).  The settle frees the lower
 * copy before the policy call, so it must not find that out from the
 * call.  A block that can be its own victim goes up and straight back
 * down, copied from the sequences' pages, and the policy sees the use.
 * (This asked whether the block was evictable where it was, below: under
 * the prefix rule one whose children are cached below with it is not,
 * though on the GPU it is a leaf and its own victim, so such a block
 * stayed below and the policy never saw its reload: kvmm-replay --daemon
 * and --model-daemon parted where a request was longer than the GPU
 * tier.)
 */
static bool kc_restore_stays_below(struct kd_cache *c, struct kc_entry *e)
{
	if (!e->in_pol)
		return false;
	pol_cache_set_clock(c->pol, kd_now_ns()); /* TTLs against now */
	return !pol_cache_can_access(c->pol, e->hash);
}

/* A restore job reaped: the block goes to the waiting opens and into the
 * cache's GPU tier, or the waits fail (a miss for them). */
void kc_restore_settle(struct kd_cache *c, struct kc_entry *e)
{
	struct migrate_job *job = e->job;
	struct kd_block *blk = e->rblk;
	unsigned int from = e->tier;
	/* tenant: an opener that took it, else the one that started it */
	uint32_t pos = e->position, taken, tenant = e->restore_tenant;
	unsigned int few = 0;
	uint64_t waited;
	bool was_in_pol;

	e->job = NULL;
	e->rblk = NULL;
	e->rblk_lent = false;
	e->restore_cancelled = false;
	if (e->restore_pinned) {
		e->restore_pinned = false;
		if (e->in_pol)
			(void)pol_cache_unpin(c->pol, e->hash);
	}
	/* the tier dropped the block (a failed check, or reads that kept
	 * failing): its slot may hold another block soon, never free it */
	if (job->nvme_dropped)
		e->nvme_slot = MIGRATE_NO_SLOT;
	if (job->state != MIGRATE_DONE) {
		/* a failed check is the tier's count (checksum_failures) */
		if (job->state == MIGRATE_FAILED && job->result != -EBADMSG) {
			c->st.migrations_failed++;
			vmm_log(VMM_LOG_WARN,
				"cache: %s restore of block %016llx failed: %s",
				migrate_kind_string(job->kind),
				(unsigned long long)job->hash,
				strerror(-job->result));
		}
		/* the backend could not wait for the copy (-EINPROGRESS):
		 * it may still land in the pages, which then never go
		 * back to the pool */
		if (job->result == -EINPROGRESS) {
			blk->abandoned = true;
			kc_restore_take_back(c, e, blk);
		}
		migrate_job_free(job);
		kd_block_put(c->d,
			     blk); /* an early open's sequence may keep it */
		kc_restore_hand_out(c, e, NULL, from, &pos, &few, &tenant);
		if (e->dead)
			return; /* kc_reap_dead() frees it */
		if (e->drop_after || (e->nvme_slot == MIGRATE_NO_SLOT &&
				      e->host_slot == MIGRATE_NO_SLOT)) {
			/* lost with the tier's copy (bad CRC, reads that kept
			 * failing); a drop_after block was counted when the
			 * policy dropped it */
			if (!e->drop_after) {
				c->st.tiers[from].drops++;
				kvmm_tel_evict(c->d->tel_local, e->hash, from,
					       c->block_bytes);
			}
			if (e->in_pol) {
				kc_kill(c, e);
			} else {
				kc_release(c, e);
				kc_free(c, e);
			}
		}
		return;
	}
	waited = job->end_ns - job->submit_ns;
	c->st.tiers[from].promotions_out++;
	c->st.tiers[from].bytes_out += c->block_bytes;
	c->st.tiers[from].restore_ns += waited;
	if (waited > c->st.tiers[from].restore_max_ns)
		c->st.tiers[from].restore_max_ns = waited;
	/* the shm fallback's restore record (the engine fired the USDT
	 * probe when the job completed: not twice) */
	kvmm_tel_shm_event(c->d->tel_local, KVMM_TEL_RESTORE, from,
			   KVMM_TEL_TIER_GPU, 0, job->end_ns - job->start_ns,
			   c->block_bytes, 1);
	migrate_job_free(job);
	if (!e->dead && !e->drop_after && kc_restore_stays_below(c, e)) {
		/* the sequences keep the pages as their own (no hash on
		 * them: not the cache's copy), the block its lower copy */
		kc_restore_hand_out(c, e, blk, from, &pos, &few, &tenant);
		kd_block_put(c->d, blk);
		return;
	}
	/* the block is on the GPU now; the lower copy goes (exclusive).  A
	 * cold block is about to be charged to tenant: its NVMe slot's
	 * stale copy is that tenant's; one whose header named its tenant
	 * stays that tenant's (cache_recover.c) */
	if (!e->in_pol && !e->cold_counted)
		e->tenant = tenant;
	kc_release_lower(c, e);
	/* the sequences take the block first, so the policy cannot pick it
	 * as its own victim while they hold it */
	taken = kc_restore_hand_out(c, e, blk, from, &pos, &few, &tenant);
	if (e->dead || e->drop_after) {
		/* dropped while it was restored: the sequences keep their
		 * pages, the cache does not */
		kd_block_put(c->d, blk);
		if (e->drop_after) {
			kc_release(c, e);
			kc_free(c, e);
		}
		return;
	}
	kc_set_block(c, e, blk);
	blk->hash = e->hash;
	kc_set_tier(c, e, POL_TIER_GPU);
	/* the policy: a promotion (an admission for a recovered block), and
	 * a reference per sequence that took it */
	struct pol_block_desc desc = {
		.hash = e->hash,
		.parent_hash = e->parent,
		.position = pos,
		/* a recovered block is charged to its header's tenant, as a
		 * block stays charged to whoever cached it */
		.tenant = e->cold_counted ? e->tenant : tenant
	};

	if (e->parent)
		desc.flags = POL_BLOCK_HAS_PARENT;
	desc.flags |= few;
	was_in_pol = e->in_pol;
	if (pol_cache_access(c->pol, &desc, NULL) == 0 && !e->dead) {
		e->in_pol = true;
		/* unless the policy sent it straight down (copied from the
		 * sequences' pages, kc_move()) */
		for (uint32_t i = 0; e->tier == POL_TIER_GPU && i < taken; i++)
			(void)pol_cache_ref(c->pol, e->hash);
	} else if (!was_in_pol && !e->dead) {
		/* no room to cache it: the sequences own it */
		e->in_pol = false;
		kc_put_block(c, e);
		kc_free(c, e);
	}
}
