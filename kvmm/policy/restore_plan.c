/* SPDX-License-Identifier: MIT */
/*
 * Restore plans (see restore_plan.h): an event simulation of the copy
 * queues and the compute queue gives the makespan of a choice of actions;
 * the choice is improved greedily.  n is a request's block count (tens
 * to hundreds), so the O(n^2) search is cheap next to one kernel launch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/restore_plan.h"

const char *pol_restore_action_string(enum pol_restore_action a)
{
	switch (a) {
	case POL_RESTORE_USE:
		return "use";
	case POL_RESTORE_RELOAD:
		return "reload";
	case POL_RESTORE_RECOMPUTE:
		return "recompute";
	}
	return "?";
}

struct sim {
	const struct pol_cost_model *m;
	const struct pol_restore_opts *o;
	const uint8_t *tiers;
	uint32_t n;
	double overhead;
	double *ready; /* time block i is on the GPU */
};

static unsigned count_segments(const uint8_t *act, uint32_t n)
{
	unsigned k = 0;
	bool in = false;

	for (uint32_t i = 0; i < n; i++) {
		bool reused = act[i] != POL_RESTORE_RECOMPUTE;

		if (reused && !in)
			k++;
		in = reused;
	}
	return k ? k : 1;
}

/* Time of a recompute chunk [a, b) in a context of k segments. */
static double chunk_time(const struct sim *s, uint32_t a, uint32_t b,
			 unsigned k)
{
	const struct pol_cost_model *m = s->m;
	double B = m->tokens_per_block, tokens = (b - a) * B;
	double lin = m->linear_flops_per_token * tokens;
	double attn =
		pol_cost_attn_coef(m) * tokens * (a * B + (tokens + 1) / 2);

	return pol_cost_compute_s(m, lin + attn * pol_cost_msa_factor(m, k)) +
	       s->overhead;
}

/*
 * Simulate: returns the makespan; fills p's chunks when p is not NULL.
 */
static double simulate(struct sim *s, const uint8_t *act,
		       struct pol_restore_plan *p)
{
	const struct pol_cost_model *m = s->m;
	double queue[POL_TIER_COUNT] = { 0 }, gpu = 0, end = 0;
	double bytes = pol_cost_block_bytes(m);
	unsigned k = count_segments(act, s->n);
	uint32_t min_blocks, max_blocks, i;

	min_blocks = m->min_chunk_tokens / m->tokens_per_block;
	max_blocks = m->max_chunk_tokens / m->tokens_per_block;
	if (!min_blocks)
		min_blocks = 1;
	if (max_blocks < min_blocks)
		max_blocks = min_blocks;
	/* Copies: one FIFO per source tier, in block order. */
	for (i = 0; i < s->n; i++) {
		s->ready[i] = 0;
		if (act[i] == POL_RESTORE_RELOAD) {
			unsigned t = s->tiers[i];

			if (s->o->no_overlap)
				t = 0; /* one serial queue */
			queue[t] += pol_cost_reload_s(m, s->tiers[i], bytes);
			s->ready[i] = queue[t];
		}
	}
	if (s->o->no_overlap) {
		gpu = queue[0];
		for (i = 0; i < s->n; i++)
			s->ready[i] = 0;
	}
	for (i = 0; i < s->n; i++)
		if (s->ready[i] > end)
			end = s->ready[i];
	/* Compute: chunks over runs of recomputed blocks. */
	double before = 0; /* all blocks < i ready */
	for (i = 0; i < s->n;) {
		uint32_t a, b;
		double start;

		if (act[i] != POL_RESTORE_RECOMPUTE) {
			if (s->ready[i] > before)
				before = s->ready[i];
			i++;
			continue;
		}
		a = i;
		b = a + 1;
		while (b < s->n && act[b] == POL_RESTORE_RECOMPUTE &&
		       b - a < max_blocks)
			b++;
		/*
		 * Adaptive: if the GPU would idle waiting for reloads of
		 * blocks before a, start on fewer blocks (>= min) so that
		 * compute and copies overlap more finely.
		 */
		if (before > gpu && b - a > min_blocks)
			b = a + min_blocks;
		start = gpu > before ? gpu : before;
		gpu = start + chunk_time(s, a, b, k);
		if (p) {
			struct pol_restore_chunk *c = &p->chunks[p->nchunks++];

			c->first = a;
			c->count = b - a;
			c->start_s = start;
			c->end_s = gpu;
			p->recompute_s += gpu - start;
		}
		for (uint32_t j = a; j < b; j++)
			s->ready[j] = gpu;
		if (gpu > before)
			before = gpu;
		i = b;
	}
	return gpu > end ? gpu : end;
}

int pol_restore_plan_build(const struct pol_cost_model *m, const uint8_t *tiers,
			   uint32_t n, const struct pol_restore_opts *o,
			   struct pol_restore_plan *p)
{
	struct pol_restore_opts defaults = { .size = sizeof(defaults) };
	struct sim s;
	uint8_t *act, *best;
	double best_t;
	uint32_t first_miss = n, i;

	if (!m || (!tiers && n) || !p || n > POL_RESTORE_MAX_BLOCKS ||
	    (o && o->size < sizeof(*o)))
		return -EINVAL;
	if (!o)
		o = &defaults;
	memset(p, 0, sizeof(*p));
	act = calloc(n + 1, 1);
	best = calloc(n + 1, 1);
	s.ready = calloc(n + 1, sizeof(double));
	p->action = calloc(n + 1, 1);
	p->tier = calloc(n + 1, 1);
	p->chunks = calloc(n + 1, sizeof(*p->chunks));
	if (!act || !best || !s.ready || !p->action || !p->tier || !p->chunks) {
		free(act);
		free(best);
		free(s.ready);
		pol_restore_plan_free(p);
		return -ENOMEM;
	}
	s.m = m;
	s.o = o;
	s.tiers = tiers;
	s.n = n;
	s.overhead = o->chunk_overhead_s > 0 ? o->chunk_overhead_s : 20e-6;

	for (i = 0; i < n; i++)
		if (tiers[i] >= POL_TIER_COUNT) {
			first_miss = i;
			break;
		}
	/* Start: reuse what can be reused, recompute the rest. */
	for (i = 0; i < n; i++) {
		bool cached = tiers[i] < POL_TIER_COUNT;

		if (!cached || (i > first_miss && !o->allow_segments))
			act[i] = POL_RESTORE_RECOMPUTE;
		else if (tiers[i] == POL_TIER_GPU)
			act[i] = POL_RESTORE_USE;
		else
			act[i] = POL_RESTORE_RELOAD;
	}
	best_t = simulate(&s, act, NULL);
	memcpy(best, act, n);
	/*
	 * Greedy improvement, keeping every change that shortens the plan.
	 * Without MSA the reused blocks stay a prefix: only the deepest
	 * reloaded block may switch to recomputation, and the search stops
	 * at the first refusal.  With MSA any reloaded block may switch:
	 * recomputing early blocks while the copy queue brings later ones
	 * balances a slow tier against the GPU.
	 */
	if (o->allow_segments) {
		for (i = 0; i < n; i++) {
			double t;

			if (best[i] != POL_RESTORE_RELOAD)
				continue;
			memcpy(act, best, n);
			act[i] = POL_RESTORE_RECOMPUTE;
			t = simulate(&s, act, NULL);
			if (t < best_t) {
				best_t = t;
				memcpy(best, act, n);
			}
		}
	} else {
		for (i = first_miss; i-- > 0;) {
			double t;

			if (best[i] != POL_RESTORE_RELOAD)
				break;
			memcpy(act, best, n);
			act[i] = POL_RESTORE_RECOMPUTE;
			t = simulate(&s, act, NULL);
			if (t >= best_t)
				break;
			best_t = t;
			memcpy(best, act, n);
		}
	}
	p->nblocks = n;
	for (i = 0; i < n; i++) {
		p->action[i] = best[i];
		p->tier[i] = best[i] == POL_RESTORE_RELOAD ? tiers[i] :
							     POL_TIER_NONE;
		if (best[i] == POL_RESTORE_RELOAD) {
			p->reloads[tiers[i]]++;
			p->reload_s += pol_cost_reload_block_s(m, tiers[i]);
		} else if (best[i] == POL_RESTORE_RECOMPUTE) {
			p->recomputes++;
		} else {
			p->uses++;
		}
	}
	p->segments = count_segments(best, n);
	p->total_s = simulate(&s, best, p);
	p->serial_s = p->reload_s + p->recompute_s;
	free(act);
	free(best);
	free(s.ready);
	return 0;
}

void pol_restore_plan_free(struct pol_restore_plan *p)
{
	free(p->action);
	free(p->tier);
	free(p->chunks);
	memset(p, 0, sizeof(*p));
}
