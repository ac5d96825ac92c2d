/* SPDX-License-Identifier: MIT */
/*
 * Restore plans for PREFIX_OPEN (cache_plan.c): which lower-tier blocks of
 * a matched prefix the daemon reloads and which the client recomputes.
 */
#ifndef KVMM_KVMMD_CACHE_PLAN_H
#define KVMM_KVMMD_CACHE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

enum kd_restore_mode {
	KD_RESTORE_PLAN = 0, /* the cost model decides (default) */
	KD_RESTORE_RELOAD = 1, /* reload every lower-tier block */
	KD_RESTORE_RECOMPUTE = 2, /* the client recomputes them all */
};

/* kvmmd's option number for --restore-mode (no short option) */
#define KD_OPT_RESTORE_MODE 0x201

const char *kd_restore_mode_string(uint32_t mode);
/* "plan", "reload" or "recompute"; 0 or -EINVAL (with a message) */
int kd_restore_mode_parse(const char *val, uint32_t *mode);

/*
 * For n blocks whose tiers are tiers[0..n) (enum pol_tier, none
 * POL_TIER_NONE), fill act[0..n) with enum pol_restore_action: USE for the
 * GPU, RELOAD or RECOMPUTE for the others (always RECOMPUTE for a block
 * in no tier).  Never fails: when the plan cannot be built every
 * lower-tier block is reloaded.  m: kvmmd's --profile cost model (NULL:
 * the built-in reference profile).  segments: the plan may reuse blocks
 * after a hole (Multi-Segment Attention, PREFIX_OPEN_SEGMENTS), and may
 * move any reloaded block to recomputation.  early: the client opened
 * with KVMM_PREFIX_OPEN_EARLY, so it recomputes while the reloads run;
 * otherwise its reply waits for them and the plan is made serially
 * (segmented or not).
 */
struct pol_cost_model;
void kd_cache_plan(uint32_t mode, const struct pol_cost_model *m,
		   const uint8_t *tiers, uint32_t n, bool segments, bool early,
		   uint8_t *act);

#endif
