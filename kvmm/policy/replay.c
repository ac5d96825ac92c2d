/* SPDX-License-Identifier: MIT */
/*
 * Trace replay engine (see replay.h).  A first pass computes, for belady,
 * the next request that uses each block occurrence; the main pass runs
 * the cache and the cost accounting; a last pass runs the FIFO queue.
 *
 * What kvmmd does with a request (daemon_model) is replay_daemon.c; the
 * cost accounting, the TTFT queue and the JSON are replay_account.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvmm/policy/hmap.h"
#include "kvmm/policy/replay.h"
#include "kvmm/policy/replay_priv.h"

/* Index slots loaded ahead of the prefix lookup (pol_cache_prefetch). */
#define REPLAY_AHEAD 4

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
			replay_tenant_row(res, rows[i].id)->limit_moves +=
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
	/* + 1: an empty trace replays too, and malloc(0) may be NULL */
	prefill = malloc((t->nreqs + 1) * sizeof(*prefill));
	ttft = malloc((t->nreqs + 1) * sizeof(*ttft));
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
			replay_daemon_plan(m, where, n, act);
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
			replay_daemon_request(c, h, n, act, 2 * (uint64_t)r + 1,
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
