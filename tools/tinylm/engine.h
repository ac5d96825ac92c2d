/* SPDX-License-Identifier: MIT */
/*
 * tinylm engine: runs prompts and multi-turn conversations over a model and
 * a KV cache, the way a serving engine would: open a sequence (prefix
 * lookup), prefill what is not cached, decode, close.  Prints one line per
 * generated token and keeps the counters the demo reports.
 */
#ifndef TINYLM_ENGINE_H
#define TINYLM_ENGINE_H

#include <stdio.h>

#include "tinylm.h"

struct tlm_engine_opts {
	size_t size; /* sizeof(struct tlm_engine_opts) */
	const struct tlm_model *model;
	int chunk; /* prefill chunk size */
	int max_seqs, max_tokens;
	const char *kv_kind; /* "private" or "kvmm" */
	const char *socket_path; /* kvmm only; NULL = default */
	float temperature;
	uint64_t sample_seed;
	bool quiet;
	unsigned int step_delay_us; /* sleep after each step (tests) */
	/* kvmm only: prefix opens reuse cached blocks after a hole
	 * (KVMM_PREFIX_OPEN_SEGMENTS; the holes are recomputed) */
	bool prefix_segments;
	/* ... and, with it, return from the open before the reloads are
	 * done (KVMM_PREFIX_OPEN_EARLY where kvmmd has it): each hole is
	 * recomputed once the blocks before it are ready */
	bool prefix_early;
	FILE *out;
};

struct tlm_engine_stats {
	long sequences;
	long tokens_generated;
	long prefill_tokens; /* computed */
	/* prefix tokens not computed up to the prefill (Documentation/tinylm.md) */
	long prefill_tokens_skipped;
	long prompt_tokens;
	long steps;
	long shared_blocks; /* prompt blocks mapped zero-copy */
	long restored_host; /* ... reloaded from host memory */
	long restored_nvme; /* ... reloaded from NVMe */
	long recomputed_blocks; /* ... recomputed at their positions */
	long reused_after_hole; /* ... reused after a recomputed block */
	long reload_failures; /* ... reloads that failed: recomputed */
	long early_opens; /* opens answered before their reloads were done */
	/* from each open to its whole prefix valid (reloads waited for, the
	 * plan's blocks and the holes recomputed): the restore's makespan */
	uint64_t prefix_ready_ns;

	long prefix_blocks; /* prompt blocks found cached */
	/* published, missing past the found prefix, prefilled again */
	long evicted_blocks_recomputed;
	long recomputed_tokens;
	long pool_waits; /* steps that waited for a full pool */
	long revocations_seen; /* steps that found pages taken back */
	long revoked_blocks_recomputed; /* ... and the blocks recomputed */
	long revoked_tokens_recomputed;
	/* prompts found whole: the last token recomputed in a copy of its
	 * block (kvmm ABI 1.20) */
	long blocks_unshared;
};

struct tlm_engine;

int tlm_engine_create(const struct tlm_engine_opts *o, struct tlm_engine **out,
		      char *err, size_t errlen);
void tlm_engine_destroy(struct tlm_engine *e);
const char *tlm_engine_error(const struct tlm_engine *e);
const struct tlm_engine_stats *tlm_engine_stats(const struct tlm_engine *e);

/*
 * One turn: tokens[0, len) is the prompt; gen tokens are generated and
 * appended at tokens[len, len + gen) (the buffer must hold them).  The
 * sampling draws from (sample seed, conv, turn, repeat, index): repeat 0
 * for a turn's first ask, 1 for the same prompt asked again (a
 * regenerate), which samples anew.
 */
int tlm_engine_run_turn(struct tlm_engine *e, int *tokens, int len, int gen,
			int conv, int turn, int repeat);
int tlm_engine_run_prompt(struct tlm_engine *e, const int *prompt, int len,
			  int gen);
int tlm_engine_run_workload(struct tlm_engine *e,
			    const struct tlm_workload_params *wl, int client,
			    int clients);
void tlm_engine_print_stats(const struct tlm_engine *e, double wall_s, FILE *f);

void tlm_workload_print(const struct tlm_workload_params *wl, FILE *f);

#endif
