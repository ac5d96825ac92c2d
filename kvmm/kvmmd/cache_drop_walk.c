// SPDX-License-Identifier: MIT
/*
 * The walk of an operator's drop (ADMIN_CACHE_DROP, cache_drop.c) in one
 * size's cache: which blocks of the tiers asked for go and which stay
 * (in use, pinned, busy), and the NVMe jobs the reply then waits for,
 * queued here on the loop thread: the drop's mark, the invalidation of
 * each dropped block's header and of the stale copies, the restamp of
 * each block kept on NVMe.  cache_drop.c parses the request, answers it
 * once the last of those jobs is reaped, and says why in its
 * theory-of-operation comment.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/tier_nvme.h"

/* Which stale NVMe copies a drop invalidates (kc_drop_stale()). */
struct kc_stale_match {
	const struct kc_drop *dr;
	bool all; /* the drop includes NVMe: every one (of tenant) */
	bool by_tenant;
	uint32_t tenant;
};

/* Why a block stays (the reply's kept_* words), or KEEP_NONE. */
enum kc_keep {
	KEEP_NONE,
	KEEP_IN_USE,
	KEEP_PINNED,
	KEEP_BUSY,
};

static enum kc_keep kc_drop_keep(struct kd_cache *c, const struct kc_entry *e,
				 uint64_t now)
{
	const struct pol_block *b =
		e->in_pol ? pol_cache_lookup(c->pol, e->hash) : NULL;

	/* a copy down, a restore (staged, running or not settled yet), or
	 * an old write of the block a publish called off (its NVMe slot
	 * becomes a stale copy when it ends, after this drop's walk) */
	if (e->job || e->rblk || e->restore_pinned ||
	    kc_nvme_write_off(c, e->hash))
		return KEEP_BUSY;
	/* before the policy's pins: a client's plain pin is one of them */
	if ((b && b->ttl_expiry > now) ||
	    kd_pin_block_kept(c->d, e->hash, e->gen))
		return KEEP_PINNED;
	if ((e->blk && e->blk->refcnt > 1) || (b && (b->refcount || b->pins)))
		return KEEP_IN_USE;
	return KEEP_NONE;
}

/*
 * Have e's NVMe slot invalidated on disk (and freed) by a job of dr's;
 * e keeps no slot.  False when no job could be made: the slot is freed
 * in memory only, as an eviction's is.
 */
static bool kc_drop_invalidate(struct kd_cache *c, struct kc_drop *dr,
			       struct kc_entry *e)
{
	struct migrate_job *job = NULL;
	uint32_t slot = e->nvme_slot;
	int err;

	e->nvme_slot = MIGRATE_NO_SLOT;
	if (c->mig && !c->closing)
		job = migrate_job_new(MIGRATE_NVME_INVALIDATE, 0);
	/*
	 * Claimed now, not when a worker gets to the job: until then a
	 * READY slot of this hash is what a host -> NVMe write of the same
	 * block would deduplicate onto, and the invalidation would then zero
	 * and free a slot that entry holds.  Claimed, the write waits for the
	 * slot to be freed and takes a fresh one.
	 */
	if (job && !tier_nvme_invalidate_claim(c->nvme, slot, e->hash)) {
		job->hash = e->hash;
		job->nvme_slot = slot;
		job->owner = dr;
		if (!migrate_submit(c->mig, job)) {
			c->st.nvme_invalidate_jobs++;
			dr->left++;
			c->nvme_in_flight++; /* gives a slot back (kc_nvme_coming) */
			return true;
		}
		migrate_job_free(job);
		err = tier_nvme_invalidate_unclaim(c->nvme, slot);
		if (err)
			kc_free_refused(c, "NVMe", slot, e->hash, err);
		kc_nvme_kick(c);
		return false;
	}
	if (job)
		migrate_job_free(job);
	err = tier_nvme_free(c->nvme, slot);
	if (err)
		kc_free_refused(c, "NVMe", slot, e->hash, err);
	kc_nvme_kick(c);
	return false;
}

/* Remember that dr dropped hash: its stale NVMe copies go too. */
static void kc_drop_note_hash(struct kc_drop *dr, uint64_t hash)
{
	if (dr->nhashes == dr->cap) {
		size_t cap = dr->cap ? 2 * dr->cap : 64;
		uint64_t *h = realloc(dr->hashes, cap * sizeof(*h));

		if (!h) {
			dr->hashes_lost = true;
			return;
		}
		dr->hashes = h;
		dr->cap = cap;
	}
	dr->hashes[dr->nhashes++] = hash;
}

static int kc_hash_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* tier_nvme_stale_claim()'s match (under the tier's lock) */
static bool kc_stale_match(void *arg, uint64_t hash, uint32_t tenant)
{
	const struct kc_stale_match *m = arg;
	const struct kc_drop *dr = m->dr;

	if (m->all && (!m->by_tenant || tenant == m->tenant))
		return true;
	return dr->nhashes && bsearch(&hash, dr->hashes, dr->nhashes,
				      sizeof(*dr->hashes), kc_hash_cmp);
}

/*
 * Invalidate the stale NVMe copies m names for dr: claimed now, on the
 * loop thread, so that no write takes one of those slots while its job
 * waits; each job then zeroes a header as a dropped block's does.
 */
static void kc_drop_stale(struct kd_cache *c, struct kc_drop *dr,
			  struct kc_stale_match *m)
{
	struct tier_nvme_stale *v;
	uint32_t n, left;
	int err;

	if (!c->nvme || !c->mig || c->closing)
		return;
	if (dr->hashes_lost)
		m->all = true; /* more rather than fewer */
	if (dr->nhashes) /* none: no array to sort (NULL) */
		qsort(dr->hashes, dr->nhashes, sizeof(*dr->hashes),
		      kc_hash_cmp);
	err = tier_nvme_stale_claim(c->nvme, kc_stale_match, m, &v, &n, &left);
	if (err) {
		vmm_log(VMM_LOG_WARN,
			"cache: drop by uid %u: stale NVMe copies not looked for (%s); a restart may find them",
			dr->uid, strerror(-err));
		return;
	}
	/* left: kept free for the writes that reserved them */
	dr->stale_left += left;
	dr->rep.nvme_invalidate_failures += left;
	c->st.nvme_invalidate_failures += left;
	for (uint32_t i = 0; i < n; i++) {
		if (kc_invalidate_stale(c, v[i].hash, v[i].slot, dr)) {
			c->st.nvme_invalidate_jobs++;
			dr->left++;
			continue;
		}
		dr->rep.nvme_invalidate_failures++;
		c->st.nvme_invalidate_failures++;
	}
	free(v);
	kc_nvme_kick(c);
}

/* A drop's NVMe header or mark not written: counted, for its reply too. */
void kc_drop_failed(struct kd_cache *c, struct kc_drop *dr)
{
	dr->rep.nvme_invalidate_failures++;
	c->st.nvme_invalidate_failures++;
}

/*
 * The drop's mark on the NVMe tier (tier_nvme_mark_drop()): every slot
 * written before now, of the tenant's with `--uid`, is dropped for a
 * restart's scan, whether or not the invalidations of its walk ever
 * reach the disk.  A job, as those are, so the loop never waits for the
 * disk, and the reply waits for it; queued first, so that it is not
 * behind them.  Blocks written from now on have larger generations.
 */
static void kc_drop_mark(struct kd_cache *c, struct kc_drop *dr, bool by_tenant,
			 uint32_t tenant)
{
	struct migrate_job *job;

	if (!c->nvme || !c->mig || c->closing)
		return;
	job = migrate_job_new(MIGRATE_NVME_MARK, 0);
	if (job) {
		job->nvme_generation = tier_nvme_drop_generation(c->nvme);
		job->nvme_tenant = by_tenant ? tenant : TIER_NVME_NOBODY;
		job->owner = dr;
		if (!migrate_submit(c->mig, job)) {
			dr->mark = job->nvme_generation;
			dr->marks++;
			/* writes queued before it land below it */
			if (c->nvme_mark_high < dr->mark)
				c->nvme_mark_high = dr->mark;
			dr->left++;
			return;
		}
		migrate_job_free(job);
	}
	vmm_log(VMM_LOG_WARN,
		"cache: drop by uid %u: no NVMe drop mark (no job); a restart may find blocks whose headers are not invalidated",
		dr->uid);
	kc_drop_failed(c, dr);
}

/* The drop in the failure log lines of its restamps (cache_drop_kept.c). */
void kc_drop_who(const struct kc_drop *dr, char *who, size_t len)
{
	snprintf(who, len, "drop by uid %u: ", dr->uid);
}

/* e, kept on NVMe by dr: its header written again above dr's mark, the
 * reply waiting for it (kc_restamp()). */
static void kc_drop_restamp(struct kd_cache *c, struct kc_drop *dr,
			    struct kc_entry *e)
{
	char who[32];
	int r;

	kc_drop_who(dr, who, sizeof(who));
	r = kc_restamp(c, e, dr, who);
	if (r > 0)
		dr->left++;
	else if (r < 0)
		dr->rep.nvme_restamp_failures++;
}

/* Drop e (of tier) for dr, or count why it stays. */
static void kc_drop_one(struct kd_cache *c, struct kc_drop *dr,
			struct kc_entry *e, unsigned tier, uint64_t now)
{
	enum kc_keep why = kc_drop_keep(c, e, now);

	if (why != KEEP_NONE) {
		dr->rep.kept[tier]++;
		if (why == KEEP_IN_USE)
			dr->rep.kept_in_use++;
		else if (why == KEEP_PINNED)
			dr->rep.kept_pinned++;
		else
			dr->rep.kept_busy++;
		/* kept on NVMe, its header below dr's mark: past a
		 * restart too */
		if (tier == POL_TIER_NVME && e->nvme_slot != MIGRATE_NO_SLOT &&
		    c->nvme)
			kc_drop_restamp(c, dr, e);
		return;
	}
	if (tier == POL_TIER_NVME && e->nvme_slot != MIGRATE_NO_SLOT &&
	    c->nvme && !kc_drop_invalidate(c, dr, e))
		kc_drop_failed(c, dr);
	kc_drop_note_hash(dr, e->hash);
	dr->rep.dropped[tier]++;
	c->d->ctr.cache_drop_blocks++;
	/* counted and released as any block kvmmd loses: the tier's drops,
	 * then the policy's (its tenant's dropped) in kc_reap_dead() */
	kc_lose(c, e);
}

/* Whether e is a block of the drop: cached (not on its way out) in tier,
 * of tenant (row: its row in the policy, -1 when it has none) when one is
 * asked for: the policy's blocks charged to that row, and the cold NVMe
 * blocks (found at start, outside the policy) whose header named it
 * (cache_recover.c; one from before the tenants is nobody's). */
static bool kc_drop_match(struct kd_cache *c, const struct kc_entry *e,
			  unsigned tier, bool by_tenant, uint32_t tenant,
			  int row)
{
	const struct pol_block *b;

	/* cppcheck-suppress nullPointer ; the callers' e are of nodes
	 * of a list, never NULL (kd_fifo_entry() maps NULL to NULL) */
	if (e->tier != tier || e->dead || e->drop_after || e->unhashed)
		return false;
	if (!by_tenant)
		return true;
	if (e->cold_counted)
		return e->tenant == tenant;
	b = e->in_pol && row >= 0 ? pol_cache_lookup(c->pol, e->hash) : NULL;
	return b && b->tenant == row;
}

/*
 * The drop in one size's cache: its blocks of the tiers asked for
 * dropped or counted as kept; with its NVMe tier (the first size's, and
 * with several sizes named each size's partition), the drop's mark and
 * the headers' invalidations submitted to its engine (dr->left).
 */
void kc_drop_walk(struct kd_cache *c, struct kc_drop *dr,
		  const struct kvmm_admin_cache_drop *a, bool by_tenant,
		  uint64_t now)
{
	struct kvmm_cache_drop_size *sz = NULL;
	struct kvmm_admin_cache_drop_reply before = dr->rep;
	struct kd_fifo_node *n, *next;
	struct kc_stale_match m;
	int row = -1;

	if (dr->rep.nr_sizes < KVMM_TIER_STATS_SIZES) {
		sz = &dr->rep.sizes[dr->rep.nr_sizes++];
		sz->block_pages = kc_size(c);
	}
	pol_cache_set_clock(c->pol, now); /* TTL pins against now */
	/* before the walks: every block they find is written before it;
	 * of a tenant with no row too (its blocks of an earlier run) */
	if (a->tiers & KVMM_CACHE_DROP_NVME)
		kc_drop_mark(c, dr, by_tenant, a->tenant);
	/* a tenant with no row of its own in the policy has none of its
	 * blocks, but may have cold ones: row -1 */
	if (by_tenant)
		row = pol_cache_tenant_row(c->pol, a->tenant);
	/* walks of the lists of each tier's entries: kc_lose() only marks
	 * an entry dead (kc_reap_dead() unlinks and frees it after) */
	if (a->tiers & KVMM_CACHE_DROP_GPU)
		for (n = kd_fifo_first(&c->gpu); n; n = kd_fifo_next(n)) {
			struct kc_entry *e =
				kd_fifo_entry(n, struct kc_entry, gpu);

			if (kc_drop_match(c, e, POL_TIER_GPU, by_tenant,
					  a->tenant, row))
				kc_drop_one(c, dr, e, POL_TIER_GPU, now);
		}
	for (unsigned t = POL_TIER_HOST; t < POL_TIER_COUNT; t++) {
		if (!(a->tiers & (1u << t)))
			continue;
		for (n = kd_fifo_first(&c->below[t]); n; n = next) {
			struct kc_entry *e =
				kd_fifo_entry(n, struct kc_entry, below);

			next = kd_fifo_next(n);
			if (kc_drop_match(c, e, t, by_tenant, a->tenant, row))
				kc_drop_one(c, dr, e, t, now);
		}
	}
	kc_reap_dead(c);
	/* this size's part of the sums (ABI 1.22) */
	for (unsigned t = 0; sz && t < POL_TIER_COUNT; t++) {
		sz->dropped[t] = dr->rep.dropped[t] - before.dropped[t];
		sz->kept[t] = dr->rep.kept[t] - before.kept[t];
	}
	m = (struct kc_stale_match){ .dr = dr,
				     .all = a->tiers & KVMM_CACHE_DROP_NVME,
				     .by_tenant = by_tenant,
				     .tenant = a->tenant };
	kc_drop_stale(c, dr, &m);
}

bool kc_invalidate_stale(struct kd_cache *c, uint64_t hash, uint32_t slot,
			 void *owner)
{
	struct migrate_job *job = migrate_job_new(MIGRATE_NVME_INVALIDATE, 0);
	int err;

	if (job) {
		job->hash = hash;
		job->nvme_slot = slot;
		job->nvme_stale = true;
		job->owner = owner;
		if (!migrate_submit(c->mig, job)) {
			c->nvme_in_flight++; /* gives a slot back */
			return true;
		}
		migrate_job_free(job);
	}
	err = tier_nvme_invalidate_unclaim(c->nvme, slot);
	if (err)
		kc_free_refused(c, "NVMe", slot, hash, err);
	return false;
}
