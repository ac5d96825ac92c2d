// SPDX-License-Identifier: MIT
/*
 * ADMIN_CACHE_DROP (`kvmmctl cache-drop`): an operator empties the cache,
 * or some tiers of it, or one tenant's blocks, as vLLM's
 * reset_prefix_cache or SGLang's flush_cache do: after a suspected
 * corruption, to free memory, before a cold-start measurement, to remove
 * a tenant's data.
 *
 * A block is dropped the way kvmmd drops one outside the policy's
 * decisions (kc_lose(): a tier's drops, then kc_kill() and kc_reap_dead():
 * pol_cache_remove_dropped() counts it in its tenant's dropped blocks and
 * takes it off the tier's and the tenant's counts, its pin records go,
 * its GPU pages leave the quota's cached pages and go back to the pool,
 * its host slot is freed).  A block in use is never taken, and is
 * counted as kept: one a live sequence maps or an in-flight step pins
 * (the policy's references and pins, and pages a sequence holds), one a
 * client's BLOCK_PIN keeps (a plain pin, a TTL pin not yet past: the
 * pin promised it stays cached), and one with a copy or a restore in
 * flight (its bytes are on their way somewhere; blocks already on their
 * way out are neither dropped nor counted).
 *
 * NVMe: freeing a slot only updates memory, and a restart's scan
 * recovers every slot whose header is valid, so a block the policy
 * evicts may come back after a restart (harmless: still the block its
 * hash names).  A dropped one must not: its slot goes to the migration
 * engine as an NVME_INVALIDATE job, whose worker has the tier zero the
 * header on disk (tier_nvme_invalidate_batch(), the tier's own io_uring
 * queue, then an fsync) and free the slot; the slot is claimed for it at
 * once (tier_nvme_invalidate_claim()), so nothing deduplicates onto it
 * meanwhile.  The loop never waits: the session's reply is deferred
 * (kd_session_defer()) until the last of the drop's invalidations is
 * reaped (kc_drop_job_done()), and says how many failed.  While they run the slots count as NVMe I/O in flight
 * (nvme_in_flight), so writes waiting for a slot wait for them.  TIER_STATS
 * counts the jobs, the headers zeroed and the failures since the start
 * (nvme_invalidate_jobs, nvme_invalidated_blocks, nvme_invalidate_failures).
 *
 * Stale copies: a block restored from NVMe to the GPU, or evicted from
 * NVMe, leaves its slot free in memory with its header valid on disk
 * (kc_release_lower()), so that a restart is warm for it; the tier
 * remembers such slots, with the hash and the tenant (tier_nvme.h), until
 * they are written again.  A drop must not let one bring a dropped
 * block back, so after its walks it claims (tier_nvme_stale_claim(), on
 * the loop thread, as a dropped block's slot is claimed) and invalidates
 * through the same jobs: the stale copies of every block it dropped,
 * from any tier (a `--tier gpu` drop too: the GPU block and its old
 * NVMe copy are one block), and, when it includes the NVMe tier, every
 * stale copy (of its tenant with `--uid`: those freed under it).  The
 * reply counts those zeroed apart (nvme_stale_invalidated); their jobs
 * and failures are in the same counters as the dropped blocks'.
 *
 * Drop mark: none of the above survives a crash before the header
 * writes ran, and a write that failed leaves its header for the restart.
 * So a drop that includes the NVMe tier first queues an NVME_MARK job
 * (kc_drop_mark()): the tier's superblock says, durably before the
 * reply, that every slot written before the drop (of the tenant's blocks
 * with `--uid`: the slot header names its tenant) is dropped, and the
 * restart's scan leaves them out (tier_nvme_mark.c).  The header writes
 * still free the slots at once; nothing depends on them any more.  A
 * `--tier gpu` or `--tier host` drop writes no mark: the old NVMe copies
 * of what it dropped rely on their invalidations alone.  A size whose
 * NVMe tier is out (not open yet) cannot be marked: the drop is
 * remembered and applied by the tier's next open (cache_drop_pending.c).
 *
 * Kept blocks: a block the drop keeps on NVMe (in use, pinned, busy) was
 * written below the mark, and a restart's scan would leave it out: the
 * drop said it was kept, and the restart lost it.  So each one's header
 * is written again with a generation taken now, after the mark's (an
 * NVME_RESTAMP job, tier_nvme_restamp_batch(): the same slot, payload and
 * CRC), and the reply waits for those too: once answered, the blocks it
 * kept survive a restart as the ones it dropped stay dropped.  The
 * restamp never brings a dropped block back: it writes only a READY
 * slot of the hash it kept (a dropped block's slot is claimed, FILLING,
 * before the job is queued), and a later drop's mark is above its
 * generation, so that drop covers it.  SIGKILL between the mark and the
 * restamps loses the kept blocks whose header was not written yet (and
 * only those); a restamp that fails is logged and counted
 * (TIER_STATS' nvme_restamp_failures, the drop's reply and log line), its block
 * still served for the run.  A block kept busy on its way down has no
 * slot yet, and its write was numbered before the drop: it is restamped
 * when the write lands (kc_nvme_restamp_landed(), a job of no drop's).
 * At a stop the loop writes what the shut-down engine cannot
 * (cache_drop_kept.c).
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmmd/abi_play.h"
#include "kvmm/kvmmd/tier_nvme.h"

/*
 * Block sizes (ABI 1.22): a drop walks every size's cache (kc_drop_walk()
 * once a size, each with its own NVMe partition, mark and engine) or,
 * with the request's block_pages, that size's alone, so that an operator
 * drops one model's blocks and leaves the others'.  The reply keeps the
 * sums and lists each size's part of them (sizes[]), for a client whose
 * HELLO said 1.22 or later; an older one gets the 104 bytes of before.
 */

/* An ADMIN_CACHE_DROP whose reply waits for its NVMe invalidations. */
struct kc_drop {
	struct kc_drop *next; /* in kd_cache.drops */
	struct kd_session *s; /* NULL once its session ended */
	struct kvmm_msg_hdr h; /* the request: the reply echoes its id */
	struct kvmm_admin_cache_drop_reply rep;
	uint64_t left; /* invalidation jobs not reaped yet */
	uint32_t uid; /* who asked (the log line) */
	/* the hashes of the blocks it dropped (sorted before the stale
	 * copies are looked for); lost: an allocation failed */
	uint64_t *hashes;
	size_t nhashes, cap;
	bool hashes_lost;
	/* of rep.nvme_invalidate_failures: stale NVMe copies not claimed,
	 * left in free slots set aside for writes in flight
	 * (kc_drop_stale()); the log line says them apart */
	uint64_t stale_left;
	/* the NVMe drop marks (kc_drop_mark()): one a size's partition the
	 * drop walked, marks queued, marks_done on disk; mark the last
	 * one's generation (the log line's, with one mark) */
	uint64_t mark;
	uint32_t marks, marks_done;
	/* sizes whose NVMe tier is out: the drop is remembered for the
	 * tier's next open (cache_drop_pending.c), kept across a restart
	 * when nvme_kept is 0 (kc_drop_pending_save()'s -errno else) */
	uint32_t nvme_out;
	int nvme_kept;
	uint32_t tenant; /* of a --uid drop, KVMM_TENANT_OTHERS else */
	/* the reply's bytes: sizeof(rep), or those of before 1.22 for a
	 * client of 1.21 or before (no sizes[]), of 1.22 for one of 1.22
	 * (no restamp counts); its kept NVMe blocks (kc_drop_restamp()) are
	 * in rep.nvme_restamp* for the log line whatever the client */
	size_t rep_size;
};

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
static void kc_drop_failed(struct kd_cache *c, struct kc_drop *dr)
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
static void kc_drop_who(const struct kc_drop *dr, char *who, size_t len)
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

/* Every mark the drop queued is on disk (one a size's partition it
 * walked): what a restart's scan drops is all the drop covered.  A
 * multi-size drop whose one mark failed is not, though the other
 * partition's mark holds (until 7 December one mark written was taken
 * for all, and the line named the last one's generation alone). */
static bool kc_drop_marked(const struct kc_drop *dr)
{
	return dr->marks && dr->marks_done == dr->marks;
}

/*
 * The stale copies dr left in slots set aside for writes in flight
 * (kc_drop_stale()), for its log line: what a restart makes of them.
 * Under the drop's mark on disk, nothing: each was written before the
 * drop, so its header's generation is below the mark (with `--uid`, the
 * tenant's copies: their headers name the tenant).  With no mark (a
 * `--tier gpu` or `host` drop, or its mark not written) only a write
 * over the slot removes one, and the writes that reserved those slots
 * do not name them: a write takes the free slot on top of the stack
 * when it runs (nvme_slot_alloc()), one of them only if no slot was
 * freed since the claim (the drop's own invalidations free theirs).
 */
static void kc_drop_left_text(const struct kc_drop *dr, char *buf, size_t len)
{
	if (!dr->stale_left)
		return;
	snprintf(
		buf, len,
		"; %llu of those not written: stale NVMe copies left in free slots set aside for writes in flight, %s",
		(unsigned long long)dr->stale_left,
		kc_drop_marked(dr) ?
			"below the drop mark: a restart does not recover them" :
		dr->marks_done ?
			"not every partition's drop mark on disk: a restart may recover them, unless a write took their slot first (a write takes the free slot on top, not the one it reserved)" :
			"no drop mark on disk: a restart may recover them, unless a write took their slot first (a write takes the free slot on top, not the one it reserved)");
}

/* The drop is over: logged, answered when its session is still there. */
static void kc_drop_reply(struct kc_drop *dr)
{
	const struct kvmm_admin_cache_drop_reply *r = &dr->rep;
	char mark[128] = "", size[48] = "", kept[160] = "", left[320] = "";
	char out[320] = "", whose[32] = "every block";

	if (dr->marks == 1 && dr->marks_done)
		snprintf(mark, sizeof(mark),
			 "; NVMe slots below generation %llu dropped on disk",
			 (unsigned long long)dr->mark);
	else if (kc_drop_marked(dr))
		snprintf(
			mark, sizeof(mark),
			"; NVMe slots below each partition's drop mark dropped on disk (%u partitions)",
			dr->marks);
	else if (dr->marks_done)
		snprintf(
			mark, sizeof(mark),
			"; NVMe slots below the drop marks of %u of %u partitions dropped on disk",
			dr->marks_done, dr->marks);
	if (r->nvme_restamped || r->nvme_restamp_failures ||
	    r->nvme_restamp_gone)
		snprintf(
			kept, sizeof(kept),
			"; kept NVMe blocks: %llu headers written above the drop mark, %llu not, %llu left NVMe first",
			(unsigned long long)r->nvme_restamped,
			(unsigned long long)r->nvme_restamp_failures,
			(unsigned long long)r->nvme_restamp_gone);
	if (r->block_pages)
		snprintf(size, sizeof(size), " of blocks of %u pages",
			 r->block_pages);
	kc_drop_left_text(dr, left, sizeof(left));
	if (dr->tenant != KVMM_TENANT_OTHERS)
		snprintf(whose, sizeof(whose), "tenant %u's", dr->tenant);
	if (dr->nvme_out)
		snprintf(
			out, sizeof(out),
			"; the NVMe tier is out (%u size%s): the blocks of its file the drop covers (%s) are dropped when it joins, before they are recovered (%s%s)",
			dr->nvme_out, dr->nvme_out == 1 ? "" : "s", whose,
			!dr->nvme_kept ?
				"kept in --policy-state's FILE.nvme-drops across a restart" :
			dr->nvme_kept == -ENOENT ?
				"in memory alone: a restart before the join forgets it, no --policy-state to keep it in" :
				"in memory alone: a restart before the join forgets it, writing --policy-state's FILE.nvme-drops failed: ",
			dr->nvme_kept && dr->nvme_kept != -ENOENT ?
				strerror(-dr->nvme_kept) :
				"");
	vmm_log(r->nvme_invalidate_failures || r->nvme_restamp_failures ?
			VMM_LOG_WARN :
			VMM_LOG_INFO,
		"cache: drop by uid %u%s: dropped gpu %llu, host %llu, nvme %llu blocks; kept in use gpu %llu, host %llu, nvme %llu; %llu stale NVMe copies invalidated; %llu NVMe headers or marks not written%s%s%s%s",
		dr->uid, size, (unsigned long long)r->dropped[0],
		(unsigned long long)r->dropped[1],
		(unsigned long long)r->dropped[2],
		(unsigned long long)r->kept[0], (unsigned long long)r->kept[1],
		(unsigned long long)r->kept[2],
		(unsigned long long)r->nvme_stale_invalidated,
		(unsigned long long)r->nvme_invalidate_failures, left, mark,
		kept, out);
	dr->rep.size = (uint32_t)dr->rep_size;
	/* a reserved word to a client before 1.15 (abi_play.h) */
	if (dr->s && KD_ABI_BEFORE(dr->s, KD_ABI_STALE_INVALIDATED))
		dr->rep.nvme_stale_invalidated = 0;
	if (dr->s)
		kd_session_reply(dr->s, &dr->h, 0, &dr->rep, dr->rep_size, NULL,
				 0);
}

/*
 * The drop in one size's cache: its blocks of the tiers asked for
 * dropped or counted as kept; with its NVMe tier (the first size's, and
 * with several sizes named each size's partition), the drop's mark and
 * the headers' invalidations submitted to its engine (dr->left).
 */
static void kc_drop_walk(struct kd_cache *c, struct kc_drop *dr,
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

int kd_cache_drop(struct kd_session *s, const struct kvmm_msg_hdr *h,
		  const void *p, size_t len)
{
	const unsigned all = KVMM_CACHE_DROP_GPU | KVMM_CACHE_DROP_HOST |
			     KVMM_CACHE_DROP_NVME;
	struct kd_cache *c;
	struct kvmm_admin_cache_drop a;
	struct kc_drop *dr;
	bool by_tenant;
	uint64_t now;
	uint32_t i;
	int err;

	err = kw_copy_struct(&a, sizeof(a), sizeof(a), p, len);
	if (err)
		return err;
	by_tenant = a.flags & KVMM_CACHE_DROP_F_TENANT;
	if ((a.tiers & ~all) || (a.flags & ~KVMM_CACHE_DROP_F_TENANT) ||
	    (!by_tenant && a.tenant) ||
	    (by_tenant && a.tenant == KVMM_TENANT_OTHERS) || a.pad ||
	    !kw_all_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	/* block_pages was a reserved word before 1.22: to a client of
	 * before (or under KVMMD_TEST_ABI_MINOR=21 or less), what 1.21
	 * said */
	if (a.block_pages && KD_ABI_BEFORE(s, KD_ABI_SIZE_WORDS))
		return -EINVAL;
	if (a.block_pages) {
		bool cached = false;

		kc_for_each(s->d, c, i)
			cached |= kc_size(c) == a.block_pages;
		if (!cached)
			return -ENOENT;
	}
	if (!a.tiers)
		a.tiers = all;
	dr = calloc(1, sizeof(*dr));
	if (!dr)
		return -ENOMEM;
	dr->s = s;
	dr->h = *h;
	dr->uid = s->uid;
	dr->tenant = by_tenant ? a.tenant : KVMM_TENANT_OTHERS;
	dr->rep.block_pages = a.block_pages;
	/* 104 bytes to a client of 1.21 or before, 336 to one of 1.22
	 * (abi_play.c's table) */
	dr->rep_size = kd_abi_reply_size(KD_ABI_CACHE_DROP, s->client_minor);
	/* every size's cache (or the one asked), one reply with their sums
	 * and each size's part; before a size's first region its tiers are
	 * not open: nothing cached (the blocks an NVMe file holds from the
	 * last run are read into the cache when it opens) */
	now = kd_now_ns();
	kc_for_each(s->d, c, i) {
		if (c->closing ||
		    (a.block_pages && kc_size(c) != a.block_pages))
			continue;
		if (c->pol && c->opened)
			kc_drop_walk(c, dr, &a, by_tenant, now);
		/* its file's blocks are out of reach: dropped when it joins
		 * (a cache not set up yet too: its tier opens then) */
		if ((a.tiers & KVMM_CACHE_DROP_NVME) && kc_nvme_out(c)) {
			kc_drop_pending_add(c, by_tenant, a.tenant);
			dr->nvme_out++;
		}
	}
	if (dr->nvme_out) /* before the reply: kept, or said not to be */
		dr->nvme_kept = kc_drop_pending_save(s->d);
	/* the list of drops waiting for jobs of any size's engine */
	c = s->d->cache;
	free(dr->hashes);
	dr->hashes = NULL;
	if (dr->left) {
		/* the reply waits for the headers (kc_drop_job_done()) */
		dr->next = c->drops;
		c->drops = dr;
		kd_session_defer(s);
		return 0;
	}
	kc_drop_reply(dr);
	free(dr);
	return 0;
}

/* One of dr's jobs was reaped: the reply when it was the last. */
static void kc_drop_left(struct kd_cache *c, struct kc_drop *dr)
{
	struct kc_drop **pp;

	if (--dr->left)
		return;
	/* on the first size's list, whichever size's engine ran the job */
	for (pp = &c->d->cache->drops; *pp != dr; pp = &(*pp)->next)
		;
	*pp = dr->next;
	kc_drop_reply(dr);
	if (dr->s)
		kd_session_resume(dr->s); /* it may end the session */
	free(dr);
}

/* The drop's mark job (kc_drop_mark()) was reaped. */
static void kc_drop_mark_done(struct kd_cache *c, struct migrate_job *job)
{
	struct kc_drop *dr = job->owner;
	char part[64] = "";

	if (job->state == MIGRATE_DONE) {
		dr->marks_done++;
	} else {
		kc_drop_failed(c, dr);
		/* with sizes named, one mark a size's partition: which one
		 * (each partition numbers its own generations, so two marks
		 * of a drop may have the same) */
		if (c->d->cfg.nr_cache_block_sizes > 1)
			snprintf(part, sizeof(part),
				 " in the partition of blocks of %u pages",
				 c->ppb);
		vmm_log(VMM_LOG_WARN,
			"cache: drop by uid %u: NVMe drop mark (generation %llu)%s not written (%s); a restart may find blocks whose headers are not invalidated",
			dr->uid, (unsigned long long)job->nvme_generation, part,
			strerror(job->result ? -job->result : ECANCELED));
	}
	migrate_job_free(job);
	kc_drop_left(c, dr);
}

/* A kept block's restamp (kc_drop_restamp()) was reaped. */
static void kc_drop_restamp_done(struct kd_cache *c, struct migrate_job *job)
{
	struct kc_drop *dr = job->owner;
	char who[32] = "";

	if (dr)
		kc_drop_who(dr, who, sizeof(who));
	switch (kc_restamp_reaped(c, job, who)) {
	case KC_RESTAMP_WRITTEN:
		if (dr)
			dr->rep.nvme_restamped++;
		break;
	case KC_RESTAMP_GONE:
		if (dr)
			dr->rep.nvme_restamp_gone++;
		break;
	case KC_RESTAMP_FAILED:
		if (dr)
			dr->rep.nvme_restamp_failures++;
		break;
	}
	if (dr) /* none: a write that landed after its drop */
		kc_drop_left(c, dr);
}

void kc_drop_job_done(struct kd_cache *c, struct migrate_job *job)
{
	struct kc_drop *dr = job->owner;

	if (job->kind == MIGRATE_NVME_MARK) {
		kc_drop_mark_done(c, job);
		return;
	}
	if (job->kind == MIGRATE_NVME_RESTAMP) {
		kc_drop_restamp_done(c, job);
		return;
	}
	if (!dr) {
		kc_marked_job_done(c, job); /* a restart's marked slot */
		return;
	}
	c->nvme_in_flight--;
	if (job->state == MIGRATE_DONE) {
		c->st.nvme_invalidated_blocks++;
		if (job->nvme_stale)
			dr->rep.nvme_stale_invalidated++;
	} else {
		kc_drop_failed(c, dr);
		vmm_log(VMM_LOG_WARN,
			"cache: %s NVMe block %016llx (slot %u): header not invalidated (%s); a restart may find it again, unless the drop's mark covers it",
			job->nvme_stale ? "stale copy of" : "dropped",
			(unsigned long long)job->hash, job->nvme_slot,
			strerror(-job->result));
	}
	kc_invalidate_job_end(c, job);
	kc_drop_left(c, dr);
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

void kc_invalidate_job_end(struct kd_cache *c, struct migrate_job *job)
{
	/* not taken by the tier (the test knob, cancelled at a stop): the
	 * slot is still claimed there (kc_drop_invalidate(),
	 * kc_nvme_clear_marked()), and nobody's */
	if (!job->nvme_dropped) {
		int err = tier_nvme_invalidate_unclaim(c->nvme, job->nvme_slot);

		if (err)
			kc_free_refused(c, "NVMe", job->nvme_slot, job->hash,
					err);
	}
	kc_nvme_kick(c);
	migrate_job_free(job);
}

void kc_drop_session_end(struct kd_cache *c, struct kd_session *s)
{
	for (struct kc_drop *dr = c->drops; dr; dr = dr->next)
		if (dr->s == s)
			dr->s = NULL; /* its jobs still free their slots */
}
