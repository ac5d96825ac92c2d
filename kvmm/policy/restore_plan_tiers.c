/* SPDX-License-Identifier: MIT */
/*
 * Restore plans without MSA beyond the windows of restore_plan.c: plans
 * that recompute a block between two reloads (host and NVMe blocks
 * interleaved: reload the host ones, recompute the NVMe ones).
 *
 * Overlapped (restore_plan_thresholds()): every tier has its own
 * threshold, the tier's blocks before it recomputed and those from it on
 * reloaded.  Swapping a reloaded block of a tier with a recomputed later
 * one of the same tier recomputes a cheaper block (its attention reads
 * less), starts no chunk later and waits for no more copies, so without
 * chunk overheads some optimum over every choice of reloaded blocks has
 * that shape; chunk overheads (20 us) can make a few others faster by
 * less than one, which tests/policy-restore-plan-brute.c has never seen
 * with the default overhead.  With the early tier E (the lower
 * threshold k) and the late one L (threshold K): the head [0, k) is
 * recomputed at once, the runs of L blocks in [k, K) each wait for the
 * E copies before them, then the tail from the first miss waits for
 * every copy.  Bounding each run by both of its starts (after the run
 * before, or when its copies are in: max-plus, at most one chunk
 * overhead above the model, which cuts a run's first chunk only when it
 * waits) gives the makespan of (k, K) in O(1) from prefix sums and a
 * sparse table over the runs; for a fixed K the terms that grow with k
 * (the head) and those that shrink (the copies, the waits) cross once,
 * so a binary search finds k: O(n log n).  The best few by that bound
 * are then timed with the model (restore_simulate()) and the fastest
 * kept.
 *
 * Serial (restore_plan_serial(), kvmmd's plan for an open that is not
 * early): the makespan is the copies plus the chunks, a sum over the
 * blocks but for the overhead of each chunk, so a dynamic program over
 * the blocks and the fill of the open chunk is exact over every choice:
 * O(n * max_chunk_blocks).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/restore_plan_priv.h"

#define CANDIDATES 4 /* bounds timed with the model */
#define SERIAL_STATES_MAX (1u << 24) /* blocks x chunk fills */

struct cand {
	double bound;
	uint32_t k[POL_TIER_COUNT]; /* per tier: first block reloaded */
};

struct thr {
	struct restore_sim *s;
	uint32_t n, f, maxb, minb;
	double ov, tail_t, tail_tf;
	double c[POL_TIER_COUNT]; /* one block's copy */
	double *pf; /* pf[i]: compute time of blocks [0, i), no overhead */
	double *head; /* head[i]: every copy in [0, i) recomputed */
	uint32_t *cnt[POL_TIER_COUNT]; /* cnt[t][i]: tier-t blocks < i */
	/* the late tier's maximal runs in [0, f) */
	uint32_t *ra, *re, nruns;
	double *pt; /* pt[r]: run times of runs < r */
	double *sp; /* sparse table of each run's wait term */
	uint32_t *epos, *rk, ne; /* early tier blocks; runs before each */
	struct cand best[CANDIDATES];
	unsigned nbest;
};

static double run_t(const struct thr *t, uint32_t a, uint32_t e)
{
	if (e <= a)
		return 0;
	return t->pf[e] - t->pf[a] + t->ov * ((e - a + t->maxb - 1) / t->maxb);
}

/* A run whose start waits for a copy: its first chunk is cut short. */
static double run_tf(const struct thr *t, uint32_t a, uint32_t e)
{
	if (e - a <= t->minb)
		return run_t(t, a, e);
	return t->pf[e] - t->pf[a] +
	       t->ov * (1 + (e - a - t->minb + t->maxb - 1) / t->maxb);
}

static double range_max(const struct thr *t, uint32_t a, uint32_t b)
{
	unsigned l = 31 - __builtin_clz(b - a + 1);
	double x = t->sp[(size_t)l * t->nruns + a];
	double y = t->sp[(size_t)l * t->nruns + b + 1 - (1u << l)];

	return x > y ? x : y;
}

static void add_candidate(struct thr *t, double bound, unsigned e, uint32_t ke,
			  unsigned l, uint32_t kl)
{
	unsigned i;

	if (t->nbest == CANDIDATES) {
		if (bound >= t->best[CANDIDATES - 1].bound)
			return;
		i = CANDIDATES - 1;
	} else {
		i = t->nbest++;
	}
	for (; i > 0 && t->best[i - 1].bound > bound; i--)
		t->best[i] = t->best[i - 1];
	memset(&t->best[i], 0, sizeof(t->best[i]));
	t->best[i].bound = bound;
	t->best[i].k[e] = ke;
	t->best[i].k[l] = kl;
}

/* Where K (an L block or f) cuts the late tier's runs. */
struct cut {
	uint32_t rk; /* runs < rk end by K */
	bool part, tail; /* a run [az, ez) cut by K; a tail of its own */
	uint32_t az, ez;
	double tz, tfz, ql;
};

/*
 * The bound on the makespan of thresholds (epos[j], K), split into the
 * terms that grow with j (*grow) and the ones that shrink (*shrink).
 */
static void bound(const struct thr *t, unsigned e, uint32_t j,
		  const struct cut *c, double *grow, double *shrink)
{
	uint32_t k = t->epos[j], r0 = t->rk[j];
	double ce = t->c[e], qe = ce * (t->cnt[e][t->f] - t->cnt[e][k]);
	double tail = c->tail ? t->tail_t : 0, d;

	*grow = t->head[k] + t->pt[c->rk] - t->pt[r0] + c->tz + tail;
	/* every copy, then the tail that waits for them */
	d = (qe > c->ql ? qe : c->ql) + (c->tail ? t->tail_tf : 0);
	if (r0 < c->rk) {
		double w = range_max(t, r0, c->rk - 1) - ce * t->cnt[e][k] +
			   t->pt[c->rk] + c->tz + tail;

		if (w > d)
			d = w;
	}
	if (c->part) {
		double w =
			ce * (t->cnt[e][c->az] - t->cnt[e][k]) + c->tfz + tail;

		if (w > d)
			d = w;
	}
	*shrink = d;
}

/* For every threshold K of the late tier l, the best of the early e. */
static void search_role(struct thr *t, unsigned e, unsigned l)
{
	const uint8_t *tiers = t->s->tiers;
	uint32_t f = t->f, r = 0, i;
	double ce = t->c[e];

	t->nruns = 0;
	t->ne = 0;
	for (i = 0; i < f; i++) {
		if (tiers[i] == e) {
			t->rk[t->ne] = t->nruns;
			t->epos[t->ne++] = i;
		}
		if (tiers[i] != l)
			continue;
		if (!i || tiers[i - 1] != l)
			t->ra[t->nruns++] = i;
		t->re[t->nruns - 1] = i + 1;
	}
	if (!t->ne)
		return;
	t->pt[0] = 0;
	for (r = 0; r < t->nruns; r++) {
		t->pt[r + 1] = t->pt[r] + run_t(t, t->ra[r], t->re[r]);
		t->sp[r] = ce * t->cnt[e][t->ra[r]] +
			   run_tf(t, t->ra[r], t->re[r]) - t->pt[r + 1];
	}
	for (unsigned lv = 1; (1u << lv) <= t->nruns; lv++) {
		double *prev = t->sp + (size_t)(lv - 1) * t->nruns;
		double *cur = t->sp + (size_t)lv * t->nruns;

		for (r = 0; r + (1u << lv) <= t->nruns; r++) {
			double x = prev[r], y = prev[r + (1u << (lv - 1))];

			cur[r] = x > y ? x : y;
		}
	}
	r = 0;
	for (uint32_t K = 0; K <= f; K++) {
		struct cut c = { .tail = t->n > f };
		uint32_t lo = 0, hi, jmax;

		if (K < f && tiers[K] != l)
			continue;
		if (K < f) {
			while (t->re[r] <= K)
				r++;
			c.rk = r;
			c.ql = t->c[l] * (t->cnt[l][f] - t->cnt[l][K]);
			if (t->ra[r] < K) {
				c.part = true;
				c.az = t->ra[r];
				c.ez = K;
			}
		} else if (t->nruns && t->re[t->nruns - 1] == f) {
			/* the last run goes on into the tail */
			c.rk = t->nruns - 1;
			c.part = true;
			c.tail = false;
			c.az = t->ra[c.rk];
			c.ez = t->n;
		} else {
			c.rk = t->nruns;
		}
		if (c.part) {
			c.tz = run_t(t, c.az, c.ez);
			c.tfz = run_tf(t, c.az, c.ez);
		}
		jmax = t->cnt[e][K];
		if (!jmax)
			continue;
		hi = jmax;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			double g, s;

			bound(t, e, mid, &c, &g, &s);
			if (g >= s)
				hi = mid;
			else
				lo = mid + 1;
		}
		for (uint32_t j = lo ? lo - 1 : 0; j <= lo && j < jmax; j++) {
			double g, s;

			bound(t, e, j, &c, &g, &s);
			add_candidate(t, g > s ? g : s, e, t->epos[j], l, K);
		}
	}
}

int restore_plan_thresholds(struct restore_sim *s, uint32_t f, uint8_t *act,
			    double *best_s)
{
	const struct pol_cost_model *m = s->m;
	struct thr t = { .s = s,
			 .n = s->n,
			 .f = f,
			 .maxb = s->max_blocks,
			 .minb = s->min_blocks,
			 .ov = s->overhead };
	uint32_t n = s->n, i, *u32[6];
	unsigned levels = 1;
	uint8_t *a = NULL;
	int r = -ENOMEM;

	while ((1u << levels) <= n)
		levels++;
	t.pf = calloc(n + 1, sizeof(double));
	t.head = calloc(n + 1, sizeof(double));
	t.pt = calloc(n + 2, sizeof(double));
	t.sp = calloc((size_t)levels * (n + 1), sizeof(double));
	a = malloc(n + 1);
	for (i = 0; i < 6; i++)
		u32[i] = calloc(n + 2, sizeof(uint32_t));
	t.cnt[POL_TIER_HOST] = u32[0];
	t.cnt[POL_TIER_NVME] = u32[1];
	t.ra = u32[2];
	t.re = u32[3];
	t.epos = u32[4];
	t.rk = u32[5];
	if (!t.pf || !t.head || !t.pt || !t.sp || !a || !u32[0] || !u32[1] ||
	    !u32[2] || !u32[3] || !u32[4] || !u32[5])
		goto out;
	for (unsigned k = POL_TIER_HOST; k <= POL_TIER_NVME; k++)
		t.c[k] = pol_cost_reload_s(m, k, pol_cost_block_bytes(m));
	for (i = 0; i < n; i++)
		t.pf[i + 1] = t.pf[i] + restore_chunk_time(s, i, i + 1, 1) -
			      s->overhead;
	t.tail_t = run_t(&t, f, n);
	t.tail_tf = run_tf(&t, f, n);
	{
		double done = 0;
		int64_t open = -1;

		for (i = 0;; i++) {
			t.head[i] = done + (open >= 0 ? run_t(&t, open, i) : 0);
			t.cnt[POL_TIER_HOST][i + 1] = t.cnt[POL_TIER_HOST][i];
			t.cnt[POL_TIER_NVME][i + 1] = t.cnt[POL_TIER_NVME][i];
			if (i == f)
				break;
			if (s->tiers[i] == POL_TIER_GPU) {
				done = t.head[i];
				open = -1;
				continue;
			}
			t.cnt[s->tiers[i]][i + 1]++;
			if (open < 0)
				open = i;
		}
	}
	search_role(&t, POL_TIER_HOST, POL_TIER_NVME);
	search_role(&t, POL_TIER_NVME, POL_TIER_HOST);
	for (unsigned c = 0; c < t.nbest; c++) {
		double v;

		for (i = 0; i < n; i++) {
			unsigned tier = s->tiers[i];

			if (i >= f)
				a[i] = POL_RESTORE_RECOMPUTE;
			else if (tier == POL_TIER_GPU)
				a[i] = POL_RESTORE_USE;
			else
				a[i] = i >= t.best[c].k[tier] ?
					       POL_RESTORE_RELOAD :
					       POL_RESTORE_RECOMPUTE;
		}
		v = restore_simulate(s, a, NULL);
		if (v < *best_s) {
			*best_s = v;
			memcpy(act, a, n);
		}
	}
	r = 0;
out:
	free(t.pf);
	free(t.head);
	free(t.pt);
	free(t.sp);
	free(a);
	for (i = 0; i < 6; i++)
		free(u32[i]);
	return r;
}

int restore_plan_serial(struct restore_sim *s, uint32_t f, uint8_t *act)
{
	const struct pol_cost_model *m = s->m;
	uint32_t n = s->n, S = s->max_blocks, i, st;
	double *cur, *nxt, bytes = pol_cost_block_bytes(m), v;
	uint8_t *rc, *a;
	uint32_t *from;
	int r = -ENOMEM;

	if (!S)
		return -EINVAL; /* a chunk holds one block at least */
	if (S > n + 1)
		S = n + 1; /* a chunk can hold no more */
	if ((uint64_t)n * S > SERIAL_STATES_MAX)
		return -E2BIG;
	/* calloc: with malloc gcc 12 warns that cur[0] may be unset below */
	cur = calloc(S, sizeof(double));
	nxt = malloc(S * sizeof(double));
	rc = malloc((size_t)n * S + 1);
	/* zeroed for the analyzers: the walk back reads from[i] only for a
	 * block a tier holds (i < f, set below), a finite plan recomputing
	 * every block past f */
	from = calloc(n + 1, sizeof(uint32_t));
	a = malloc(n + 1);
	if (!cur || !nxt || !rc || !from || !a)
		goto out;
	/*
	 * cur[st]: the least time of the blocks so far with st blocks in
	 * the open chunk (0: none open, the next recomputed block starts a
	 * chunk and pays its overhead).  rc[i][st]: block i recomputed to
	 * get there; from[i]: the state a block kept (used or reloaded)
	 * came from.
	 */
	for (st = 0; st < S; st++)
		cur[st] = st ? INFINITY : 0;
	for (i = 0; i < n; i++) {
		bool gpu = i < f && s->tiers[i] == POL_TIER_GPU;
		double comp = restore_chunk_time(s, i, i + 1, 1) - s->overhead;

		for (st = 0; st < S; st++)
			nxt[st] = INFINITY;
		memset(rc + (size_t)i * S, 0, S);
		if (i < f) {
			double keep =
				gpu ? 0 :
				      pol_cost_reload_s(m, s->tiers[i], bytes);
			uint32_t arg = 0;

			for (st = 1; st < S; st++)
				if (cur[st] < cur[arg])
					arg = st;
			nxt[0] = cur[arg] + keep;
			from[i] = arg;
		}
		if (!gpu) {
			for (st = 0; st < S; st++) {
				uint32_t to = st + 1 == s->max_blocks ? 0 :
									st + 1;

				if (cur[st] == INFINITY || to >= S)
					continue;
				v = cur[st] + comp + (st ? 0 : s->overhead);
				if (v < nxt[to]) {
					nxt[to] = v;
					rc[(size_t)i * S + to] = 1;
				}
			}
		}
		memcpy(cur, nxt, S * sizeof(double));
	}
	st = 0;
	v = cur[0];
	for (uint32_t x = 1; x < S; x++)
		if (cur[x] < v) {
			v = cur[x];
			st = x;
		}
	/*
	 * No finite way through: a cost the model's parse would have
	 * refused (pol_cost_parse()'s costs_finite()) in a model made by
	 * hand.  The walk back would take reloads for blocks no tier
	 * holds; -ERANGE has the caller plan by windows instead.
	 */
	if (!isfinite(v)) {
		r = -ERANGE;
		goto out;
	}
	for (i = n; i-- > 0;) {
		if (rc[(size_t)i * S + st]) {
			a[i] = POL_RESTORE_RECOMPUTE;
			st = st ? st - 1 : s->max_blocks - 1;
		} else {
			a[i] = i < f && s->tiers[i] == POL_TIER_GPU ?
				       POL_RESTORE_USE :
				       POL_RESTORE_RELOAD;
			st = from[i];
		}
	}
	memcpy(act, a, n);
	r = 0;
out:
	free(cur);
	free(nxt);
	free(rc);
	free(from);
	free(a);
	return r;
}
