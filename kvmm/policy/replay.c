/* SPDX-License-Identifier: MIT */
/*
 * Trace replay engine (see replay.h).  A first pass computes, for belady,
 * the next request that uses each block occurrence; the main pass runs
 * the cache and the cost accounting; a last pass runs the FIFO queue.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvmm/policy/hmap.h"
#include "kvmm/policy/replay.h"
#include "kvmm/policy/restore_plan.h"

/* Index slots loaded ahead of the prefix lookup (pol_cache_prefetch). */
#define REPLAY_AHEAD 4

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * next[j] for every input block occurrence j and nextout[j] for every
 * output block: the index of the next request touching that hash.
 */
static int next_uses(const struct pol_trace *t, bool with_out, uint64_t *next,
		     uint64_t *nextout)
{
	struct pol_hmap m;

	if (pol_hmap_init(&m, t->nhashes + t->nout_hashes))
		return -ENOMEM;
	for (size_t r = t->nreqs; r-- > 0;) {
		const struct pol_trace_req *q = &t->reqs[r];

		if (with_out)
			for (uint32_t i = 0; i < q->nout; i++) {
				uint32_t *s = pol_hmap_slot(
					&m, t->out_hashes[q->out_first + i]);
				nextout[q->out_first + i] =
					*s == UINT32_MAX ? UINT64_MAX : *s;
			}
		for (uint32_t i = 0; i < q->nblocks; i++) {
			uint32_t *s =
				pol_hmap_slot(&m, t->hashes[q->first + i]);
			next[q->first + i] = *s == UINT32_MAX ? UINT64_MAX : *s;
		}
		if (with_out)
			for (uint32_t i = 0; i < q->nout; i++)
				*pol_hmap_slot(
					&m, t->out_hashes[q->out_first + i]) =
					(uint32_t)r;
		for (uint32_t i = 0; i < q->nblocks; i++)
			*pol_hmap_slot(&m, t->hashes[q->first + i]) =
				(uint32_t)r;
	}
	pol_hmap_fini(&m);
	return 0;
}

double pol_replay_hit_ratio(const struct pol_replay_result *r)
{
	return r->blocks ? (double)r->hit_blocks / (double)r->blocks : 0;
}

double pol_replay_token_ratio(const struct pol_replay_result *r)
{
	return r->tokens ? (double)r->hit_tokens / (double)r->tokens : 0;
}

/* One block as kvmmd's cache.c touches it: access, then a reference
 * from the sequence if the block stayed resident. */
static void daemon_touch(struct pol_cache *c, const uint64_t *h, uint32_t i,
			 unsigned few, uint32_t tenant, uint64_t *refd,
			 uint32_t *nref, uint64_t *down, uint32_t *ndown)
{
	struct pol_block_desc d = { .hash = h[i],
				    .parent_hash = i ? h[i - 1] : 0,
				    .position = i,
				    .flags = (i ? POL_BLOCK_HAS_PARENT : 0) |
					     few,
				    .tenant = tenant };

	if (pol_cache_access(c, &d, NULL))
		return;
	/* the policy moved the block it just admitted out of the GPU tier:
	 * kvmmd copies the pages the sequence holds down (kc_move(),
	 * held_copy), the block stays cached below, unreferenced, and the
	 * sequence's publish of it is a duplicate; in the last tier it was
	 * dropped (in no tier) */
	if (pol_cache_tier_of(c, h[i]) != POL_TIER_GPU) {
		if (pol_cache_tier_of(c, h[i]) != POL_TIER_NONE)
			down[(*ndown)++] = h[i];
		return;
	}
	if (pol_cache_ref(c, h[i]) == 0)
		refd[(*nref)++] = h[i];
}

/* The block went down from the pages this request holds (daemon_touch). */
static bool daemon_went_down(const uint64_t *down, uint32_t ndown,
			     uint64_t hash)
{
	for (uint32_t j = 0; j < ndown; j++)
		if (down[j] == hash)
			return true;
	return false;
}

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

/*
 * kvmmd's plan for an open with KVMM_PREFIX_OPEN_ACTIONS |
 * KVMM_PREFIX_OPEN_SEGMENTS in restore mode "plan" (kd_cache_plan() over
 * kc_prefix_tiers()): the blocks up to the last one in some tier, where[]
 * their tiers; a lower-tier block the plan (with allow_segments, cost
 * model m) recomputes becomes DM_RECOMPUTE and in no tier in where[] (the
 * client recomputes it: a miss).  The opens are not early
 * (KVMM_PREFIX_OPEN_EARLY): the reply waits for every reload, so kvmmd
 * plans them serially (no_overlap), and on the reference profile, where
 * a reload beats recomputing its block, recomputes none.  A plan that
 * cannot be built reloads everything, as kvmmd's.
 */
static void daemon_plan(const struct pol_cost_model *m, uint8_t *where,
			uint32_t n, uint8_t *act)
{
	struct pol_restore_opts o = { .size = sizeof(o),
				      .allow_segments = true,
				      .no_overlap = true };
	struct pol_restore_plan p;
	uint32_t lim = 0;
	bool lower = false;

	for (uint32_t i = 0; i < n; i++)
		if (where[i] != POL_TIER_NONE) {
			lim = i + 1;
			lower |= where[i] != POL_TIER_GPU;
		}
	for (uint32_t i = 0; i < n; i++)
		act[i] = i >= lim		   ? DM_NEW :
			 where[i] == POL_TIER_NONE ? DM_HOLE :
			 where[i] == POL_TIER_GPU  ? DM_USE :
						     DM_RELOAD;
	if (!lower)
		return; /* shares and holes: nothing to decide */
	memset(&p, 0, sizeof(p));
	if (pol_restore_plan_build(m, where, lim, &o, &p))
		return;
	for (uint32_t i = 0; i < lim && i < p.nblocks; i++)
		if (act[i] == DM_RELOAD &&
		    p.action[i] == POL_RESTORE_RECOMPUTE) {
			act[i] = DM_RECOMPUTE;
			where[i] = POL_TIER_NONE;
		}
	pol_restore_plan_free(&p);
}

/*
 * A request as kvmmd sees it (pol_replay_opts.daemon_model): act[0..n)
 * says what its open did with each block (the hits a leading run without
 * msa); refd has room for 2 * n hashes.  The order of the policy calls
 * is kvmmd's (cache_prefix.c, cache_restore.c, cache.c):
 *
 *   PREFIX_OPEN (kc_prefix_walk)  pin every cached block of the matched
 *                                 prefix (past holes); share the GPU
 *                                 blocks in prefix order; submit the
 *                                 restores; unpin (the restored blocks
 *                                 stay pinned while their copies run);
 *                                 reap
 *   restores settle               in submission (prefix) order, each
 *                                 unpinned, touched, reaped
 *   BLOCK_PUBLISH                 from the first block recomputed (hole,
 *                                 planned recompute) or new on: a block
 *                                 on the GPU is a duplicate, one in no
 *                                 tier admitted (a shared or restored
 *                                 block too, when its own touch lost
 *                                 it), one below promoted when the GPU
 *                                 can take it
 *   SEQ_CLOSE                     the sequence's references go
 */
static void daemon_request(struct pol_cache *c, const uint64_t *h, uint32_t n,
			   const uint8_t *act, uint64_t clock, uint32_t tenant,
			   uint64_t *refd)
{
	uint64_t *down = refd + n;
	uint32_t nref = 0, ndown = 0, p0 = n;
	/* kvmmd asks at PREFIX_OPEN, before it touches anything, and keeps
	 * the answer with the sequence for its publishes */
	unsigned few = pol_cache_few_new(c, h, n) ? POL_BLOCK_FEW_NEW : 0;

	pol_cache_set_clock(c, clock); /* PREFIX_OPEN: pins the prefix */
	for (uint32_t i = 0; i < n; i++)
		if (act[i] == DM_USE || act[i] == DM_RELOAD ||
		    act[i] == DM_RECOMPUTE)
			pol_cache_ref(c, h[i]);
	/* kvmmd shares the GPU blocks at once and releases its pins on the
	 * prefix; the blocks it restores from a lower tier stay pinned while
	 * their copies run and are touched when the restores are settled,
	 * after the pin is released (kc_restore_settle), in prefix order
	 * (the order it submitted them, kc_restored_next), each followed by
	 * a reap; a block the plan recomputes is left where it is */
	for (uint32_t i = 0; i < n; i++)
		if (act[i] == DM_USE)
			daemon_touch(c, h, i, few, tenant, refd, &nref, down,
				     &ndown);
	for (uint32_t i = 0; i < n; i++)
		if (act[i] == DM_USE || act[i] == DM_RECOMPUTE)
			pol_cache_unref(c, h[i]);
	for (uint32_t i = 0; i < n; i++)
		if (act[i] == DM_RELOAD) {
			pol_cache_unref(c, h[i]);
			daemon_touch(c, h, i, few, tenant, refd, &nref, down,
				     &ndown);
		}
	/* one publish, from the first block the client fills on (as
	 * tinylm does, and kvmm-replay --daemon) */
	for (uint32_t i = 0; i < n && p0 == n; i++)
		if (act[i] != DM_USE && act[i] != DM_RELOAD)
			p0 = i;
	pol_cache_set_clock(c, clock + 1); /* BLOCK_PUBLISH */
	for (uint32_t i = p0; i < n; i++) {
		unsigned t = pol_cache_tier_of(c, h[i]);

		/* a block it shared or restored is still on the GPU, held,
		 * and a duplicate; or the policy gave it up in the call
		 * that took it (daemon_touch() above) and the cache let go
		 * of the pages (kc_put_block()): the publish caches them
		 * again, like any block in no tier */
		if (daemon_went_down(down, ndown, h[i])) {
			/* copied down from these very pages (held_copy):
			 * the sequence's block keeps the hash, a
			 * duplicate */
			continue;
		} else if (t == POL_TIER_NONE) {
			daemon_touch(c, h, i, few, tenant, refd, &nref, down,
				     &ndown);
		} else if (t != POL_TIER_GPU &&
			   pol_cache_can_promote(c, POL_TIER_GPU, h[i]) &&
			   !pol_cache_pin(c, h[i])) {
			/* cached below past the first miss (or handed out
			 * to recompute): the published pages become its
			 * GPU copy (kc_publish_promote(), pinned while it
			 * moves up), when the GPU tier has a victim other
			 * than the block's parent, kvmmd's own test; kvmmd
			 * too while its copy down or its host -> NVMe write
			 * runs (kc_call_off_copy()) */
			daemon_touch(c, h, i, few, tenant, refd, &nref, down,
				     &ndown);
			(void)pol_cache_unpin(c, h[i]);
		}
	}
	for (uint32_t i = 0; i < nref; i++) /* SEQ_CLOSE */
		pol_cache_unref(c, refd[i]);
}

/* The row of tenant id in res, made on first sight (the shared last one
 * once the others are taken). */
static struct pol_replay_tenant *tenant_row(struct pol_replay_result *res,
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
		memcpy(tenant_row(res, o->tenant_limits[i].id)->limit,
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
	struct pol_replay_tenant *tn = tenant_row(res, q->tenant);
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
	tenant_row(res, q->tenant)->hit_blocks += served;
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

/* Add c's moves (demotions, drops, TTL demotions) to res: once per cache,
 * a restart's old one and the last. */
static void add_moves(struct pol_cache *c, struct pol_replay_result *res)
{
	struct pol_cache_stats st;

	pol_cache_get_stats(c, &st);
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		res->demotions[t] += st.demotions[t];
	res->drops += st.drops;
	res->ttl_demotions += st.ttl_demotions;
}

/* What c's policy learned, in new memory: 0 with *buf NULL and *len 0
 * when it learns nothing, or -ENOMEM. */
static int learned_copy(struct pol_cache *c, void **buf, size_t *len)
{
	*len = pol_cache_learned_save(c, NULL, 0);
	*buf = NULL;
	if (!*len)
		return 0;
	*buf = malloc(*len);
	if (!*buf)
		return -ENOMEM;
	pol_cache_learned_save(c, *buf, *len);
	return 0;
}

/* o's tenant limits on cache c (made just now). */
static int apply_limits(const struct pol_replay_opts *o, struct pol_cache *c)
{
	for (size_t i = 0; i < o->ntenant_limits; i++) {
		int e = pol_cache_tenant_limit(c, o->tenant_limits[i].id,
					       o->tenant_limits[i].blocks);

		if (e)
			return e;
	}
	return 0;
}

/* The blocks cache c moved for each tenant's limits (one cache's: each
 * cache is added once, at its restart or at the end). */
static void add_tenants(const struct pol_replay_opts *o, struct pol_cache *c,
			struct pol_replay_result *res)
{
	struct pol_tenant_count *rows = calloc(POL_TENANT_ROWS, sizeof(*rows));
	size_t n = rows ? pol_cache_tenants(c, rows, POL_TENANT_ROWS) : 0;

	for (size_t i = 0; i < n && i < POL_TENANT_ROWS; i++)
		if (rows[i].limit_moves)
			tenant_row(res, rows[i].id)->limit_moves +=
				rows[i].limit_moves;
	free(rows);
}

/*
 * Restart the cache: a new one with the same options, every tier empty,
 * loaded with what the old one's policy learned unless o->restart_forget.
 * The old cache's move statistics go into res first.
 */
static int replay_restart(const struct pol_replay_opts *o,
			  const struct pol_cache_opts *co, struct pol_cache **c,
			  struct pol_replay_result *res)
{
	struct pol_cache *n = NULL;
	size_t len = 0;
	void *buf = NULL;
	int e;

	add_moves(*c, res);
	add_tenants(o, *c, res);
	if (!o->restart_forget && learned_copy(*c, &buf, &len))
		return -ENOMEM;
	e = pol_cache_create(co, &n);
	if (!e)
		e = apply_limits(o, n);
	if (!e && buf)
		e = pol_cache_learned_load(n, buf, len, &res->restart_lives);
	free(buf);
	if (e) {
		if (n)
			pol_cache_destroy(n);
		return e;
	}
	pol_cache_destroy(*c);
	*c = n;
	res->restarts++;
	return 0;
}

int pol_replay_run(const struct pol_trace *t, const struct pol_replay_opts *o,
		   struct pol_replay_result *res)
{
	struct pol_cost_model refm;
	const struct pol_cost_model *m;
	struct pol_cache_opts co = { .size = sizeof(co) };
	struct pol_cache *c = NULL;
	uint64_t *next = NULL, *nextout = NULL;
	double *prefill = NULL, *ttft = NULL, *rc = NULL, *free_at = NULL;
	double *attn = NULL, *bcost = NULL, lin = 0;
	uint8_t *where = NULL, *act = NULL;
	uint64_t *refd = NULL;
	struct pol_hmap seen;
	uint32_t maxblocks = 0;
	struct timespec t0, t1;
	unsigned servers;
	uint64_t last_ms = UINT64_MAX, sub = 0, first_ms;
	int e;

	if (!o || o->size < sizeof(*o) || !t || !res ||
	    o->ntenant_limits > POL_REPLAY_TENANTS - 1)
		return -EINVAL;
	if (t->nreqs && pol_trace_clock_check(t, NULL, 0))
		return -ERANGE;
	if (o->daemon_model && o->cache_output)
		return -EOPNOTSUPP;
	/* kvmmd sets no TTL or priority from a prefix open: no model of it */
	if (o->daemon_model && pol_trace_has_ttl(t, NULL))
		return -EOPNOTSUPP;
	servers = o->prefill_servers ? o->prefill_servers : 2;
	first_ms = t->nreqs ? t->reqs[0].timestamp_ms : 0;
	if (o->restart_every && o->kind == POL_BELADY)
		return -EOPNOTSUPP;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	m = pol_replay_begin(o, servers, &refm, res);
	for (size_t r = 0; r < t->nreqs; r++)
		if (t->reqs[r].nblocks + t->reqs[r].nout > maxblocks)
			maxblocks = t->reqs[r].nblocks + t->reqs[r].nout;

	co.kind = o->kind;
	memcpy(co.capacity, o->capacity, sizeof(co.capacity));
	co.prefix_rule = o->prefix_rule;
	/* kvmmd's cache is made without it (the policy's prefix rule) */
	co.msa = o->msa && !o->daemon_model;
	co.cost = m;
	co.block_bytes = (uint64_t)pol_cost_block_bytes(m);
	co.expected_blocks = 1024;
	e = pol_cache_create(&co, &c);
	if (e)
		return e;
	e = apply_limits(o, c);
	if (e) {
		pol_cache_destroy(c);
		return e;
	}
	if (o->learned_in) {
		e = pol_cache_learned_load(c, o->learned_in, o->learned_in_len,
					   NULL);
		if (e) {
			pol_cache_destroy(c);
			return e;
		}
	}
	e = -ENOMEM;
	next = malloc((t->nhashes + 1) * sizeof(*next));
	nextout = malloc((t->nout_hashes + 1) * sizeof(*nextout));
	prefill = malloc(t->nreqs * sizeof(*prefill));
	ttft = malloc(t->nreqs * sizeof(*ttft));
	rc = malloc((maxblocks + 1) * sizeof(*rc));
	where = malloc(maxblocks + 1);
	free_at = calloc(servers, sizeof(*free_at));
	act = malloc(maxblocks + 1);
	refd = malloc(2 * (maxblocks + 1) * sizeof(*refd));
	attn = malloc((maxblocks + 1) * sizeof(*attn));
	bcost = malloc((maxblocks + 1) * sizeof(*bcost));
	if (!next || !nextout || !prefill || !ttft || !rc || !where || !act ||
	    !free_at || !refd || !attn || !bcost)
		goto out;
	if (pol_hmap_init(&seen, t->nhashes + t->nout_hashes))
		goto out;
	if (next_uses(t, o->cache_output, next, nextout))
		goto out_seen;
	lin = pol_replay_msa_terms(m, maxblocks, rc, attn);

	for (size_t r = 0; r < t->nreqs; r++) {
		const struct pol_trace_req *q = &t->reqs[r];
		const uint64_t *h = pol_trace_blocks(t, q);
		double cost = 0, nocache = 0;
		uint32_t k = 0, n = q->nblocks;
		unsigned few = 0;
		uint64_t now;

		if (o->restart_every && r && r % o->restart_every == 0) {
			e = replay_restart(o, &co, &c, res);
			if (e)
				goto out_seen;
		}

		/*
		 * Clock: trace milliseconds from the first request, file
		 * order within one; the span fits 44 bits
		 * (pol_trace_clock_check()).
		 */
		sub = q->timestamp_ms == last_ms ? sub + 1 : 0;
		last_ms = q->timestamp_ms;
		now = ((q->timestamp_ms - first_ms) << 20) +
		      (sub < (1 << 20) ? sub : 0xfffff);
		pol_cache_set_clock(c, now);
		if (!o->daemon_model && pol_cache_few_new(c, h, n))
			few = POL_BLOCK_FEW_NEW;

		/* all of the request's blocks are accessed below */
		for (uint32_t i = 0; i < n && i < REPLAY_AHEAD; i++)
			pol_cache_prefetch(c, h[i]);
		while (k < n) {
			unsigned tier;

			if (k + REPLAY_AHEAD < n)
				pol_cache_prefetch(c, h[k + REPLAY_AHEAD]);
			tier = pol_cache_tier_of(c, h[k]);
			if (tier == POL_TIER_NONE)
				break;
			where[k++] = (uint8_t)tier;
		}
		/* MSA: a gap does not end the hits, every block's tier */
		for (uint32_t i = k; o->msa && i < n; i++) {
			if (i + REPLAY_AHEAD < n)
				pol_cache_prefetch(c, h[i + REPLAY_AHEAD]);
			where[i] = (uint8_t)pol_cache_tier_of(c, h[i]);
		}
		if (o->daemon_model && o->msa)
			/* kvmmd's segmented open: what it hands out to
			 * recompute is a miss */
			daemon_plan(m, where, n, act);
		else if (o->daemon_model)
			for (uint32_t i = 0; i < n; i++)
				act[i] = i >= k			  ? DM_NEW :
					 where[i] == POL_TIER_GPU ? DM_USE :
								    DM_RELOAD;
		if (o->msa)
			cost = pol_replay_msa_request(m, res, q, h, where, lin,
						      rc, attn, &seen, bcost);
		for (uint32_t i = 0; !o->msa && i < n; i++) {
			double bc = i < k ? (where[i] == POL_TIER_GPU ?
						     0 :
						     pol_cost_reload_block_s(
							     m, where[i])) :
					    rc[i];
			uint32_t *s = pol_hmap_slot(&seen, h[i]);

			cost += bc;
			nocache += rc[i];
			if (*s != UINT32_MAX)
				res->reuse_overhead_s += bc;
			*s = 1;
			if (i < k)
				res->hits[where[i]]++;
		}
		if (!o->msa)
			pol_replay_count(res, q, k, cost, nocache);
		prefill[r] = cost;
		if (o->request_hits) {
			uint64_t by_tier[POL_TIER_COUNT] = { 0 };

			for (uint32_t i = 0; i < (o->msa ? n : k); i++)
				if (where[i] != POL_TIER_NONE)
					by_tier[where[i]]++;
			o->request_hits(o->request_hits_arg, r, by_tier);
		}

		if (o->daemon_model)
			daemon_request(c, h, n, act, 2 * (uint64_t)r + 1,
				       q->tenant, refd);
		for (uint32_t i = 0; !o->daemon_model && i < n + q->nout; i++) {
			bool out = i >= n;
			uint64_t hash =
				out ? t->out_hashes[q->out_first + i - n] :
				      h[i];
			uint64_t parent =
				!i ? 0 :
				out && i - 1 >= n ?
				     t->out_hashes[q->out_first + i - 1 - n] :
				out ? (n >= 2 ? h[n - 2] : 0) :
				      h[i - 1];
			struct pol_block_desc d = {
				.hash = hash,
				.parent_hash = parent,
				.position = out ? i - 1 : i,
				.flags = (i ? POL_BLOCK_HAS_PARENT : 0) | few,
				.next_use =
					out ? nextout[q->out_first + i - n] :
					      next[q->first + i],
				.tenant = q->tenant,
			};

			if (!out && i == n - 1 &&
			    q->input_length % POL_TRACE_BLOCK_TOKENS)
				d.flags |= POL_BLOCK_PARTIAL;
			if (out && i == n)
				/* replaces the partial input block */
				d.parent_hash = n >= 2 ? h[n - 2] : 0,
				d.flags = (n >= 2 ? POL_BLOCK_HAS_PARENT : 0) |
					  few;
			if (out)
				*pol_hmap_slot(&seen, hash) = 1;
			if (i + 1 < n)
				pol_cache_prefetch(c, h[i + 1]);
			e = pol_cache_access(c, &d, NULL);
			if (e && e != -ENOSPC)
				goto out_seen;
			if (q->ttl_ms && !e) {
				pol_cache_set_ttl(
					c, hash,
					(q->timestamp_ms - first_ms + q->ttl_ms)
						<< 20);
				if (!o->ttl_hold)
					pol_cache_set_ttl_demotable(c, hash,
								    true);
			}
			if (q->priority && !e)
				pol_cache_set_priority(c, hash, q->priority);
		}
		if (o->progress && (r % 1024 == 1023 || r + 1 == t->nreqs))
			o->progress(o->progress_arg, r + 1, t->nreqs);
	}

	pol_replay_queue(t, prefill, servers, free_at, ttft, res);

	add_moves(c, res); /* restarts added theirs */
	add_tenants(o, c, res);
	res->restart_forget = o->restart_forget;
	if (o->learned_out) {
		e = learned_copy(c, o->learned_out, o->learned_out_len);
		if (e)
			goto out_seen;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->wall_s = (double)(t1.tv_sec - t0.tv_sec) +
		      (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	e = 0;
out_seen:
	pol_hmap_fini(&seen);
out:
	free(next);
	free(nextout);
	free(prefill);
	free(ttft);
	free(rc);
	free(where);
	free(act);
	free(free_at);
	free(refd);
	free(attn);
	free(bcost);
	pol_cache_destroy(c);
	return e;
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
