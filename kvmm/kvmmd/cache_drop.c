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
 *
 * This file parses the request, answers it and reaps the drop's jobs; the
 * walk of each size's cache, which drops or keeps each block and queues
 * those jobs, is cache_drop_walk.c's.
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
