/* SPDX-License-Identifier: MIT */
/*
 * What a replayed trace cost (replay.h): each request's modelled
 * prefill and hits counted into the result (also under MSA), the FIFO
 * queue over the prefill servers that gives TTFT, and the result as
 * JSON.  Shared by pol_replay_run() and kvmm-replay's --daemon driver so
 * both account identically; apart from the replay loop (replay.c) for
 * that reason.
 */
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/hmap.h"
#include "kvmm/policy/replay.h"
#include "kvmm/policy/replay_priv.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double pol_replay_hit_ratio(const struct pol_replay_result *r)
{
	return r->blocks ? (double)r->hit_blocks / (double)r->blocks : 0;
}

double pol_replay_token_ratio(const struct pol_replay_result *r)
{
	return r->tokens ? (double)r->hit_tokens / (double)r->tokens : 0;
}

/* The row of tenant id in res, made on first sight (the shared last one
 * once the others are taken). */
struct pol_replay_tenant *replay_tenant_row(struct pol_replay_result *res,
					    uint32_t id)
{
	for (size_t i = 0; i < res->ntenants; i++)
		if (res->tenants[i].id == id)
			return &res->tenants[i];
	if (res->ntenants == POL_REPLAY_TENANTS - 1) {
		res->tenants[res->ntenants++].id = POL_TENANT_OTHERS;
		return &res->tenants[res->ntenants - 1];
	}
	if (res->ntenants == POL_REPLAY_TENANTS)
		return &res->tenants[POL_REPLAY_TENANTS - 1];
	res->tenants[res->ntenants].id = id;
	return &res->tenants[res->ntenants++];
}

const struct pol_cost_model *pol_replay_begin(const struct pol_replay_opts *o,
					      unsigned servers,
					      struct pol_cost_model *ref,
					      struct pol_replay_result *res)
{
	const struct pol_cost_model *m = o->cost;

	if (!m) {
		pol_cost_reference(ref);
		m = ref;
	}
	memset(res, 0, sizeof(*res));
	/* the limited tenants' rows first: at most POL_REPLAY_TENANTS - 1
	 * limits, so each gets its own, never the others' */
	for (size_t i = 0; i < o->ntenant_limits && i < POL_REPLAY_TENANTS - 1;
	     i++)
		memcpy(replay_tenant_row(res, o->tenant_limits[i].id)->limit,
		       o->tenant_limits[i].blocks,
		       sizeof(res->tenants[0].limit));
	res->tenants_limited = o->ntenant_limits > 0;
	res->kind = o->kind;
	res->msa = o->msa;
	res->prefill_servers = servers;
	snprintf(res->profile, sizeof(res->profile), "%s", m->name);
	memcpy(res->capacity, o->capacity, sizeof(res->capacity));
	return m;
}

void pol_replay_count(struct pol_replay_result *res,
		      const struct pol_trace_req *q, uint32_t k, double cost,
		      double nocache)
{
	struct pol_replay_tenant *tn = replay_tenant_row(res, q->tenant);
	uint32_t n = q->nblocks;

	tn->requests++;
	tn->blocks += n;
	tn->hit_blocks += k;
	/* the hit blocks' tokens: whole blocks, or the whole input when
	 * every block hit (the last one may be partial) */
	if (k)
		res->hit_tokens +=
			k < n ? (uint64_t)k * POL_TRACE_BLOCK_TOKENS :
				q->input_length;
	res->requests++;
	res->blocks += n;
	res->hit_blocks += k;
	res->leading_hit_blocks += k;
	res->tokens += q->input_length;
	res->recomputed_blocks += n - k;
	res->modeled_prefill_s += cost;
	res->modeled_prefill_nocache_s += nocache;
}

/*
 * The cost of each block of a request under MSA (pol_replay_opts.msa):
 * where[i] is block i's tier at the request's arrival, POL_TIER_NONE when
 * it is in no tier.  With k the number of maximal runs of served blocks
 * (at least 1; restore_plan.c's count of the segments of the context),
 *
 *   bc[i] = 0                                 on the GPU
 *         = reload(tier)                      in a lower tier
 *         = lin + attn[i] * msa(k)            in no tier (recomputed)
 *
 * lin and attn[i] the linear and the attention part of recompute(i).
 * A prefix hit is one segment and costs what the reference rule gives.
 * Returns the number of served blocks.
 */
static uint32_t msa_costs(const struct pol_cost_model *m, const uint8_t *where,
			  uint32_t n, double lin, const double *attn,
			  double *bc)
{
	uint32_t served = 0;
	unsigned k = 0;
	double f;

	for (uint32_t i = 0; i < n; i++)
		if (where[i] != POL_TIER_NONE) {
			served++;
			k += !i || where[i - 1] == POL_TIER_NONE;
		}
	f = pol_cost_msa_factor(m, k ? k : 1);
	for (uint32_t i = 0; i < n; i++)
		bc[i] = where[i] == POL_TIER_GPU ?
				0 :
			where[i] != POL_TIER_NONE ?
				pol_cost_reload_block_s(m, where[i]) :
				lin + attn[i] * f;
	return served;
}

/* pol_replay_count() for a request served under MSA: `served` blocks
 * hit, `lead` of them the leading run; the last block counts its real
 * tokens. */
static void msa_count(struct pol_replay_result *res,
		      const struct pol_trace_req *q, const uint8_t *where,
		      uint32_t lead, uint32_t served, double cost,
		      double nocache)
{
	uint32_t n = q->nblocks;

	pol_replay_count(res, q, 0, cost, nocache);
	replay_tenant_row(res, q->tenant)->hit_blocks += served;
	res->hit_blocks += served;
	res->leading_hit_blocks += lead;
	res->recomputed_blocks -= served;
	res->hit_tokens += (uint64_t)served * POL_TRACE_BLOCK_TOKENS;
	if (n && where[n - 1] != POL_TIER_NONE)
		res->hit_tokens -=
			(uint64_t)n * POL_TRACE_BLOCK_TOKENS - q->input_length;
}

double pol_replay_msa_terms(const struct pol_cost_model *m, uint32_t nblocks,
			    double *rc, double *attn)
{
	/* recompute(i) = lin + attn[i], the attention part scaled */
	double lin = pol_cost_compute_s(m, m->linear_flops_per_token *
						   m->tokens_per_block);

	for (uint32_t i = 0; i <= nblocks; i++) {
		rc[i] = pol_cost_recompute_block_s(m, i);
		attn[i] = rc[i] - lin;
	}
	return lin;
}

double pol_replay_msa_request(const struct pol_cost_model *m,
			      struct pol_replay_result *res,
			      const struct pol_trace_req *q, const uint64_t *h,
			      const uint8_t *where, double lin,
			      const double *rc, const double *attn,
			      struct pol_hmap *seen, double *bcost)
{
	uint32_t n = q->nblocks, served, lead = 0;
	double cost = 0, nocache = 0;

	served = msa_costs(m, where, n, lin, attn, bcost);
	while (lead < n && where[lead] != POL_TIER_NONE)
		lead++;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t *s = pol_hmap_slot(seen, h[i]);

		cost += bcost[i];
		nocache += rc[i];
		if (*s != UINT32_MAX)
			res->reuse_overhead_s += bcost[i];
		*s = 1;
		if (where[i] != POL_TIER_NONE)
			res->hits[where[i]]++;
	}
	msa_count(res, q, where, lead, served, cost, nocache);
	return cost;
}

/*
 * TTFT from a FIFO queue over identical prefill servers, requests arriving at
 * their trace timestamps: time to first token = wait + modelled prefill.
 * free_at (servers entries, zeroed) and ttft (nreqs entries) are scratch.
 * Shared by the in-process replay and the --daemon driver so both model the
 * queue identically.
 */
void pol_replay_queue(const struct pol_trace *t, const double *prefill,
		      unsigned servers, double *free_at, double *ttft,
		      struct pol_replay_result *res)
{
	double sum = 0;

	for (size_t r = 0; r < t->nreqs; r++) {
		/* from the first request: a Unix epoch in ms stays exact */
		double arrival = (double)(t->reqs[r].timestamp_ms -
					  t->reqs[0].timestamp_ms) /
				 1000.0;
		unsigned best = 0;

		for (unsigned s = 1; s < servers; s++)
			if (free_at[s] < free_at[best])
				best = s;
		double start = free_at[best] > arrival ? free_at[best] :
							 arrival;
		free_at[best] = start + prefill[r];
		ttft[r] = free_at[best] - arrival;
		sum += ttft[r];
	}
	if (!t->nreqs)
		return;
	qsort(ttft, t->nreqs, sizeof(*ttft), cmp_double);
	res->ttft_mean_s = sum / (double)t->nreqs;
	res->ttft_p99_s = ttft[(size_t)(0.99 * (double)t->nreqs)];
}

static void json_cap(FILE *f, const char *key, uint64_t v)
{
	if (v >= POL_UNLIMITED)
		fprintf(f, "\"%s\":null", key);
	else
		fprintf(f, "\"%s\":%llu", key, (unsigned long long)v);
}

void pol_replay_json(const struct pol_replay_result *r, FILE *f)
{
	fprintf(f, "{\"policy\":\"%s\",", pol_kind_string(r->kind));
	json_cap(f, "gpu_blocks", r->capacity[POL_TIER_GPU]);
	fputc(',', f);
	json_cap(f, "host_blocks", r->capacity[POL_TIER_HOST]);
	fputc(',', f);
	json_cap(f, "nvme_blocks", r->capacity[POL_TIER_NVME]);
	fprintf(f,
		",\"profile\":\"%s\",\"prefill_servers\":%u,\"msa\":%s,"
		"\"requests\":%llu,\"blocks\":%llu,\"hit_blocks\":%llu,"
		"\"hit_ratio_blocks\":%.6f,\"leading_hit_blocks\":%llu,"
		"\"tokens\":%llu,"
		"\"hit_tokens\":%llu,\"hit_ratio_tokens\":%.6f,"
		"\"hits\":{\"gpu\":%llu,\"host\":%llu,\"nvme\":%llu},"
		"\"recomputed_blocks\":%llu,"
		"\"demotions\":{\"gpu\":%llu,\"host\":%llu},\"drops\":%llu,"
		"\"ttl_demotions\":%llu,"
		"\"modeled_prefill_s\":%.6f,"
		"\"modeled_prefill_s_nocache\":%.6f,"
		"\"reuse_overhead_s\":%.6f,\"ttft_mean_s\":%.6f,"
		"\"ttft_p99_s\":%.6f,\"wall_s\":%.3f",
		r->profile, r->prefill_servers, r->msa ? "true" : "false",
		(unsigned long long)r->requests, (unsigned long long)r->blocks,
		(unsigned long long)r->hit_blocks, pol_replay_hit_ratio(r),
		(unsigned long long)r->leading_hit_blocks,
		(unsigned long long)r->tokens,
		(unsigned long long)r->hit_tokens, pol_replay_token_ratio(r),
		(unsigned long long)r->hits[0], (unsigned long long)r->hits[1],
		(unsigned long long)r->hits[2],
		(unsigned long long)r->recomputed_blocks,
		(unsigned long long)r->demotions[0],
		(unsigned long long)r->demotions[1],
		(unsigned long long)r->drops,
		(unsigned long long)r->ttl_demotions, r->modeled_prefill_s,
		r->modeled_prefill_nocache_s, r->reuse_overhead_s,
		r->ttft_mean_s, r->ttft_p99_s, r->wall_s);
	if (r->restarts)
		fprintf(f,
			",\"restarts\":%llu,\"restart_learned\":\"%s\","
			"\"restart_lives\":%llu",
			(unsigned long long)r->restarts,
			r->restart_forget ? "forgotten" : "kept",
			(unsigned long long)r->restart_lives);
	if (r->ntenants > 1 || r->tenants_limited) {
		fprintf(f, ",\"tenants\":[");
		for (size_t i = 0; i < r->ntenants; i++) {
			const struct pol_replay_tenant *t = &r->tenants[i];

			if (t->id == POL_TENANT_OTHERS)
				fprintf(f, "%s{\"id\":\"others\"",
					i ? "," : "");
			else
				fprintf(f, "%s{\"id\":%u", i ? "," : "", t->id);
			fprintf(f,
				",\"requests\":%llu,\"blocks\":%llu,"
				"\"hit_blocks\":%llu,\"hit_ratio_blocks\":%.6f,"
				"\"limit_blocks\":{\"gpu\":%llu,\"host\":%llu,"
				"\"nvme\":%llu},\"limit_moves\":%llu}",
				(unsigned long long)t->requests,
				(unsigned long long)t->blocks,
				(unsigned long long)t->hit_blocks,
				t->blocks ? (double)t->hit_blocks /
						    (double)t->blocks :
					    0,
				(unsigned long long)t->limit[0],
				(unsigned long long)t->limit[1],
				(unsigned long long)t->limit[2],
				(unsigned long long)t->limit_moves);
		}
		fputc(']', f);
	}
	fputc('}', f);
}
