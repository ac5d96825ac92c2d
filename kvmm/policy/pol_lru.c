/* SPDX-License-Identifier: MIT */
/*
 * LRU: one recency list per tier.  The victim is the least recently used
 * evictable block (the scan from the cold end skips pinned blocks and,
 * with the prefix rule, parents of resident children).  The classic
 * baseline: without the prefix rule (its default) it matches the
 * published plain-replay figures.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/policy/policy.h"
#include "kvmm/policy/pol_util.h"

struct lru {
	struct pol_cache *c;
	struct pol_index *ix;
	unsigned tier;
	struct pol_list list;
};

static int lru_create(struct pol_cache *c, unsigned tier, void **priv)
{
	struct lru *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->c = c;
	l->ix = pol_cache_index(c);
	l->tier = tier;
	pol_list_init(&l->list);
	*priv = l;
	return 0;
}

static void lru_destroy(void *priv)
{
	free(priv);
}

static void lru_insert(void *priv, struct pol_block *b)
{
	struct lru *l = priv;

	pol_list_push_head(l->ix, l->tier, &l->list, pol_index_id(l->ix, b));
}

static void lru_access(void *priv, struct pol_block *b)
{
	struct lru *l = priv;
	uint32_t id = pol_index_id(l->ix, b);

	pol_list_unlink(l->ix, l->tier, &l->list, id);
	pol_list_push_head(l->ix, l->tier, &l->list, id);
}

static void lru_remove(void *priv, struct pol_block *b)
{
	struct lru *l = priv;

	pol_list_unlink(l->ix, l->tier, &l->list, pol_index_id(l->ix, b));
}

static struct pol_block *lru_victim(void *priv)
{
	struct lru *l = priv;

	for (uint32_t id = l->list.tail; id != POL_NONE;) {
		struct pol_block *b = pol_index_at(l->ix, id);

		if (pol_cache_evictable(l->c, b))
			return b;
		id = b->slot[l->tier].prev;
	}
	return NULL;
}

const struct pol_ops pol_lru_ops = {
	.name = "lru",
	.create = lru_create,
	.destroy = lru_destroy,
	.on_insert = lru_insert,
	.on_access = lru_access,
	.on_remove = lru_remove,
	.victim = lru_victim,
};
