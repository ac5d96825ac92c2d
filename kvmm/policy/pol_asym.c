/* SPDX-License-Identifier: MIT */
/*
 * asym: kernel-latency-aware eviction, GreedyDual-Size-Frequency with
 * aging over the leaves of the prefix tree.  A block's priority is
 *
 *   H(b) = L + f(b) * r(depth(b)) * w(b) * 2^(priority(b) / 8)
 *
 *   f(b)  expected reuse: the times the block was used recently, even
 *         before an eviction (history), 0 for a partial tail block (its
 *         hash changes when the sequence grows, it cannot be hit again);
 *   r(d)  learned reuse by depth: (uses of already-seen blocks at depth
 *         bucket d + 1) / (first uses at d + 2), counted on every access
 *         and halved with the sketch.  Deep blocks cost more to recompute
 *         but are rarely reused; this is what weighs the two, instead of
 *         a constant fitted to one trace;
 *   w(b)  miss cost per byte relative to the cheapest block of the same
 *         size: 1 where a lower tier catches the block (a reload costs
 *         the same for every block), recompute(position) / recompute(0)
 *         from the last tier, because recomputation grows with depth;
 *   L     the inflation value: the priority of the last victim.  New
 *         blocks start at L, so blocks not used for a while fall behind
 *         (aging) and frequency cannot lock stale blocks in forever.
 *
 * The victim is the block with the lowest H among the tier's leaves (no
 * resident child: the prefix rule, a hit stops at the first missing
 * block, so a parent is worth nothing without its prefix and its children
 * are worth nothing without it).  A chain is eaten from its end, its
 * prefix keeps serving hits, and a parent becomes a candidate once the
 * subtree it guards is gone.  Ties go to the least recently used block.
 *
 * History: blocks dropped from the last tier stay in the index as ghosts
 * (FIFO, at most as many as the cache holds blocks), so a block that
 * comes back resumes its count: the second use of a block is what tells
 * a one-shot prefix from a reused one.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "kvmm/policy/cost_model.h"
#include "kvmm/policy/freq_sketch.h"
#include "kvmm/policy/pol_hpol.h"

#define SKETCH_MIN_WIDTH (1u << 20)
#define DEPTH_BUCKETS 24

static unsigned depth_bucket(uint32_t position)
{
	unsigned b =
		position < 8 ?
			position :
			8 + 2 * (31 - (unsigned)__builtin_clz(position) - 3) +
				((position >>
				  (31 - __builtin_clz(position) - 1)) &
				 1);
	return b < DEPTH_BUCKETS ? b : DEPTH_BUCKETS - 1;
}

struct asym {
	double inflation; /* L */
	double rc0, rc_step; /* recompute cost of block index 0, per index */
	bool last_tier;
	struct pol_sketch sketch; /* GPU tier only: every access passes it */
	/* learned reuse by depth (shared through the GPU instance) */
	struct asym *gpu;
	double first[DEPTH_BUCKETS], again[DEPTH_BUCKETS];
	uint64_t depth_events;
};

/* Expected further uses of a block at this depth, learned. */
static double depth_reuse(const struct asym *g, uint32_t position)
{
	unsigned b = depth_bucket(position);

	return (g->again[b] + 1) / (g->first[b] + 2);
}

static void asym_key(const struct pol_block *b, unsigned tier,
		     struct pol_heap_node *n)
{
	n->k1 = b->slot[tier].key;
	n->k2 = b->last_access;
	n->k3 = UINT32_MAX - b->position;
}

static double weight(const struct asym *s, const struct pol_block *b)
{
	double w = 1;

	if (s->last_tier)
		w = (s->rc0 + s->rc_step * b->position) / s->rc0;
	w *= depth_reuse(s->gpu, b->position);
	if (b->priority)
		w *= exp2(b->priority / 8.0);
	return w;
}

static void asym_rekey(struct hpol *h, struct pol_block *b, enum hpol_event ev)
{
	struct asym *s = h->priv;
	double f;

	/* Every access lands on the GPU tier: count it there. */
	if (h->tier == POL_TIER_GPU) {
		unsigned db = depth_bucket(b->position);

		b->reuse = (float)pol_sketch_add(&s->sketch, b->hash);
		if (b->reuse <= 1)
			s->first[db] += 1;
		else
			s->again[db] += 1;
		if (++s->depth_events >= s->sketch.period) {
			s->depth_events = 0;
			for (unsigned i = 0; i < DEPTH_BUCKETS; i++) {
				s->first[i] /= 2;
				s->again[i] /= 2;
			}
		}
	}
	f = (b->flags & POL_BLOCK_PARTIAL) ? 0 : b->reuse;
	b->slot[h->tier].key = s->inflation + f * weight(s, b);
}

static void asym_victim_chosen(struct hpol *h, struct pol_block *b)
{
	struct asym *s = h->priv;

	if (b->slot[h->tier].key > s->inflation)
		s->inflation = b->slot[h->tier].key;
}

static const struct hpol_kind asym_kind = {
	.key = asym_key,
	.rekey = asym_rekey,
	.victim_chosen = asym_victim_chosen,
	.priv_size = sizeof(struct asym),
};

static int asym_create(struct pol_cache *c, unsigned tier, void **priv)
{
	const struct pol_cost_model *m = pol_cache_cost(c);
	struct pol_cost_model ref;
	struct asym *s;
	struct hpol *h;
	int e = hpol_create(c, tier, &asym_kind, priv);

	if (e)
		return e;
	if (!m) {
		pol_cost_reference(&ref);
		m = &ref;
	}
	h = *priv;
	s = h->priv;
	s->rc0 = pol_cost_recompute_block_s(m, 0);
	s->rc_step = pol_cost_recompute_block_s(m, 1) - s->rc0;
	s->last_tier = pol_cache_lower_tier(c, tier) == POL_TIER_NONE;
	if (tier != POL_TIER_GPU)
		s->gpu = ((struct hpol *)pol_cache_gpu_policy(c))->priv;
	else
		s->gpu = s;
	if (tier == POL_TIER_GPU) {
		uint64_t total = 0;

		for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
			uint64_t cap = pol_cache_capacity(c, t);

			total += cap < (1ull << 24) ? cap : 1ull << 24;
		}
		uint64_t w = 4 * total;

		/*
		 * History is cheap (4 bytes per counter column) next to a KV
		 * block: remember at least 1M recent uses whatever the
		 * capacity, so a small cache still learns which prefixes
		 * come back; forget half every `w` uses.
		 */
		if (w < SKETCH_MIN_WIDTH)
			w = SKETCH_MIN_WIDTH;
		e = pol_sketch_init(&s->sketch, w, w);
		if (e) {
			hpol_destroy(h);
			return e;
		}
	}
	return 0;
}

static void asym_destroy(void *priv)
{
	struct hpol *h = priv;
	struct asym *s = h->priv;

	pol_sketch_fini(&s->sketch);
	hpol_destroy(priv);
}

static void asym_prefetch(void *priv, uint64_t hash)
{
	struct hpol *h = priv;
	struct asym *s = h->priv;

	if (s->sketch.counters)
		pol_sketch_prefetch(&s->sketch, hash);
}

const struct pol_ops pol_asym_ops = {
	.name = "asym",
	.create = asym_create,
	.destroy = asym_destroy,
	.on_insert = hpol_insert,
	.on_access = hpol_access,
	.on_remove = hpol_remove,
	.on_change = hpol_change,
	.victim = hpol_victim,
	.prefetch = asym_prefetch,
};
