/* SPDX-License-Identifier: MIT */
/*
 * In-process trace replay: drives a pol_cache with a trace and models
 * what serving it would cost (the engine behind kvmm-replay, the sweeps
 * and the tests).
 *
 * Semantics (Documentation/policy.md has the formulas): one shared pool,
 * cold start, requests in timestamp order.  A request hits on the longest
 * run of leading blocks resident in any tier at its arrival; those are
 * served (reloaded from a lower tier or used in place), every block from
 * the first miss on is recomputed; then all its blocks are touched or
 * admitted in order, moving to the GPU tier.  Prefill time is the sum of
 * the reloads and recomputations; TTFT comes from a FIFO queue over
 * `prefill_servers` identical servers fed at the trace timestamps.
 * With daemon_model the cache accesses are kvmmd's (see the option).
 * With msa (Multi-Segment Attention) every block is served from the tier
 * that holds it, wherever it is in the request, and only the blocks in
 * no tier are recomputed (see the option); with both, the opens are
 * kvmmd's PREFIX_OPEN with KVMM_PREFIX_OPEN_SEGMENTS.
 */
#ifndef KVMM_POLICY_REPLAY_H
#define KVMM_POLICY_REPLAY_H

#include <stdbool.h>
#include <stdio.h>

#include "kvmm/policy/cost_model.h"
#include "kvmm/policy/policy.h"
#include "kvmm/policy/trace.h"

#define POL_UNLIMITED (UINT64_MAX / 4)

struct pol_replay_opts {
	size_t size; /* sizeof(struct pol_replay_opts) */
	enum pol_kind kind;
	uint64_t capacity[POL_TIER_COUNT]; /* blocks; POL_UNLIMITED ok */
	const struct pol_cost_model *cost; /* NULL: reference profile */
	unsigned prefill_servers; /* 0: 2 */
	bool cache_output; /* needs pol_trace_infer_outputs() first */
	int prefix_rule; /* -1 policy default, 0 off, 1 on */
	/* called every 1024 requests (may be NULL) */
	void (*progress)(void *arg, size_t done, size_t total);
	void *progress_arg;
	/*
	 * Model kvmmd's cache exactly (kvmm-replay --model-daemon; what
	 * --daemon gives): a request's hits are touched, then only its
	 * blocks in no tier are admitted (a block cached past the first
	 * miss is a duplicate the daemon keeps as it is); every block the
	 * request holds is referenced until it ends (its sequence is open);
	 * no partial-block flag (kvmm blocks are whole); the clock ticks
	 * once for the lookup and once for the publish.  No TTLs, no
	 * --cache-output.  With msa too, each open is one with
	 * KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_SEGMENTS (what
	 * kvmm-replay --daemon --msa sends): the blocks up to the last one
	 * cached are planned as kvmmd's restore mode "plan" does, with this
	 * cost model (a lower-tier block the plan recomputes is a miss), the
	 * holes are published with the new blocks, and the cache is created
	 * without pol_cache_opts.msa (kvmmd's is: the policy's prefix rule).
	 */
	bool daemon_model;
	/* called after each request's lookup with its hits per tier (may be
	 * NULL; kvmm-replay --per-request) */
	void (*request_hits)(void *arg, size_t r, const uint64_t *hits);
	void *request_hits_arg;
	/*
	 * The trace's TTLs (ttl_ms) hold blocks in their tier like pins
	 * (kvmm-replay --ttl-pins hold); by default they are demotable
	 * (pol_cache_set_ttl_demotable): a block may move down a tier when
	 * its tier has nothing else to evict.
	 */
	bool ttl_hold;
	/*
	 * Multi-Segment Attention (kvmm-replay --msa): a block's KV depends
	 * only on the tokens up to it, so a cached block after a missing
	 * one is still exact.  Every block of a request in a tier at its
	 * arrival is served from it (a hit), every block in no tier is
	 * recomputed at its position, with the attention part of its cost
	 * times msa(k), k the number of maximal runs of served blocks in
	 * the request (at least 1, as restore_plan.c counts segments).  The
	 * cache is created with pol_cache_opts.msa: the prefix rule is off
	 * (asym: on) unless prefix_rule says, and asym and belady break ties
	 * by the cheaper miss.  With daemon_model: kvmmd's segmented opens
	 * (above), on a cache without msa (the policy's own prefix rule, as
	 * in kvmmd).
	 */
	bool msa;
	/*
	 * The cache restarts every restart_every requests (kvmm-replay
	 * --restart-every; 0: never): before request N, 2N, ... every tier
	 * is emptied, as a kvmmd restart without an NVMe tier to recover
	 * leaves it, and the policy keeps what it learned from the workload
	 * (pol_cache_learned_save/load: kvmmd --policy-state) unless
	 * restart_forget (then it starts as new, kvmmd without the option).
	 * Not with belady (its future does not restart).
	 */
	uint64_t restart_every;
	bool restart_forget;
	/*
	 * kvmm-replay --policy-state: a saved state (pol_cache_learned_save()
	 * bytes) loaded before the first request (NULL: none), and where to
	 * put the state at the end (NULL: nowhere; *learned_out is malloc'd,
	 * NULL with length 0 when the policy learns nothing).
	 */
	const void *learned_in;
	size_t learned_in_len;
	void **learned_out;
	size_t *learned_out_len;
	/*
	 * Tenant limits (kvmm-replay --tenant-limit; pol_cache_tenant_limit()
	 * on the cache, again after each restart): each request's blocks are
	 * charged to its trace "tenant" (0 without one).  At most
	 * POL_REPLAY_TENANTS - 1: their result rows are made first.
	 */
	const struct pol_replay_limit *tenant_limits;
	size_t ntenant_limits;
};

struct pol_replay_limit {
	uint32_t id;
	uint64_t blocks[POL_TIER_COUNT];
};

/* Per tenant of the trace (requests' "tenant"): the first
 * POL_REPLAY_TENANTS - 1 seen, then one row for the rest (id
 * POL_TENANT_OTHERS). */
#define POL_REPLAY_TENANTS 16
struct pol_replay_tenant {
	uint32_t id;
	uint64_t requests, blocks, hit_blocks;
	uint64_t limit[POL_TIER_COUNT]; /* its limit (0: none) */
	uint64_t limit_moves; /* blocks moved for it (every cache's, restarts
			       * included) */
};

struct pol_replay_result {
	enum pol_kind kind;
	uint64_t capacity[POL_TIER_COUNT];
	bool msa;
	uint64_t requests, blocks, hit_blocks;
	/* hits in the leading run of each request (a prefix cache's hits;
	 * hit_blocks without msa) */
	uint64_t leading_hit_blocks;
	uint64_t tokens, hit_tokens;
	uint64_t hits[POL_TIER_COUNT];
	uint64_t recomputed_blocks;
	uint64_t demotions[POL_TIER_COUNT], drops;
	uint64_t ttl_demotions; /* victims that only a demotable TTL held */
	double modeled_prefill_s, modeled_prefill_nocache_s, reuse_overhead_s;
	double ttft_mean_s, ttft_p99_s;
	unsigned prefill_servers;
	char profile[64];
	double wall_s;
	/* restarts (opts.restart_every), and the lives the learned state
	 * carried at the last one (0 when forgotten or nothing learned) */
	uint64_t restarts, restart_lives;
	bool restart_forget;
	/* tenants (in the order first seen); the JSON lists them when the
	 * trace has more than one, or a limit was given */
	size_t ntenants;
	bool tenants_limited;
	struct pol_replay_tenant tenants[POL_REPLAY_TENANTS];
};

int pol_replay_run(const struct pol_trace *t, const struct pol_replay_opts *o,
		   struct pol_replay_result *res);

/*
 * Shared by pol_replay_run() and kvmm-replay's --daemon driver so both
 * account identically.  pol_replay_begin: zero res and fill in what the
 * options say; returns the cost model to use (o->cost, or the reference
 * profile loaded into ref).  pol_replay_count: add one request with k of
 * its blocks hit, its modelled prefill cost and its cost with no cache.
 */
const struct pol_cost_model *pol_replay_begin(const struct pol_replay_opts *o,
					      unsigned servers,
					      struct pol_cost_model *ref,
					      struct pol_replay_result *res);
void pol_replay_count(struct pol_replay_result *res,
		      const struct pol_trace_req *q, uint32_t k, double cost,
		      double nocache);

/*
 * Multi-Segment Attention accounting, shared the same way.
 * pol_replay_msa_terms: rc[i] = recompute(i) and attn[i] its attention
 * part for i in 0..nblocks; returns the linear part (the same for every
 * block).  pol_replay_msa_request: add one request whose blocks are
 * served from where[0..n) (POL_TIER_NONE: recomputed) to res (hits per
 * tier, segments, tokens, modelled prefill, reuse overhead: a block
 * whose hash is in seen was in an earlier request; marks them); returns
 * its modelled prefill.  bcost is scratch of n.
 */
double pol_replay_msa_terms(const struct pol_cost_model *m, uint32_t nblocks,
			    double *rc, double *attn);
struct pol_hmap;
double pol_replay_msa_request(const struct pol_cost_model *m,
			      struct pol_replay_result *res,
			      const struct pol_trace_req *q, const uint64_t *h,
			      const uint8_t *where, double lin,
			      const double *rc, const double *attn,
			      struct pol_hmap *seen, double *bcost);
/* Fill ttft_mean_s / ttft_p99_s from per-request modelled prefill times. */
void pol_replay_queue(const struct pol_trace *t, const double *prefill,
		      unsigned servers, double *free_at, double *ttft,
		      struct pol_replay_result *res);

double pol_replay_hit_ratio(const struct pol_replay_result *r);
double pol_replay_token_ratio(const struct pol_replay_result *r);

/* One JSON object (no newline). */
void pol_replay_json(const struct pol_replay_result *r, FILE *f);

#endif
