/* SPDX-License-Identifier: MIT */
/*
 * Restore plans: how to bring a request's prefix back onto the GPU.
 *
 * Input: for each block of the prefix, the tier holding it
 * (POL_TIER_NONE when it is in no tier).  Output: per block USE (already
 * on the GPU), RELOAD (copy from its tier) or RECOMPUTE, the recompute
 * chunks, and the modelled time with reloads overlapped with
 * recomputation.
 *
 * Model (Documentation/policy.md): one copy queue per source tier (host
 * link, NVMe) and the GPU's compute queue run concurrently.  Reloads are
 * issued in block order; a recompute chunk covering blocks [a, b) starts
 * when the previous chunk is done and every block before a is on the GPU
 * (attention reads them).  Chunk time = flops / rate + chunk_overhead.
 *
 * Every choice is exact (a block's KV depends only on the tokens up to
 * it, which its chained hash fixes); they differ in time.
 *   - without MSA (the classic prefix cache) everything from the first
 *     block in no tier on is recomputed, the GPU blocks before it are
 *     used, and any of the host and NVMe blocks may be reloaded, the
 *     others recomputed (a recomputed block between two reloads waits
 *     for the copies before it).  The plan is the best of the windows
 *     of reloaded blocks (restore_plan.c) and of a threshold per tier
 *     (restore_plan_tiers.c), O(n log n), which was the optimum over
 *     every choice in every brute-force case with the default chunk
 *     overhead; serially (no_overlap) it is the exact optimum over
 *     every choice (O(n * max_chunk_tokens / tokens_per_block)).
 *     Attention is dense (no msa factor);
 *   - with `allow_segments` (Multi-Segment Attention) a cached block
 *     after a gap may be reloaded and any reloaded block recomputed; the
 *     attention of every recomputed chunk then pays msa(k) for the k
 *     reused segments of its context.  Blocks move from the copy queues
 *     to recomputation greedily while the makespan drops (a slow tier
 *     with a long queue, e.g. many blocks on NVMe);
 *   - adaptive chunking: runs of recomputed blocks are cut into chunks of
 *     at most max_chunk_tokens; a chunk is cut early when the next block
 *     must wait for a reload anyway (so compute starts on what is ready),
 *     but never below min_chunk_tokens, which keeps the GPU busy.
 */
#ifndef KVMM_POLICY_RESTORE_PLAN_H
#define KVMM_POLICY_RESTORE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "kvmm/policy/cost_model.h"

enum pol_restore_action {
	POL_RESTORE_USE = 0,
	POL_RESTORE_RELOAD = 1,
	POL_RESTORE_RECOMPUTE = 2,
};

const char *pol_restore_action_string(enum pol_restore_action a);

struct pol_restore_opts {
	size_t size; /* sizeof(struct pol_restore_opts) */
	bool allow_segments; /* MSA: reuse blocks after a gap */
	bool no_overlap; /* serial model: reloads then compute */
	double chunk_overhead_s; /* per recompute chunk (0: 20 us) */
};

struct pol_restore_chunk {
	uint32_t first, count; /* blocks */
	double start_s, end_s;
};

#define POL_RESTORE_MAX_BLOCKS 65536

struct pol_restore_plan {
	uint32_t nblocks;
	uint8_t *action; /* enum pol_restore_action per block */
	uint8_t *tier; /* source tier of reloads */
	struct pol_restore_chunk *chunks;
	uint32_t nchunks;
	uint32_t reloads[POL_TIER_COUNT], recomputes, uses;
	unsigned segments; /* contiguous reused runs in the context */
	double reload_s; /* sum of reload times */
	double recompute_s; /* sum of chunk times */
	double serial_s; /* reload_s + recompute_s */
	double total_s; /* makespan with overlap */
};

/*
 * Build a plan for n blocks whose tiers are tiers[0..n).  The plan owns
 * its arrays: free with pol_restore_plan_free().  0, -EINVAL, -ENOMEM.
 */
int pol_restore_plan_build(const struct pol_cost_model *m, const uint8_t *tiers,
			   uint32_t n, const struct pol_restore_opts *o,
			   struct pol_restore_plan *p);
void pol_restore_plan_free(struct pol_restore_plan *p);
/*
 * The modelled makespan of the actions act[0..n) (USE only for GPU
 * blocks, RELOAD only for host and NVMe blocks), whether or not a plan
 * would choose them: the tests compare plans with every alternative.
 * 0 or -EINVAL, -ENOMEM.
 */
int pol_restore_plan_eval(const struct pol_cost_model *m, const uint8_t *tiers,
			  uint32_t n, const struct pol_restore_opts *o,
			  const uint8_t *act, double *total_s);

#endif
