// SPDX-License-Identifier: MIT
/*
 * Restore plans for PREFIX_OPEN.
 *
 * A prefix-open matches the longest run of leading blocks that are in some
 * tier (a prefix stops at the first block in no tier: without Multi-Segment
 * Attention a block after a gap is useless); with PREFIX_OPEN_SEGMENTS it
 * goes on to the last block in some tier, the holes recomputed by the
 * client, and the plan is made with allow_segments.  Blocks on the GPU are shared
 * as they are; each block in the host or NVMe tier is either reloaded by
 * the daemon into fresh pages or handed to the client as fresh pages to
 * recompute at its original positions.  Both give the same bytes (a
 * block's KV depends only on the tokens up to it, which its chained hash
 * fixes); they differ in time, which the cost model decides
 * (kvmm/policy/restore_plan.h: reloads from each tier overlapped with
 * recomputation, blocks moved to recomputation while the makespan drops).
 *
 * The model is kvmmd's --profile cost model (h200-llama3-8b by default,
 * its rates corrected online by measured restores; the built-in
 * h200-llama3-8b-ref when there is none): for the host link reload wins, so the default behaviour is the old
 * one (reload everything) unless many blocks queue on a slow NVMe tier.
 * --restore-mode reload|recompute forces one answer, for tests and for
 * engines that would rather compute than wait.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kvmm/kvmmd/options.h"
#include "kvmm/kvmmd/cache_plan.h"
#include "kvmm/policy/restore_plan.h"

static const char *const mode_names[] = {
	[KD_RESTORE_PLAN] = "plan",
	[KD_RESTORE_RELOAD] = "reload",
	[KD_RESTORE_RECOMPUTE] = "recompute",
};

const char *kd_restore_mode_string(uint32_t mode)
{
	if (mode < sizeof(mode_names) / sizeof(mode_names[0]))
		return mode_names[mode];
	return "unknown";
}

int kd_restore_mode_parse(const char *val, uint32_t *mode)
{
	return kd_parse_name("--restore-mode", mode_names,
			     sizeof(mode_names) / sizeof(mode_names[0]), val,
			     mode);
}

static struct pol_cost_model ref_model;
static pthread_once_t ref_once = PTHREAD_ONCE_INIT;

static void ref_init(void)
{
	pol_cost_reference(&ref_model);
}

void kd_cache_plan(uint32_t mode, const struct pol_cost_model *m,
		   const uint8_t *tiers, uint32_t n, bool segments, bool early,
		   uint8_t *act)
{
	/* a client that opens without KVMM_PREFIX_OPEN_EARLY gets its reply
	 * once every reload is done, so it cannot recompute meanwhile: its
	 * plan is the serial one (a recomputed head adds to the copies),
	 * segmented or not. */
	struct pol_restore_opts o = { .size = sizeof(o),
				      .allow_segments = segments,
				      .no_overlap = !early };
	struct pol_restore_plan p;

	for (uint32_t i = 0; i < n; i++) {
		if (tiers[i] >= POL_TIER_COUNT)
			act[i] = POL_RESTORE_RECOMPUTE; /* a hole */
		else if (tiers[i] == POL_TIER_GPU)
			act[i] = POL_RESTORE_USE;
		else if (mode == KD_RESTORE_RECOMPUTE)
			act[i] = POL_RESTORE_RECOMPUTE;
		else
			act[i] = POL_RESTORE_RELOAD;
	}
	if (mode != KD_RESTORE_PLAN || !n)
		return;
	if (!m) {
		pthread_once(&ref_once, ref_init);
		m = &ref_model;
	}
	memset(&p, 0, sizeof(p));
	if (pol_restore_plan_build(m, tiers, n, &o, &p))
		return; /* reload: always correct */
	for (uint32_t i = 0; i < n && i < p.nblocks; i++)
		if (tiers[i] != POL_TIER_GPU &&
		    p.action[i] == POL_RESTORE_RECOMPUTE)
			act[i] = POL_RESTORE_RECOMPUTE;
	pol_restore_plan_free(&p);
}
