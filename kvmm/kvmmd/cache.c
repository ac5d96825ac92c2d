// SPDX-License-Identifier: MIT
/*
 * kvmmd's block cache: the entry index (hash -> entry) and an entry's
 * life (its GPU block, its lower slots, its death and reaping), the
 * cache of each block size (kc_for()), and what the rest of kvmmd looks
 * up in them (pins, policies, tenant limits).  Publish is in
 * cache_publish.c, TIER_STATS in cache_stats.c, the set-up of the tiers
 * and the policy in cache_setup.c, the stop in cache_stop.c, demotion in
 * cache_demote.c, restores in cache_restore.c, prefix open in
 * cache_prefix.c (cache_priv.h lists them).  See cache.h for the model.
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
	kc_cold_end(c, e, KC_COLD_DROPPED); /* left the cache while cold */
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
struct kd_block *kc_unset_block(struct kd_cache *c, struct kc_entry *e)
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

int kd_cache_pin_target(struct kd_daemon *d, const struct kd_session *s,
			uint64_t hash, bool admit, struct pol_cache **pol,
			unsigned *tier, uint64_t *gen, uint64_t *bytes)
{
	struct kd_cache *c = NULL;
	struct kc_entry *e = kc_find_any(d, hash, &c);
	int err;

	if (!e || e->dead || e->drop_after)
		return -ENOENT;
	/* a block a restart found on NVMe, which no open used yet: the
	 * policy takes it in there, to hold it (cache_recover.c) */
	if (!e->in_pol) {
		err = admit ? kc_cold_admit(c, e, s) : -EDQUOT;
		if (err)
			return err;
	}
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
