/* SPDX-License-Identifier: MIT */
/*
 * LRU: one recency list per tier.  The victim is the least recently used
 * evictable block.  The classic baseline: without the prefix rule (its
 * default) it matches the published plain-replay figures.
 *
 * A block's place in the recency order is a number taken when it goes to
 * the head (slot.key, from a per-tier counter).  Blocks that cannot go
 * while they are pinned or referenced leave the list (parked) so that a
 * decision never walks past them, however many there are; released,
 * they come back in their order: to the head when no block in the list
 * is more recent (the usual case: a sequence lets go of what it just
 * used), else into a heap of returned blocks ordered by that number.
 * The victim is the least recent of the list's tail and the heap's top,
 * which is the block the single list would have given.  A TTL expires
 * without a call, and with the prefix rule a parent's children come and
 * go: those blocks stay where they are and the scan from the cold end
 * steps over them, as before.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/policy/policy.h"
#include "kvmm/policy/pol_util.h"

/* slot.list: where a block of this tier is */
enum { LRU_NONE, LRU_LIST, LRU_PARKED, LRU_BACK };

struct lru {
	struct pol_cache *c;
	struct pol_index *ix;
	unsigned tier;
	struct pol_list list;
	struct pol_heap back; /* returned blocks, least recent on top */
	uint64_t seq; /* the next recency number */
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
	if (pol_heap_init(&l->back, l->ix, tier, pol_heap_key_slot)) {
		free(l);
		return -ENOMEM;
	}
	*priv = l;
	return 0;
}

static void lru_destroy(void *priv)
{
	struct lru *l = priv;

	pol_heap_fini(&l->back);
	free(l);
}

static bool held(const struct pol_block *b)
{
	return b->pins || b->refcount;
}

/* Take b out of wherever it is in this tier. */
static void take_out(struct lru *l, struct pol_block *b, uint32_t id)
{
	struct pol_slot *s = &b->slot[l->tier];

	if (s->list == LRU_LIST)
		pol_list_unlink(l->ix, l->tier, &l->list, id);
	else if (s->list == LRU_BACK)
		pol_heap_remove(&l->back, id);
	s->list = LRU_NONE;
}

/* b is used (or enters the tier): the most recent of the tier. */
static void to_head(struct lru *l, struct pol_block *b, uint32_t id)
{
	struct pol_slot *s = &b->slot[l->tier];

	s->key = (double)l->seq++;
	if (held(b)) {
		s->list = LRU_PARKED;
		return;
	}
	pol_list_push_head(l->ix, l->tier, &l->list, id);
	s->list = LRU_LIST;
}

static void lru_insert(void *priv, struct pol_block *b)
{
	struct lru *l = priv;

	to_head(l, b, pol_index_id(l->ix, b));
}

static void lru_access(void *priv, struct pol_block *b)
{
	struct lru *l = priv;
	uint32_t id = pol_index_id(l->ix, b);

	take_out(l, b, id);
	to_head(l, b, id);
}

static void lru_remove(void *priv, struct pol_block *b)
{
	struct lru *l = priv;

	take_out(l, b, pol_index_id(l->ix, b));
}

/* A pin or a reference came or went: park b, or bring it back in order. */
static void lru_change(void *priv, struct pol_block *b)
{
	struct lru *l = priv;
	struct pol_slot *s = &b->slot[l->tier];
	uint32_t id = pol_index_id(l->ix, b);

	if (b->tier != l->tier)
		return;
	if (held(b)) {
		if (s->list != LRU_PARKED) {
			take_out(l, b, id);
			s->list = LRU_PARKED;
		}
		return;
	}
	if (s->list != LRU_PARKED)
		return;
	if (l->list.head == POL_NONE ||
	    pol_index_at(l->ix, l->list.head)->slot[l->tier].key < s->key) {
		pol_list_push_head(l->ix, l->tier, &l->list, id);
		s->list = LRU_LIST;
	} else if (!pol_heap_push(&l->back, id)) {
		s->list = LRU_BACK;
	} else {
		/* no memory for the heap: the head, out of order */
		pol_list_push_head(l->ix, l->tier, &l->list, id);
		s->list = LRU_LIST;
	}
}

/* The least recent evictable block of the returned ones (their heap's
 * top, unless a TTL or the cache holds it: then a look at all of them). */
static struct pol_block *back_victim(struct lru *l)
{
	struct pol_block *best = NULL;
	uint32_t id = pol_heap_top(&l->back);

	if (id == POL_NONE)
		return NULL;
	best = pol_index_at(l->ix, id);
	if (pol_cache_evictable(l->c, best))
		return best;
	best = NULL;
	for (uint32_t i = 0; i < l->back.n; i++) {
		struct pol_block *b = pol_index_at(l->ix, l->back.nodes[i].id);

		if ((!best || b->slot[l->tier].key < best->slot[l->tier].key) &&
		    pol_cache_evictable(l->c, b))
			best = b;
	}
	return best;
}

static struct pol_block *lru_victim(void *priv)
{
	struct lru *l = priv;
	struct pol_block *v = NULL, *r;

	for (uint32_t id = l->list.tail; id != POL_NONE;) {
		struct pol_block *b = pol_index_at(l->ix, id);

		if (pol_cache_evictable(l->c, b)) {
			v = b;
			break;
		}
		id = b->slot[l->tier].prev;
	}
	r = back_victim(l);
	if (r && (!v || r->slot[l->tier].key < v->slot[l->tier].key))
		v = r;
	return v;
}

const struct pol_ops pol_lru_ops = {
	.name = "lru",
	.create = lru_create,
	.destroy = lru_destroy,
	.on_insert = lru_insert,
	.on_access = lru_access,
	.on_remove = lru_remove,
	.on_change = lru_change,
	.victim = lru_victim,
};
