/* SPDX-License-Identifier: MIT */
/*
 * Shared between kvmm/policy/replay.c (the replay loop),
 * replay_daemon.c (kvmmd's cache accesses, pol_replay_opts.daemon_model)
 * and replay_account.c (the cost accounting, the queue, the JSON).
 */
#ifndef KVMM_POLICY_REPLAY_PRIV_H
#define KVMM_POLICY_REPLAY_PRIV_H

#include <stdint.h>

#include "kvmm/policy/cost_model.h"
#include "kvmm/policy/policy.h"
#include "kvmm/policy/replay.h"

/*
 * What kvmmd does with block i of a request's open (pol_replay_opts.
 * daemon_model), decided at the lookup: the blocks it shares or restores
 * (hits), a cached one the restore plan hands out to recompute, a hole
 * (in no tier, before the last cached block: KVMM_PREFIX_OPEN_SEGMENTS),
 * and the blocks past the matched prefix.
 */
enum dm_act {
	DM_NEW = 0,
	DM_USE, /* on the GPU: shared */
	DM_RELOAD, /* below: restored */
	DM_RECOMPUTE, /* below: the plan recomputes it */
	DM_HOLE, /* in no tier: recomputed */
};

/* replay_daemon.c: kvmmd's plan for a segmented open, and a request as
 * kvmmd makes its policy calls (their comments say how). */
void replay_daemon_plan(const struct pol_cost_model *m, uint8_t *where,
			uint32_t n, uint8_t *act);
void replay_daemon_request(struct pol_cache *c, const uint64_t *h, uint32_t n,
			   const uint8_t *act, uint64_t clock, uint32_t tenant,
			   uint64_t *refd);

/* replay_account.c: the row of tenant id in res, made on first sight. */
struct pol_replay_tenant *replay_tenant_row(struct pol_replay_result *res,
					    uint32_t id);

#endif
