// SPDX-License-Identifier: MIT
/*
 * kvmmd's block cache: the entry index, publish, pins and tier counters.
 * The set-up of the tiers and the policy is in cache_setup.c, the stop in
 * cache_stop.c, demotion in cache_demote.c, restores in cache_restore.c,
 * prefix open in cache_prefix.c (cache_priv.h lists them).  See cache.h
 * for the model.
 *
 * Everything here runs on the event-loop thread; the migration workers
 * only touch job memory and tier slots, and hand jobs back through the
 * engine's eventfd.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"

struct kc_entry *kc_find(struct kd_cache *c, uint64_t hash)
{
	for (struct kd_hnode *n = kd_htab_first(&c->index, hash); n;
	     n = n->next)
		if (n->key == hash)
			return kc_of(n);
	return NULL;
}

struct kc_entry *kc_add(struct kd_cache *c, uint64_t hash)
{
	struct kc_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->hash = hash;
	e->gen = ++c->next_gen;
	e->host_slot = e->nvme_slot = MIGRATE_NO_SLOT;
	e->tenant = TIER_NVME_NOBODY; /* until the policy charges someone */
	/* block hashes are XXH3 output: the low bits are as good as any */
	e->node.key = hash;
	kd_htab_add(&c->index, &e->node);
	return e;
}

void kc_set_tier(struct kd_cache *c, struct kc_entry *e, unsigned tier)
{
	if (e->tier != POL_TIER_GPU && e->tier < POL_TIER_COUNT)
		kd_fifo_unlink(&c->below[e->tier], &e->below);
	e->tier = (uint8_t)tier;
	if (tier != POL_TIER_GPU && tier < POL_TIER_COUNT)
		kd_fifo_push_tail(&c->below[tier], &e->below);
}

void kc_free(struct kd_cache *c, struct kc_entry *e)
{
	kc_set_tier(c, e, POL_TIER_GPU); /* off the lists below */
	kc_cold_end(c, e, true); /* left the cache while cold */
	if (kd_fifo_linked(&c->cold, &e->cold))
		kd_fifo_unlink(&c->cold, &e->cold);
	if (!e->unhashed)
		kd_htab_del(&c->index, &e->node);
	free(e);
}

/* blk becomes e's GPU copy (the caller took the cache's reference): its
 * pages count as cached in the quota that pays for them, which a check
 * over the limit reclaims (cache_quota.c). */
void kc_set_block(struct kd_cache *c, struct kc_entry *e, struct kd_block *blk)
{
	e->blk = blk;
	kd_fifo_push_tail(&c->gpu, &e->gpu);
	if (blk->charged)
		blk->charged->cached_pages += blk->nr_pages;
}

/* e no longer holds its GPU copy (the caller puts the reference). */
static struct kd_block *kc_unset_block(struct kd_cache *c, struct kc_entry *e)
{
	struct kd_block *blk = e->blk;

	if (!blk)
		return NULL;
	e->blk = NULL;
	kd_fifo_unlink(&c->gpu, &e->gpu);
	if (blk->charged)
		blk->charged->cached_pages -= blk->nr_pages;
	return blk;
}

/* Drop the cache's reference on a GPU block (no policy callback: the
 * hash is cleared first when no sequence uses it any more). */
void kc_put_block(struct kd_cache *c, struct kc_entry *e)
{
	/* unset first, so the unref hook does not count it */
	struct kd_block *blk = kc_unset_block(c, e);

	if (!blk)
		return;
	blk->hash = 0; /* no longer the cache's copy */
	kd_block_put(c->d, blk);
}

/* Drop the cache's reference on a GPU block whose pages sequences hold
 * once its copy went down (cache_demote.c, held_copy): they keep its
 * hash, so their publish of it again is a duplicate; the unref hook finds
 * no GPU copy of that entry and tells the policy nothing. */
void kc_leave_block(struct kd_cache *c, struct kc_entry *e)
{
	struct kd_block *blk = kc_unset_block(c, e);

	if (!blk)
		return;
	kd_block_put(c->d, blk);
}

/*
 * A lower tier refused to free a slot the cache let go of: tier_nvme_free()
 * keeps one a read is in flight on (-EBUSY) or that is not READY
 * (-ENOENT), tier_host_free() refuses one that is free already.  None of
 * the callers can meet that (kc_release_lower()); should a change make
 * one, an NVMe slot would stay taken for the rest of the run with nobody
 * to free it, one less for the tier each time, so it is said (the first
 * time, then at each power of two) and counted rather than ignored
 * (TIER_STATS lower_free_refused).
 */
void kc_free_refused(struct kd_cache *c, const char *tier, uint32_t slot,
		     uint64_t hash, int err)
{
	uint64_t n = ++c->st.lower_free_refused; /* TIER_STATS */

	if (n & (n - 1))
		return;
	vmm_log(VMM_LOG_WARN,
		"cache: %s slot %u (block %016llx) not freed: %s; %llu such refusals so far (a bug: an NVMe slot refused stays taken until kvmmd restarts)",
		tier, slot, (unsigned long long)hash, strerror(-err),
		(unsigned long long)n);
}

/*
 * Free the entry's host and NVMe slots (its GPU copy, if any, stays).
 * The NVMe slot is freed in memory only: its header on disk still names
 * the block, which a restart recovers (warm), and which the tier keeps
 * as a stale copy of the block's tenant for a drop to find.  No
 * copy reads or fills them now: every caller has e->job NULL (an entry
 * dropped with a move or restore in flight is drop_after, released once
 * its job was reaped, and an NVMe read lets go of its slot before its job
 * completes), so the tiers cannot refuse; kc_free_refused() if they do.
 */
void kc_release_lower(struct kd_cache *c, struct kc_entry *e)
{
	int err;

	if (e->host_slot != MIGRATE_NO_SLOT) {
		err = tier_host_free(c->host, e->host_slot);
		if (err)
			kc_free_refused(c, "host", e->host_slot, e->hash, err);
		e->host_slot = MIGRATE_NO_SLOT;
	}
	if (e->nvme_slot != MIGRATE_NO_SLOT) {
		err = tier_nvme_free_tenant(c->nvme, e->nvme_slot, e->tenant);
		if (err)
			kc_free_refused(c, "NVMe", e->nvme_slot, e->hash, err);
		e->nvme_slot = MIGRATE_NO_SLOT;
		kc_nvme_kick(c);
	}
}

/* Free whatever bytes the entry holds in every tier. */
void kc_release(struct kd_cache *c, struct kc_entry *e)
{
	kc_put_block(c, e);
	kc_release_lower(c, e);
}

/*
 * An entry that lost its bytes: forget it after the policy call.  One the
 * policy still tracks (in_pol) is a drop kvmmd made outside its
 * decisions (kc_lose(), an NVMe admission refused, a restore that lost
 * the lower copy): kc_reap_dead() counts it as a drop of the policy's
 * (its tenant's dropped_blocks), as kvmmd counted it in a tier's drops.
 * The policy's own drops (kc_move() to POL_TIER_NONE) are counted there
 * and reach here no longer in_pol.
 */
void kc_kill(struct kd_cache *c, struct kc_entry *e)
{
	if (e->dead)
		return;
	e->dead = true;
	e->dead_next = c->dead;
	c->dead = e;
}

void kc_reap_dead(struct kd_cache *c)
{
	while (c->dead) {
		struct kc_entry *e = c->dead;

		c->dead = e->dead_next;
		if (e->in_pol) {
			e->in_pol = false;
			pol_cache_remove_dropped(c->pol, e->hash);
			kd_pin_block_gone(c->d, e->hash, e->gen);
		}
		/* a demotion waiting for a host slot never started */
		if (e->job && !kc_demote_unqueue(c, e)) {
			/* a job reads or fills these bytes: released and freed
			 * when it ends */
			e->drop_after = true;
			e->dead = false;
			continue;
		}
		kc_release(c, e);
		kc_free(c, e);
	}
}

void kc_say_uncached(struct kd_cache *c, struct kd_region *r)
{
	struct kd_daemon *d = c->d;
	char sizes[16 * KD_CACHE_SIZES] = "";
	size_t at = 0;
	uint32_t i;

	if (r->uncached_logged)
		return;
	r->uncached_logged = true;
	kc_for_each(d, c, i) {
		uint32_t ppb = c->opened ? c->ppb : c->named_ppb;

		if (ppb && at < sizeof(sizes))
			at += snprintf(sizes + at, sizeof(sizes) - at, "%s%u",
				       at ? "," : "", ppb);
	}
	vmm_log(VMM_LOG_WARN,
		"cache: region %u of session %u (%s) has blocks of %u pages, the cache's have %s (%s%s): its blocks are not cached",
		r->id, r->owner->id, r->owner->name, r->pages_per_block, sizes,
		d->cfg.cache_block_pages ?
			"--cache-block-pages" :
		d->nr_caches > 1 ?
			"the first regions to use it, sizes at most " :
			"the first region to use it",
		d->cfg.cache_block_pages || d->nr_caches < 2 ?
			"" :
			KD_CACHE_SIZES_STR);
}

/*
 * One cache a block size: the one opened for ppb, or named for it; else
 * the first while no region has taken it (as when one model ran); else a
 * new one while fewer than KD_CACHE_SIZES are, and none was named (the
 * operator's list is the whole list).
 */
int kc_for(struct kd_daemon *d, uint32_t ppb, struct kd_cache **out)
{
	struct kd_cache *c;
	uint32_t i;

	*out = d->cache;
	if (!d->cache)
		return -EXDEV;
	kc_for_each(d, c, i) {
		if ((c->opened && c->ppb == ppb) || c->named_ppb == ppb) {
			*out = c;
			return kc_open(c, ppb);
		}
	}
	if (d->cfg.cache_block_pages)
		return -EXDEV; /* the operator's list is the whole list */
	if (!d->cache->opened)
		return kc_open(d->cache, ppb); /* the first size */
	if (d->nr_caches == KD_CACHE_SIZES)
		return -EXDEV;
	c = kc_new(d);
	if (!c)
		return -ENOMEM;
	c->idx = d->nr_caches;
	c->named_ppb = ppb; /* its size from now on */
	if (kc_open_test_init(c)) {
		kd_htab_fini(&c->index);
		free(c);
		return -EXDEV;
	}
	d->caches[d->nr_caches++] = c;
	*out = c;
	return kc_open(c, ppb);
}

struct kd_cache *kc_of_region(struct kd_daemon *d, const struct kd_region *r)
{
	struct kd_cache *c;
	uint32_t i;

	kc_for_each(d, c, i)
		if (c->opened && c->ppb == r->pages_per_block)
			return c;
	return NULL;
}

void kd_cache_block_unref(struct kd_daemon *d, struct kd_block *blk)
{
	struct kd_cache *c;
	struct kc_entry *e;
	uint32_t i;

	if (!blk->hash)
		return;
	kc_for_each(d, c, i) {
		if (!c->pol || c->ppb != blk->nr_pages)
			continue;
		e = kc_find(c, blk->hash);
		/* a held block being copied down (held_copy) is not the
		 * policy's GPU block any more: its references were never
		 * taken */
		if (e && e->blk == blk && e->in_pol && e->tier == POL_TIER_GPU)
			pol_cache_unref(c->pol, blk->hash);
	}
}

/* The cached entry of hash in any size's cache (hashes of two sizes
 * never meet: their layouts seed them), and its cache. */
static struct kc_entry *kc_find_any(struct kd_daemon *d, uint64_t hash,
				    struct kd_cache **out)
{
	struct kd_cache *c;
	struct kc_entry *e;
	uint32_t i;

	kc_for_each(d, c, i) {
		e = c->pol ? kc_find(c, hash) : NULL;
		if (e) {
			*out = c;
			return e;
		}
	}
	return NULL;
}

int kd_cache_pin_target(struct kd_daemon *d, uint64_t hash,
			struct pol_cache **pol, unsigned *tier, uint64_t *gen,
			uint64_t *bytes)
{
	struct kd_cache *c = NULL;
	struct kc_entry *e = kc_find_any(d, hash, &c);

	if (!e || !e->in_pol || e->dead || e->drop_after)
		return -ENOENT;
	*pol = c->pol;
	*tier = e->tier;
	*gen = e->gen;
	*bytes = c->block_bytes;
	return 0;
}

struct pol_cache *kd_cache_pin_policy(struct kd_daemon *d, uint64_t hash,
				      uint64_t gen)
{
	struct kd_cache *c = NULL;
	struct kc_entry *e = kc_find_any(d, hash, &c);

	return e && e->gen == gen && e->in_pol ? c->pol : NULL;
}

uint64_t kd_cache_gpu_capacity(struct kd_daemon *d)
{
	struct kd_cache *c;
	uint64_t sum = 0;
	uint32_t i;

	kc_for_each(d, c, i)
		if (c->pol)
			sum += pol_cache_capacity(c->pol, POL_TIER_GPU);
	return sum;
}

int kd_cache_tenant_limit(struct kd_daemon *d, uint32_t id,
			  const uint64_t limit[POL_TIER_COUNT])
{
	struct kd_cache *c;
	uint32_t i;
	int err = 0;

	/* blocks of each size count against the limit apart (a size
	 * not open yet: kd_tenant_limits_apply() when it is made) */
	kc_for_each(d, c, i) {
		uint64_t lim[POL_TIER_COUNT];

		if (!c->pol)
			continue;
		/* a later size without the host (or NVMe) tier has no
		 * limit there */
		for (int t = 0; t < POL_TIER_COUNT; t++)
			lim[t] = i && !pol_cache_has_tier(c->pol, t) ? 0 :
								       limit[t];
		pol_cache_set_clock(c->pol, kd_now_ns()); /* TTLs: now */
		err = pol_cache_tenant_limit(c->pol, id, lim);
		kc_reap_dead(c);
		if (err)
			break;
		kc_cold_limit(c, id, 0); /* its blocks the restart found */
	}
	return err;
}

const struct pol_cache *kd_cache_policy(const struct kd_daemon *d)
{
	return d->cache ? d->cache->pol : NULL;
}

const struct pol_cache *kd_cache_policy_at(const struct kd_daemon *d,
					   uint32_t i)
{
	return i < d->nr_caches ? d->caches[i]->pol : NULL;
}

uint32_t kd_cache_size_at(const struct kd_daemon *d, uint32_t i)
{
	return i < d->nr_caches ? kc_size(d->caches[i]) : 0;
}

/* A variable-length command: the struct, then n u64 (copied into a new
 * array the caller frees: the message buffer need not be aligned). */
int kc_copy_var(void *out, size_t known, const void *p, size_t len,
		uint32_t n_off, uint64_t **tail, uint32_t *n)
{
	uint32_t size, count;

	if (len < known)
		return -EINVAL;
	memcpy(&size, p, sizeof(size));
	memcpy(&count, (const char *)p + n_off, sizeof(count));
	if (size < known || count > KVMM_PREFIX_MAX_BLOCKS ||
	    len != size + count * 8ull)
		return -EINVAL;
	/* a newer client's larger struct: what we do not know must be
	 * zero (the openat2() rule of every fixed-size command) */
	for (size_t i = known; i < size; i++)
		if (((const unsigned char *)p)[i])
			return -E2BIG;
	memcpy(out, p, known);
	*tail = malloc(count * sizeof(uint64_t) + 1);
	if (!*tail)
		return -ENOMEM;
	memcpy(*tail, (const char *)p + size, count * sizeof(uint64_t));
	*n = count;
	return 0;
}

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
		if (!kd_seq_revoked(q, b) || s->client_minor < KD_REVOKED_MINOR)
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
	if (!err)
		kd_session_reply(s, h, 0, &rep, sizeof(rep), NULL, 0);
out:
	free(hashes);
	return err;
}

/* One size's TIER_STATS. */
static void kc_tier_stats_one(struct kd_cache *c,
			      struct kvmm_tier_stats_reply *st)
{
	*st = c->st;
	/* reaped, not yet settled: still in flight for whoever waits */
	st->migrations_in_flight += c->nr_restored;
	if (c->pol)
		for (int t = 0; t < POL_TIER_COUNT; t++)
			st->tiers[t].used_blocks = pol_cache_count(c->pol, t);
	kc_open_stats(c, st);
	kc_nvme_stats(c, st);
	kc_nvme_write_stats(c, st);
	if (c->nvme) {
		struct tier_nvme_stats ns;

		tier_nvme_get_stats(c->nvme, &ns);
		/* opened at start for the blocks the file held, before the
		 * first region: what it found, and their size (the cache's is
		 * not known yet) */
		if (!c->opened) {
			st->recovered_blocks = ns.recovered_slots;
			st->tiers[POL_TIER_NVME].block_bytes = ns.payload_bytes;
		}
		st->checksum_failures = ns.checksum_failures;
		st->nvme_read_error_drops = ns.read_error_drops;
		/* what the disk holds against what --nvme-size allows */
		st->tiers[POL_TIER_NVME].used_blocks = ns.used_slots;
		st->tiers[POL_TIER_NVME].capacity_blocks = ns.capacity_slots;
	}
	if (c->host) {
		struct tier_host_stats hs;

		tier_host_get_stats(c->host, &hs);
		st->tiers[POL_TIER_HOST].used_blocks = hs.used_slots;
		st->tiers[POL_TIER_HOST].capacity_blocks = hs.capacity_slots;
	}
}

/*
 * Another size's counters added to the first's (what TIER_STATS has room
 * for is one figure each: the sum; block_bytes stays the first size's,
 * restore_max_ns the largest; the NVMe tier's open and write errors and
 * the set-up's are the first size's, TIER_STATS of one size says the
 * others').  Each named size's NVMe partition adds its slots, as its
 * host tier does.
 */
static void kc_tier_stats_add(struct kvmm_tier_stats_reply *st,
			      const struct kvmm_tier_stats_reply *o)
{
#define ADD(f) (st->f += o->f)
	ADD(publishes);
	ADD(duplicates);
	ADD(not_cached);
	ADD(prefix_opens);
	ADD(prefix_blocks_asked);
	ADD(prefix_blocks_hit);
	ADD(misses);
	ADD(busy_misses);
	ADD(migrations_failed);
	ADD(migrations_in_flight);
	ADD(slot_waits);
	ADD(pressure_reclaims);
	ADD(restores_waited);
	ADD(prefix_opens_pending);
	ADD(restores_cancelled);
	ADD(prefix_holes);
	ADD(prefix_blocks_after_hole);
	ADD(plan_recomputes_host);
	ADD(plan_recomputes_nvme);
	ADD(held_copies);
	ADD(early_opens);
	ADD(early_reloads);
	ADD(early_reload_failures);
	ADD(quota_reclaims);
	ADD(lower_free_refused);
	ADD(checksum_failures);
	ADD(nvme_read_error_drops);
	ADD(recovered_blocks);
	for (int t = 0; t < POL_TIER_COUNT; t++) {
		struct kvmm_tier_info *a = &st->tiers[t];
		const struct kvmm_tier_info *b = &o->tiers[t];

		a->capacity_blocks += b->capacity_blocks;
		a->used_blocks += b->used_blocks;
		if (!a->block_bytes)
			a->block_bytes = b->block_bytes;
		a->hits += b->hits;
		a->demotions_in += b->demotions_in;
		a->promotions_out += b->promotions_out;
		a->drops += b->drops;
		a->bytes_in += b->bytes_in;
		a->bytes_out += b->bytes_out;
		a->restore_ns += b->restore_ns;
		if (b->restore_max_ns > a->restore_max_ns)
			a->restore_max_ns = b->restore_max_ns;
		a->promotions_by_publish += b->promotions_by_publish;
	}
	if (!st->cache_open_error)
		st->cache_open_error = o->cache_open_error;
	ADD(cache_open_attempts);
#undef ADD
}

/* c's block size: opened, or named (--cache-block-pages, or a later
 * size's cache before its tiers opened); 0 while the first is unknown. */
/* the sizes TIER_STATS' sizes[] lists (kvmmctl metrics asks for each,
 * and the two exporters agree) */
int kd_cache_size_stats(struct kd_daemon *d, uint32_t i, uint32_t *pages,
			struct kvmm_tier_stats_reply *st)
{
	if (i >= d->nr_caches || !kc_size(d->caches[i]))
		return -ENOENT;
	*pages = kc_size(d->caches[i]);
	kc_tier_stats_one(d->caches[i], st);
	return 0;
}

/* TIER_STATS' tail (ABI 1.21): the sizes cached, the first first. */
static void kc_tier_stats_sizes(struct kd_daemon *d, uint32_t block_pages,
				struct kvmm_tier_stats_reply *st)
{
	struct kd_cache *c;
	uint32_t i;

	_Static_assert(KD_CACHE_SIZES <= KVMM_TIER_STATS_SIZES,
		       "TIER_STATS has room for every size");
	st->block_pages = block_pages;
	st->nr_sizes = 0;
	memset(st->sizes, 0, sizeof(st->sizes));
	kc_for_each(d, c, i)
		if (kc_size(c))
			st->sizes[st->nr_sizes++] = kc_size(c);
}

int kd_cache_tier_stats(struct kd_daemon *d, struct kvmm_tier_stats_reply *st)
{
	struct kd_cache *c;
	uint32_t i;

	if (!d->cache)
		return -ENODEV;
	kc_tier_stats_one(d->cache, st);
	kc_for_each(d, c, i) {
		struct kvmm_tier_stats_reply o;

		if (!i)
			continue;
		kc_tier_stats_one(c, &o);
		kc_tier_stats_add(st, &o);
	}
	kc_tier_stats_sizes(d, 0, st);
	return 0;
}

int kd_cache_tier_stats_of(struct kd_daemon *d, uint32_t block_pages,
			   struct kvmm_tier_stats_reply *st)
{
	struct kd_cache *c;
	uint32_t i;

	if (!block_pages)
		return kd_cache_tier_stats(d, st);
	if (!d->cache)
		return -ENODEV;
	kc_for_each(d, c, i) {
		if (kc_size(c) != block_pages)
			continue;
		kc_tier_stats_one(c, st);
		kc_tier_stats_sizes(d, block_pages, st);
		return 0;
	}
	return -ENOENT;
}
