/* SPDX-License-Identifier: MIT */
/*
 * Telemetry -> policy: a struct tel_sink that feeds what tel_poll()
 * reports into the policy library.
 *
 *  - Block statistics become the policy's reuse estimate: a resident
 *    block's access_count is raised to the telemetry count (clients see
 *    reuse the daemon does not, e.g. every step reading a shared prefix),
 *    and the block is re-ranked.  With `monotonic_clock` (the cache clock
 *    is CLOCK_MONOTONIC ns, as in kvmmd) its last_access also moves up to
 *    the latest traced access.
 *  - Measured latencies correct the cost model online: restores and
 *    migrations into the GPU give per-tier transfer rates (one averaged
 *    observation per histogram row per poll); recomputations give compute
 *    efficiency from the BPF event ring, where each carries its token
 *    count and position (the shm fallback has no event ring, so there
 *    only transfers are corrected).
 */
#ifndef KVMM_EBPF_TEL_POLICY_H
#define KVMM_EBPF_TEL_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "ebpf/telemetry.h"

struct pol_cache;
struct pol_cost_model;

/* Caches beside the first whose blocks the reports may name. */
#define TEL_POLICY_MORE 3

struct tel_policy {
	struct pol_cache *cache; /* may be NULL */
	/* more caches (kvmmd: one a block size after the first, whose
	 * hashes never meet; NULL entries skipped): a block reported is
	 * looked up in cache, then in these */
	struct pol_cache *more[TEL_POLICY_MORE];
	struct pol_cost_model *cost; /* may be NULL */
	bool monotonic_clock;
	/* what was fed, for kvmmctl and tests */
	uint64_t blocks_seen; /* block reports */
	uint64_t blocks_updated; /* resident blocks whose stats changed */
	uint64_t transfers; /* transfer observations */
	uint64_t computes; /* compute observations */
};

void tel_policy_init(struct tel_policy *tp, struct pol_cache *cache,
		     struct pol_cost_model *cost, bool monotonic_clock);
/* Fill a sink whose callbacks feed tp (pass it to tel_set_sink()). */
void tel_policy_sink(struct tel_policy *tp, struct tel_sink *sink);

#endif
