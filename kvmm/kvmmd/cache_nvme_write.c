// SPDX-License-Identifier: MIT
/*
 * Host -> NVMe writes that fail.  The policy moved a host victim down to
 * the NVMe tier (its host tier was full); the write of its host copy
 * failed (EIO from a dying disk, ENOSPC on a file that was not
 * preallocated).  Its host copy is still good, so the block goes back
 * into the policy's host tier (pol_cache_return()), whose own victim then
 * goes down, is written, or dropped: a failed write costs the NVMe copy,
 * never the block.
 *
 * A tier whose writes keep failing would make every demotion a failed
 * write and a return: after KVMM_NVME_WRITE_FAILS_OUT failures in a row
 * it is out of service for writes, with one log line and TIER_STATS'
 * nvme_write_error.  Host victims are dropped then (the policy's choice,
 * as with no NVMe tier), and the blocks it holds are still read.  Once
 * the wait is over (the NVMe tier's open's: 1 s doubling to 60 s,
 * KVMMD_TEST_CACHE_RETRY_MS), the next move down is written as a try; a
 * write that works brings the tier back.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <string.h>

static void kc_nvme_write_wait(struct kd_cache *c, uint64_t now)
{
	c->nvme_write_retry_ns =
		now + kc_retry_wait_ms(c, c->nvme_write_tries + 1) * 1000000ull;
}

bool kc_nvme_write_refused(struct kd_cache *c, struct kc_entry *e)
{
	uint64_t now;

	/* e's write is the try already (its copy to host ran first) */
	if (!c->nvme_write_error || e->nvme_probe)
		return false;
	now = kd_now_ns();
	if (now < c->nvme_write_retry_ns)
		return true;
	/* this write tries the tier; should it never end (its block
	 * dropped before it ran), the next move after another wait does */
	c->nvme_write_tries++;
	kc_nvme_write_wait(c, now);
	e->nvme_probe = true;
	return false;
}

void kc_nvme_write_end(struct kd_cache *c, struct kc_entry *e,
		       const struct migrate_job *job)
{
	bool probe = e->nvme_probe;
	uint64_t now = kd_now_ns();

	e->nvme_probe = false;
	if (job->state == MIGRATE_DONE) {
		if (c->nvme_write_error)
			vmm_log(VMM_LOG_INFO,
				"cache: the NVMe tier %s takes writes again: a write worked %llu ms after it went out (the last failure: %s)",
				c->d->cfg.nvme_path,
				(unsigned long long)((now -
						      c->nvme_write_out_ns) /
						     1000000),
				strerror(-c->nvme_write_error));
		c->nvme_write_fails = 0;
		c->nvme_write_error = 0;
		c->nvme_write_retry_ns = 0;
		c->nvme_write_tries = 0;
		return;
	}
	if (job->state != MIGRATE_FAILED)
		return; /* cancelled at shutdown: it says nothing of the disk */
	c->nvme_write_fails++;
	if (c->nvme_write_error) {
		c->nvme_write_error = job->result;
		if (probe)
			kc_nvme_write_wait(c, now);
		return;
	}
	if (c->nvme_write_fails < KVMM_NVME_WRITE_FAILS_OUT)
		return;
	c->nvme_write_error = job->result;
	c->nvme_write_tries = 0;
	c->nvme_write_out_ns = now;
	kc_nvme_write_wait(c, now);
	c->st.nvme_write_outs++;
	vmm_log(VMM_LOG_ERR,
		"cache: the NVMe tier %s is out of service for writes: %u writes in a row failed, the last with %s; host victims are dropped instead of written, its blocks are still read; a write tries it again in %llu ms (kvmmctl status)",
		c->d->cfg.nvme_path, c->nvme_write_fails,
		strerror(-job->result),
		(unsigned long long)((c->nvme_write_retry_ns - now) / 1000000));
}

bool kc_nvme_write_keeps(struct kd_cache *c, const struct kc_entry *e)
{
	/* the policy still has it on NVMe, where the failed move put it
	 * (not dropped meanwhile, nor taken by a restore) */
	return !c->closing && e->in_pol && !e->dead && !e->drop_after &&
	       e->tier == POL_TIER_NVME && e->host_slot != MIGRATE_NO_SLOT &&
	       pol_cache_tier_of(c->pol, e->hash) == POL_TIER_NVME;
}

void kc_nvme_write_return(struct kd_cache *c, struct kc_entry *e)
{
	c->st.nvme_write_returns++;
	kc_set_tier(c, e, POL_TIER_HOST);
	/* the moves it makes come to kc_move(): the host victim goes on
	 * down, or out while the tier takes no writes */
	(void)pol_cache_return(c->pol, e->hash, POL_TIER_HOST);
}

void kc_nvme_write_stats(const struct kd_cache *c,
			 struct kvmm_tier_stats_reply *st)
{
	uint64_t now = kd_now_ns();

	st->nvme_write_error = (uint64_t)-c->nvme_write_error;
	st->nvme_write_retry_ms = 0;
	/* rounded up: 0 once the next move down is written as a try */
	if (c->nvme_write_error && c->nvme_write_retry_ns > now)
		st->nvme_write_retry_ms =
			(c->nvme_write_retry_ns - now + 999999) / 1000000;
}
