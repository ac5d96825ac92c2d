// SPDX-License-Identifier: MIT
/*
 * The slot headers a restart's scan left out under a drop mark
 * (tier_nvme_mark.c), zeroed once the NVMe tier is the cache's.  The mark
 * keeps their blocks from coming back whatever becomes of those headers,
 * but a header stays valid on disk until its slot is written again, so
 * every later restart read it and counted it again (drop_marked_slots).
 * So when the tier opens, or joins a running cache, its marked slots are
 * claimed on the loop thread (tier_nvme_marked_claim(): off the free
 * stack, so no write takes one while its job waits) and zeroed by
 * NVME_INVALIDATE jobs on the migration engine's workers, as a drop's
 * stale copies are (cache_drop_walk.c): the loop never waits for the disk.
 * A job that fails, or that a stop cancels, leaves its slot free and
 * marked: the mark still covers it, and the next start tries again.
 *
 * These jobs belong to no drop (job->owner NULL): they are not in a
 * drop's reply nor in TIER_STATS's nvme_invalidate_* counters, which
 * count what operators' drops did; one log line says how it went.
 *
 * The mark itself is not retired here, when these jobs end: the next
 * start's scan retires it if it finds none of its headers left
 * (tier_nvme_mark.c, nvme_marks_retire()), so that a header a failed or
 * cancelled zeroing left behind, or one a crash cut short, keeps it:
 * the scan reads what is on disk, whatever this run believed it wrote.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/tier_nvme.h"

/* The marked slots' invalidations are over: say how it went. */
static void kc_marked_say(struct kd_cache *c)
{
	vmm_log(c->marked_failed ? VMM_LOG_WARN : VMM_LOG_INFO,
		"cache: %llu NVMe slot headers below a drop mark zeroed, %llu not (left for the next start)",
		(unsigned long long)c->marked_zeroed,
		(unsigned long long)c->marked_failed);
}

void kc_nvme_clear_marked(struct kd_cache *c)
{
	struct tier_nvme_stale *v;
	uint32_t n, left;
	int err;

	if (!c->nvme || !c->mig || c->closing)
		return;
	err = tier_nvme_marked_claim(c->nvme, &v, &n, &left);
	if (err) {
		vmm_log(VMM_LOG_WARN,
			"cache: NVMe slot headers below a drop mark not cleared (%s): the next start reads them again",
			strerror(-err));
		return;
	}
	c->marked_failed += left;
	for (uint32_t i = 0; i < n; i++) {
		/* no drop's; one that cannot run stays marked: for the next
		 * start */
		if (kc_invalidate_stale(c, v[i].hash, v[i].slot, NULL))
			c->marked_left++;
		else
			c->marked_failed++;
	}
	free(v);
	if ((n || left) && !c->marked_left)
		kc_marked_say(c);
	kc_nvme_kick(c);
}

void kc_marked_job_done(struct kd_cache *c, struct migrate_job *job)
{
	c->nvme_in_flight--;
	if (job->state == MIGRATE_DONE)
		c->marked_zeroed++;
	else
		c->marked_failed++;
	kc_invalidate_job_end(c, job);
	if (!--c->marked_left)
		kc_marked_say(c);
}
