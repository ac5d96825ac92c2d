/* SPDX-License-Identifier: MIT */
/* Intrusive lists and indexed heap for policies (see pol_util.h). */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/policy/pol_mem.h"
#include "kvmm/policy/pol_util.h"

#define SLOT(ix, id, tier) (&(ix)->blocks[id].slot[tier])

void pol_list_init(struct pol_list *l)
{
	l->head = l->tail = POL_NONE;
	l->len = 0;
}

void pol_list_push_head(struct pol_index *ix, unsigned tier, struct pol_list *l,
			uint32_t id)
{
	struct pol_slot *s = SLOT(ix, id, tier);

	s->prev = POL_NONE;
	s->next = l->head;
	if (l->head != POL_NONE)
		SLOT(ix, l->head, tier)->prev = id;
	else
		l->tail = id;
	l->head = id;
	l->len++;
}

void pol_list_unlink(struct pol_index *ix, unsigned tier, struct pol_list *l,
		     uint32_t id)
{
	struct pol_slot *s = SLOT(ix, id, tier);

	if (s->prev != POL_NONE)
		SLOT(ix, s->prev, tier)->next = s->next;
	else
		l->head = s->next;
	if (s->next != POL_NONE)
		SLOT(ix, s->next, tier)->prev = s->prev;
	else
		l->tail = s->prev;
	s->prev = s->next = POL_NONE;
	l->len--;
}

int pol_heap_init(struct pol_heap *h, struct pol_index *ix, unsigned tier,
		  pol_heap_key key)
{
	h->n = 0;
	h->cap = 1024;
	h->nodes = pol_mem_map(h->cap * sizeof(*h->nodes));
	h->tier = tier;
	h->ix = ix;
	h->key = key;
	h->pos = NULL;
	h->npos = 0;
	return h->nodes ? 0 : -ENOMEM;
}

void pol_heap_key_slot(const struct pol_block *b, unsigned tier,
		       struct pol_heap_node *n)
{
	n->k1 = b->slot[tier].key;
	n->k2 = 0;
	n->k3 = 0;
}

void pol_heap_fini(struct pol_heap *h)
{
	pol_mem_unmap(h->nodes, h->cap * sizeof(*h->nodes));
	pol_mem_unmap(h->pos, h->npos * sizeof(*h->pos));
	h->nodes = NULL;
	h->pos = NULL;
	h->n = h->cap = h->npos = 0;
}

static int pos_reserve(struct pol_heap *h, uint32_t id)
{
	uint32_t n = h->npos ? h->npos : 1024, *p;

	if (id < h->npos)
		return 0;
	while (n <= id)
		n *= 2;
	p = pol_mem_remap(h->pos, (size_t)h->npos * sizeof(*p),
			  (size_t)n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (uint32_t i = h->npos; i < n; i++)
		p[i] = POL_NONE;
	h->pos = p;
	h->npos = n;
	return 0;
}

#define POS(h, id) ((h)->pos[id])

bool pol_heap_contains(const struct pol_heap *h, uint32_t id)
{
	return id < h->npos && h->pos[id] != POL_NONE;
}

static inline bool node_before(const struct pol_heap_node *a,
			       const struct pol_heap_node *b)
{
	if (a->k1 != b->k1)
		return a->k1 < b->k1;
	if (a->k2 != b->k2)
		return a->k2 < b->k2;
	return a->k3 < b->k3;
}

static inline void place(struct pol_heap *h, uint32_t pos,
			 const struct pol_heap_node *n)
{
	h->nodes[pos] = *n;
	POS(h, n->id) = pos;
}

/* Returns true when the node moved (then it needs no sift down). */
static bool sift_up(struct pol_heap *h, uint32_t pos)
{
	struct pol_heap_node n = h->nodes[pos];
	uint32_t from = pos;

	while (pos) {
		uint32_t parent = (pos - 1) / 2;

		if (!node_before(&n, &h->nodes[parent]))
			break;
		place(h, pos, &h->nodes[parent]);
		pos = parent;
	}
	place(h, pos, &n);
	return pos != from;
}

static void sift_down(struct pol_heap *h, uint32_t pos)
{
	struct pol_heap_node n = h->nodes[pos];

	for (;;) {
		uint32_t l = 2 * pos + 1, r = l + 1, best = l;

		if (l >= h->n)
			break;
		/*
		 * Start loading the level after next (8 nodes, 192 bytes)
		 * now, so the misses of a deep heap overlap instead of
		 * coming one level at a time.
		 */
		if (8 * pos + 14 < h->n) {
			const char *g = (const char *)&h->nodes[8 * pos + 7];

			__builtin_prefetch(g);
			__builtin_prefetch(g + 64);
			__builtin_prefetch(g + 128);
			__builtin_prefetch(g + 191);
		}
		if (r < h->n && node_before(&h->nodes[r], &h->nodes[l]))
			best = r;
		if (!node_before(&h->nodes[best], &n))
			break;
		place(h, pos, &h->nodes[best]);
		pos = best;
	}
	place(h, pos, &n);
}

static void fill(struct pol_heap *h, uint32_t id, struct pol_heap_node *n)
{
	h->key(&h->ix->blocks[id], h->tier, n);
	n->id = id;
}

int pol_heap_push(struct pol_heap *h, uint32_t id)
{
	if (pol_heap_contains(h, id)) {
		pol_heap_update(h, id);
		return 0;
	}
	if (pos_reserve(h, id))
		return -ENOMEM;
	if (h->n == h->cap) {
		struct pol_heap_node *n =
			pol_mem_remap(h->nodes, (size_t)h->cap * sizeof(*n),
				      2 * (size_t)h->cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		h->nodes = n;
		h->cap *= 2;
	}
	fill(h, id, &h->nodes[h->n]);
	POS(h, id) = h->n;
	sift_up(h, h->n++);
	return 0;
}

void pol_heap_remove(struct pol_heap *h, uint32_t id)
{
	uint32_t pos;
	struct pol_heap_node last;

	if (!pol_heap_contains(h, id))
		return;
	pos = POS(h, id);
	POS(h, id) = POL_NONE;
	last = h->nodes[--h->n];
	if (pos == h->n)
		return;
	place(h, pos, &last);
	/* A node that moved up is below its old parent: nothing to sink. */
	if (!sift_up(h, pos))
		sift_down(h, pos);
}

static inline bool same_keys(const struct pol_heap_node *a,
			     const struct pol_heap_node *b)
{
	return a->k1 == b->k1 && a->k2 == b->k2 && a->k3 == b->k3;
}

void pol_heap_update(struct pol_heap *h, uint32_t id)
{
	struct pol_heap_node n;
	uint32_t pos;

	if (!pol_heap_contains(h, id))
		return;
	pos = POS(h, id);
	fill(h, id, &n);
	/* Same keys: sifting would move nothing (most on_change calls). */
	if (same_keys(&n, &h->nodes[pos]))
		return;
	h->nodes[pos] = n;
	if (!sift_up(h, pos))
		sift_down(h, pos);
}
