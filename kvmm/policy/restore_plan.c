/* SPDX-License-Identifier: MIT */
/*
 * Restore plans (see restore_plan.h): an event simulation of the copy
 * queues and the compute queue gives the makespan of a choice of actions.
 * Without MSA the choice is the best of the windows of reloaded blocks
 * (plan_window(), O(n log n) from closed forms) and of a threshold per
 * tier (restore_plan_tiers.c, which also has the exact serial plan);
 * with MSA it is improved greedily (O(n^2)).  n is a request's block
 * count (tens to hundreds), cheap next to one kernel launch either way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/restore_plan.h"
#include "kvmm/policy/restore_plan_priv.h"

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

/*
 * Time of a recompute chunk [a, b) in a context of k segments.  Without
 * MSA the engine's attention is the dense one over the whole context,
 * whichever blocks were reused: k is then 1 (msa(1) = 1).
 */
double restore_chunk_time(const struct restore_sim *s, uint32_t a, uint32_t b,
			  unsigned k)
{
	const struct pol_cost_model *m = s->m;
	double B = m->tokens_per_block, tokens = (b - a) * B;
	double lin = m->linear_flops_per_token * tokens;

	if (!s->o->allow_segments)
		k = 1;
	double attn =
		pol_cost_attn_coef(m) * tokens * (a * B + (tokens + 1) / 2);

	return pol_cost_compute_s(m, lin + attn * pol_cost_msa_factor(m, k)) +
	       s->overhead;
}

/*
 * Simulate: returns the makespan; fills p's chunks when p is not NULL.
 */
double restore_simulate(struct restore_sim *s, const uint8_t *act,
			struct pol_restore_plan *p)
{
	const struct pol_cost_model *m = s->m;
	double queue[POL_TIER_COUNT] = { 0 }, gpu = 0, end = 0;
	double bytes = pol_cost_block_bytes(m);
	unsigned k = count_segments(act, s->n);
	uint32_t min_blocks = s->min_blocks, max_blocks = s->max_blocks, i;

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
		gpu = start + restore_chunk_time(s, a, b, k);
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

/* Is block i, before the first miss f, a lower-tier block (host, NVMe)? */
static bool lower_tier(const struct restore_sim *s, uint32_t i)
{
	return s->tiers[i] != POL_TIER_GPU && s->tiers[i] < POL_TIER_COUNT;
}

/* The copy queues of the window [k, j): the longest, or (serial) all. */
static double window_queue(const struct restore_sim *s, double *const S[],
			   uint32_t k, uint32_t j)
{
	double q = 0;

	for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
		double d;

		if (t == POL_TIER_GPU)
			continue;
		d = S[t][j] - S[t][k];
		if (s->o->no_overlap)
			q += d;
		else if (d > q)
			q = d;
	}
	return q;
}

/*
 * Without MSA: the exact optimum over the windows of reloaded blocks
 * (restore_plan_tiers.c then looks beyond them).
 * Every block from the first miss f on is recomputed (a block after a
 * gap is of no use), every GPU block before it is used (free, and kvmmd
 * shares it whatever a plan says), and the lower-tier blocks reloaded
 * are a window [k, j) of them (k and j - 1 lower-tier blocks): the ones
 * before it (the head) and every block from j on (the tail) are
 * recomputed.  The reused blocks are then one run but for the GPU
 * blocks in the head and the tail.  The head needs no block before it,
 * so it runs while the copy queues bring the window; the tail waits for
 * both.  With H(k) the head's compute time, Q(k, j) the longest copy
 * queue of the window and T(j) the tail's compute time (Tf(j) when its
 * first chunk is cut short because the GPU would wait for a copy):
 *
 *   makespan(k, j) = max(H(k), Q(k, j)) + (Q > H ? Tf(j) : T(j))
 *   serial (no_overlap): Q(k, j) summed over the queues + H(k) + T(j)
 *
 * plus the plan with no window (recompute every lower-tier block).  For
 * a fixed j, H grows with k and Q shrinks: below the first k where
 * H(k) >= Q(k, j) the makespan is Q + Tf(j), not increasing in k, from
 * there on H + T(j), not decreasing, so the best k is that one or the
 * window start before it (binary search).  The serial makespan is
 * separable: the least H(k) - S(k) so far, for each j in turn.  H, T and
 * the per-tier prefix sums S of reload times are O(n) passes, so the
 * search is O(n log n) and exact for the family
 * (tests/policy-restore-plan-brute.c checks it against every window on
 * small cases).  act gets the best plan.
 */
static int plan_window(struct restore_sim *s, uint32_t f, uint8_t *act)
{
	const struct pol_cost_model *m = s->m;
	uint32_t n = s->n, nlow = 0, best_k = 0, best_j = 0, i;
	double *H, *T, *Tf, *S[POL_TIER_COUNT] = { NULL }, best_t, done = 0;
	double bytes = pol_cost_block_bytes(m);
	double pm = 0; /* serial: least H(k) - S(k) among window starts */
	uint32_t pm_k = 0, *low;
	int64_t open = -1; /* the head's chunk being filled */
	bool have_pm = false;
	int r = -ENOMEM;

	H = calloc(n + 1, sizeof(double));
	T = calloc(n + 1, sizeof(double));
	Tf = calloc(n + 1, sizeof(double));
	low = calloc(n + 1, sizeof(uint32_t));
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		S[t] = calloc(n + 1, sizeof(double));
	if (!H || !T || !Tf || !low || !S[0] || !S[1] || !S[2])
		goto out;
	/* H(k), S(k) for k = 0..f, left to right */
	for (i = 0;; i++) {
		H[i] = done +
		       (open >= 0 ? restore_chunk_time(s, open, i, 1) : 0);
		if (i == f)
			break;
		for (unsigned t = 0; t < POL_TIER_COUNT; t++)
			S[t][i + 1] = S[t][i];
		if (!lower_tier(s, i)) {
			if (open >= 0)
				done += restore_chunk_time(s, open, i, 1);
			open = -1;
			continue;
		}
		low[nlow++] = i;
		S[s->tiers[i]][i + 1] +=
			pol_cost_reload_s(m, s->tiers[i], bytes);
		if (open < 0) {
			open = i;
		} else if (i - open == s->max_blocks) {
			done += restore_chunk_time(s, open, i, 1);
			open = i;
		}
	}
	/* T(j), Tf(j) for j = n..0, right to left */
	uint32_t e = n; /* end of the run of recomputed blocks at i */
	for (i = n; i-- > 0;) {
		uint32_t b;

		if (i < f && s->tiers[i] == POL_TIER_GPU) {
			T[i] = T[i + 1];
			Tf[i] = Tf[i + 1];
			e = i;
			continue;
		}
		b = e - i > s->max_blocks ? i + s->max_blocks : e;
		T[i] = restore_chunk_time(s, i, b, 1) + T[b];
		Tf[i] = T[i];
		if (b - i > s->min_blocks)
			Tf[i] = restore_chunk_time(s, i, i + s->min_blocks, 1) +
				T[i + s->min_blocks];
	}
	best_t = T[0]; /* no window */
	for (uint32_t w = 0; w < nlow; w++) {
		uint32_t j = low[w] + 1, lo = 0, hi = w + 1, c[2], nc = 0;

		if (s->o->no_overlap) {
			double v = H[low[w]] - window_queue(s, S, 0, low[w]);

			if (!have_pm || v < pm) {
				pm = v;
				pm_k = low[w];
				have_pm = true;
			}
			double t = pm + window_queue(s, S, 0, j) + T[j];

			if (t < best_t) {
				best_t = t;
				best_k = pm_k;
				best_j = j;
			}
			continue;
		}
		/* the first window start k = low[lo] with H(k) >= Q(k, j) */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (H[low[mid]] >= window_queue(s, S, low[mid], j))
				hi = mid;
			else
				lo = mid + 1;
		}
		if (lo <= w)
			c[nc++] = low[lo];
		if (lo > 0)
			c[nc++] = low[lo - 1];
		for (uint32_t x = 0; x < nc; x++) {
			double h = H[c[x]], q = window_queue(s, S, c[x], j);
			double t = q > h ? q + Tf[j] : h + T[j];

			if (t < best_t) {
				best_t = t;
				best_k = c[x];
				best_j = j;
			}
		}
	}
	for (i = 0; i < n; i++) {
		if (i < f && s->tiers[i] == POL_TIER_GPU)
			act[i] = POL_RESTORE_USE;
		else if (i >= best_k && i < best_j)
			act[i] = POL_RESTORE_RELOAD;
		else
			act[i] = POL_RESTORE_RECOMPUTE;
	}
	r = 0;
out:
	free(H);
	free(T);
	free(Tf);
	free(low);
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		free(S[t]);
	return r;
}

/*
 * With MSA: any reloaded block may switch to recomputation; greedy,
 * keeping every switch that shortens the plan: recomputing early blocks
 * while the copy queue brings later ones balances a slow tier against
 * the GPU.
 */
static void plan_greedy_segments(struct restore_sim *s, uint8_t *best,
				 uint8_t *act)
{
	double best_t = restore_simulate(s, best, NULL);

	for (uint32_t i = 0; i < s->n; i++) {
		double t;

		if (best[i] != POL_RESTORE_RELOAD)
			continue;
		memcpy(act, best, s->n);
		act[i] = POL_RESTORE_RECOMPUTE;
		t = restore_simulate(s, act, NULL);
		if (t < best_t) {
			best_t = t;
			memcpy(best, act, s->n);
		}
	}
}

static void sim_init(struct restore_sim *s, const struct pol_cost_model *m,
		     const uint8_t *tiers, uint32_t n,
		     const struct pol_restore_opts *o)
{
	s->m = m;
	s->o = o;
	s->tiers = tiers;
	s->n = n;
	s->overhead = o->chunk_overhead_s > 0 ? o->chunk_overhead_s : 20e-6;
	s->min_blocks = m->min_chunk_tokens / m->tokens_per_block;
	s->max_blocks = m->max_chunk_tokens / m->tokens_per_block;
	if (!s->min_blocks)
		s->min_blocks = 1;
	if (s->max_blocks < s->min_blocks)
		s->max_blocks = s->min_blocks;
}

int pol_restore_plan_eval(const struct pol_cost_model *m, const uint8_t *tiers,
			  uint32_t n, const struct pol_restore_opts *o,
			  const uint8_t *act, double *total_s)
{
	struct pol_restore_opts defaults = { .size = sizeof(defaults) };
	struct restore_sim s;

	if (!m || (n && (!tiers || !act)) || !total_s ||
	    n > POL_RESTORE_MAX_BLOCKS || (o && o->size < sizeof(*o)) ||
	    !m->tokens_per_block)
		return -EINVAL;
	if (!o)
		o = &defaults;
	for (uint32_t i = 0; i < n; i++)
		if ((act[i] == POL_RESTORE_USE && tiers[i] != POL_TIER_GPU) ||
		    (act[i] == POL_RESTORE_RELOAD &&
		     (tiers[i] == POL_TIER_GPU ||
		      tiers[i] >= POL_TIER_COUNT)) ||
		    act[i] > POL_RESTORE_RECOMPUTE)
			return -EINVAL;
	sim_init(&s, m, tiers, n, o);
	s.ready = calloc(n + 1, sizeof(double));
	if (!s.ready)
		return -ENOMEM;
	*total_s = restore_simulate(&s, act, NULL);
	free(s.ready);
	return 0;
}

int pol_restore_plan_build(const struct pol_cost_model *m, const uint8_t *tiers,
			   uint32_t n, const struct pol_restore_opts *o,
			   struct pol_restore_plan *p)
{
	struct pol_restore_opts defaults = { .size = sizeof(defaults) };
	struct restore_sim s;
	uint8_t *act, *best;
	uint32_t first_miss = n, i;

	if (!m || (!tiers && n) || !p || n > POL_RESTORE_MAX_BLOCKS ||
	    (o && o->size < sizeof(*o)) || !m->tokens_per_block)
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
	if (!act || !best || !s.ready || !p->action || !p->tier || !p->chunks)
		goto err_free;
	sim_init(&s, m, tiers, n, o);

	for (i = 0; i < n; i++)
		if (tiers[i] >= POL_TIER_COUNT) {
			first_miss = i;
			break;
		}
	if (!o->allow_segments) {
		int e = o->no_overlap ?
				restore_plan_serial(&s, first_miss, best) :
				-E2BIG;
		double t;

		/* serially exact over every choice; else windows first */
		if (e == -ENOMEM || (e && plan_window(&s, first_miss, best)))
			goto err_free;
		if (!o->no_overlap) {
			t = restore_simulate(&s, best, NULL);
			if (restore_plan_thresholds(&s, first_miss, best, &t))
				goto err_free;
		}
	} else {
		/* Start: reuse what can be reused, recompute the rest. */
		for (i = 0; i < n; i++) {
			if (tiers[i] >= POL_TIER_COUNT)
				best[i] = POL_RESTORE_RECOMPUTE;
			else if (tiers[i] == POL_TIER_GPU)
				best[i] = POL_RESTORE_USE;
			else
				best[i] = POL_RESTORE_RELOAD;
		}
		plan_greedy_segments(&s, best, act);
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
	p->total_s = restore_simulate(&s, best, p);
	p->serial_s = p->reload_s + p->recompute_s;
	free(act);
	free(best);
	free(s.ready);
	return 0;

err_free:
	free(act);
	free(best);
	free(s.ready);
	pol_restore_plan_free(p);
	return -ENOMEM;
}

void pol_restore_plan_free(struct pol_restore_plan *p)
{
	free(p->action);
	free(p->tier);
	free(p->chunks);
	memset(p, 0, sizeof(*p));
}
