/* SPDX-License-Identifier: MIT */
/*
 * The tiered cache's creation and destruction, and its settings and
 * counters as its users read and set them (the move handler, the clock,
 * the capacities and counts, the stats); apart from cache.c, whose moves
 * they do not take part in (pol_cache_set_capacity(), which moves blocks,
 * stays there).
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/policy/pol_cache_priv.h"

/* The lowest tier with a capacity (the GPU tier when none has one):
 * blocks are dropped from it; and below each tier, the next one with a
 * capacity (pol_cache_lower_tier()), where its victims go.  Worked out
 * whenever a capacity changes, not on each move. */
void pol_cache_set_last_tier(struct pol_cache *c)
{
	unsigned below = POL_TIER_NONE;

	c->last_tier = POL_TIER_GPU;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		if (c->cap[t])
			c->last_tier = t;
	for (unsigned t = POL_TIER_COUNT; t-- > 0;) {
		c->lower[t] = (uint8_t)below;
		if (c->cap[t])
			below = t;
	}
}

int pol_cache_create(const struct pol_cache_opts *o, struct pol_cache **out)
{
	struct pol_cache *c;
	int r;

	if (!o || !out || o->size < sizeof(*o) || !pol_ops_get(o->kind))
		return -EINVAL;
	if (!o->capacity[POL_TIER_GPU])
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->kind = o->kind;
	c->ops = pol_ops_get(o->kind);
	/* with MSA a block after a missing one is still served: belady
	 * needs no rule; asym keeps it (a parent is worth at least what its
	 * child is, which its per-class values do not see) */
	c->prefix_rule = o->prefix_rule < 0 ?
				 o->kind == POL_ASYM ||
					 (!o->msa && o->kind == POL_BELADY) :
				 o->prefix_rule != 0;
	c->msa = o->msa;
	c->cost = o->cost;
	c->block_bytes = o->block_bytes ? o->block_bytes : 64ull << 20;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
		if (o->capacity[t] && (o->joins_later & (1u << t)))
			goto err_inval;
		c->cap[t] = o->capacity[t];
	}
	pol_cache_set_last_tier(c);
	r = pol_index_init(&c->ix, o->expected_blocks);
	if (r)
		goto err_free;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
		if (!c->cap[t] && !(o->joins_later & (1u << t)))
			continue;
		r = c->ops->create(c, t, &c->priv[t]);
		if (r)
			goto err_policies;
	}
	*out = c;
	return 0;

err_policies:
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		if (c->priv[t])
			c->ops->destroy(c->priv[t]);
	pol_index_fini(&c->ix);
err_free:
	free(c);
	return r;
err_inval:
	free(c);
	return -EINVAL;
}

void pol_cache_destroy(struct pol_cache *c)
{
	if (!c)
		return;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		if (c->priv[t])
			c->ops->destroy(c->priv[t]);
	pol_index_fini(&c->ix);
	free(c->aside);
	free(c);
}

void pol_cache_set_move_handler(struct pol_cache *c, pol_move_fn fn, void *arg)
{
	c->move_fn = fn;
	c->move_arg = arg;
}

void pol_cache_set_clock(struct pol_cache *c, uint64_t now)
{
	c->now = now;
}

uint64_t pol_cache_clock(const struct pol_cache *c)
{
	return c->now;
}

uint64_t pol_cache_ticks(const struct pol_cache *c)
{
	return c->ticks;
}

void *pol_cache_gpu_policy(struct pol_cache *c)
{
	return c->priv[POL_TIER_GPU];
}

struct pol_index *pol_cache_index(struct pol_cache *c)
{
	return &c->ix;
}

const struct pol_cost_model *pol_cache_cost(const struct pol_cache *c)
{
	return c->cost;
}

enum pol_kind pol_cache_kind(const struct pol_cache *c)
{
	return c->kind;
}

bool pol_cache_prefix_rule(const struct pol_cache *c)
{
	return c->prefix_rule;
}

bool pol_cache_msa(const struct pol_cache *c)
{
	return c->msa;
}

uint64_t pol_cache_count(const struct pol_cache *c, unsigned tier)
{
	return tier < POL_TIER_COUNT ? c->count[tier] : 0;
}

uint64_t pol_cache_capacity(const struct pol_cache *c, unsigned tier)
{
	return tier < POL_TIER_COUNT ? c->cap[tier] : 0;
}

bool pol_cache_has_tier(const struct pol_cache *c, unsigned tier)
{
	return tier < POL_TIER_COUNT && c->priv[tier];
}

void pol_cache_get_stats(const struct pol_cache *c, struct pol_cache_stats *s)
{
	*s = c->st;
}
