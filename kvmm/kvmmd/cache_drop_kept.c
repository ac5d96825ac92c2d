// SPDX-License-Identifier: MIT
/*
 * Restamps of the NVMe blocks an operator's drop keeps (cache_drop.c):
 * a block the drop keeps on NVMe (in use, pinned, busy) was written
 * below the drop's mark, which a restart's scan obeys, so its header is
 * written again above it by an NVME_RESTAMP job (tier_nvme_restamp_batch():
 * the same slot, payload and CRC, a generation taken when the job is
 * queued, after the mark's and before any later drop's).  The drop's
 * reply waits for the restamps of the blocks its walk kept; a block kept
 * busy on its way down has no slot yet, and its write was numbered
 * before the drop, so it is restamped when the write lands
 * (kc_nvme_restamp_landed()), by a job of no drop's.
 *
 * The loop never waits for the disk, but at a stop (kc_fini_one()) the
 * engine is shut down first: a restamp it cancelled, and a write that ran
 * through it, are written by the loop thread itself then, as the stop
 * waits for the disk anyway.  A restamp that fails is logged and counted
 * (TIER_STATS' nvme_restamp_failures, the drop's reply when it waited
 * for it; ABI 1.23), its block still served for the run: the next start
 * does not find it.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <string.h>

#include "kvmm/kvmmd/tier_nvme.h"

/* A kept NVMe block's header not written above a drop's mark: said (who:
 * the drop, "" for none), counted. */
static void kc_restamp_failed(struct kd_cache *c, const char *who,
			      uint64_t hash, uint32_t slot, int err)
{
	c->st.nvme_restamp_failures++;
	vmm_log(VMM_LOG_WARN,
		"cache: %skept NVMe block %016llx (slot %u): header not written above the drop mark (%s); served in this run, a restart will not find it (%llu such since the start)",
		who, (unsigned long long)hash, slot, strerror(-err),
		(unsigned long long)c->st.nvme_restamp_failures);
}

int kc_restamp(struct kd_cache *c, struct kc_entry *e, void *owner,
	       const char *who)
{
	struct migrate_job *job;

	if (!c->mig || c->closing)
		return 0;
	job = migrate_job_new(MIGRATE_NVME_RESTAMP, 0);
	if (job) {
		job->hash = e->hash;
		job->nvme_slot = e->nvme_slot;
		job->nvme_generation = tier_nvme_next_generation(c->nvme);
		job->owner = owner;
		if (!migrate_submit(c->mig, job)) {
			/* a free of the slot while the header is written is
			 * done when it ended (tier_nvme_restamp_batch()):
			 * writes short of a slot wait for it */
			c->nvme_in_flight++;
			return 1;
		}
		migrate_job_free(job);
	}
	kc_restamp_failed(c, who, e->hash, e->nvme_slot, -ENOMEM);
	return -ENOMEM;
}

/* A restamp at the stop, on the loop thread: 0 or -errno. */
static int kc_restamp_at_stop(struct kd_cache *c, uint64_t hash, uint32_t slot,
			      uint64_t generation)
{
	struct tier_nvme_io io = { .hash = hash,
				   .slot = slot,
				   .generation = generation };

	tier_nvme_restamp_batch(c->nvme, &io, 1);
	return io.result;
}

/* The end of a restamp (written, gone, failed): counted, said. */
static enum kc_restamp_end kc_restamp_end(struct kd_cache *c, const char *who,
					  uint64_t hash, uint32_t slot, int err)
{
	if (!err) {
		c->st.nvme_restamped++;
		return KC_RESTAMP_WRITTEN;
	}
	if (err == -ENOENT) {
		/* freed, evicted or dropped since: nothing kept on NVMe
		 * any more (a later drop's mark covers its slot) */
		c->nvme_restamp_gone++;
		return KC_RESTAMP_GONE;
	}
	kc_restamp_failed(c, who, hash, slot, err);
	return KC_RESTAMP_FAILED;
}

enum kc_restamp_end kc_restamp_reaped(struct kd_cache *c,
				      struct migrate_job *job, const char *who)
{
	enum kc_restamp_end end;
	int err = job->result;

	c->nvme_in_flight--;
	if (job->state == MIGRATE_CANCELLED && c->closing && c->nvme)
		err = kc_restamp_at_stop(c, job->hash, job->nvme_slot,
					 job->nvme_generation);
	else if (job->state != MIGRATE_DONE && !err)
		err = -ECANCELED;
	end = kc_restamp_end(c, who, job->hash, job->nvme_slot, err);
	migrate_job_free(job);
	kc_nvme_kick(c);
	return end;
}

void kc_nvme_restamp_landed(struct kd_cache *c, struct kc_entry *e)
{
	uint64_t g;

	/* no drop marked this run (the common case): nothing to ask the
	 * tier, whose lock every landed write would take otherwise */
	if (!c->nvme || !c->nvme_mark_high || e->nvme_slot == MIGRATE_NO_SLOT)
		return;
	g = tier_nvme_slot_generation(c->nvme, e->nvme_slot);
	if (!g || g >= c->nvme_mark_high)
		return;
	if (!c->closing) {
		(void)kc_restamp(c, e, NULL, "");
		return;
	}
	/* a write that ran through the stop */
	kc_restamp_end(c, "", e->hash, e->nvme_slot,
		       kc_restamp_at_stop(c, e->hash, e->nvme_slot, 0));
}
