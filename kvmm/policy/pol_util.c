/* SPDX-License-Identifier: MIT */
/* Intrusive lists and indexed heap for policies (see pol_util.h). */
#include <errno.h>
#include <stdlib.h>

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
		  pol_heap_before before)
{
	h->n = 0;
	h->cap = 1024;
	h->ids = malloc(h->cap * sizeof(*h->ids));
	h->tier = tier;
	h->ix = ix;
	h->before = before;
	return h->ids ? 0 : -ENOMEM;
}

void pol_heap_fini(struct pol_heap *h)
{
	free(h->ids);
	h->ids = NULL;
	h->n = h->cap = 0;
}

bool pol_heap_contains(const struct pol_heap *h, uint32_t id)
{
	return SLOT(h->ix, id, h->tier)->heap != POL_NONE;
}

static void place(struct pol_heap *h, uint32_t pos, uint32_t id)
{
	h->ids[pos] = id;
	SLOT(h->ix, id, h->tier)->heap = pos;
}

static bool before(const struct pol_heap *h, uint32_t a, uint32_t b)
{
	return h->before(&h->ix->blocks[a], &h->ix->blocks[b]);
}

static void sift_up(struct pol_heap *h, uint32_t pos)
{
	uint32_t id = h->ids[pos];

	while (pos) {
		uint32_t parent = (pos - 1) / 2;

		if (!before(h, id, h->ids[parent]))
			break;
		place(h, pos, h->ids[parent]);
		pos = parent;
	}
	place(h, pos, id);
}

static void sift_down(struct pol_heap *h, uint32_t pos)
{
	uint32_t id = h->ids[pos];

	for (;;) {
		uint32_t l = 2 * pos + 1, r = l + 1, best = l;

		if (l >= h->n)
			break;
		if (r < h->n && before(h, h->ids[r], h->ids[l]))
			best = r;
		if (!before(h, h->ids[best], id))
			break;
		place(h, pos, h->ids[best]);
		pos = best;
	}
	place(h, pos, id);
}

int pol_heap_push(struct pol_heap *h, uint32_t id)
{
	if (pol_heap_contains(h, id)) {
		pol_heap_update(h, id);
		return 0;
	}
	if (h->n == h->cap) {
		uint32_t *n = realloc(h->ids, 2 * (size_t)h->cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		h->ids = n;
		h->cap *= 2;
	}
	place(h, h->n++, id);
	sift_up(h, h->n - 1);
	return 0;
}

void pol_heap_remove(struct pol_heap *h, uint32_t id)
{
	uint32_t pos = SLOT(h->ix, id, h->tier)->heap;
	uint32_t last;

	if (pos == POL_NONE)
		return;
	SLOT(h->ix, id, h->tier)->heap = POL_NONE;
	last = h->ids[--h->n];
	if (pos == h->n)
		return;
	place(h, pos, last);
	sift_up(h, pos);
	sift_down(h, SLOT(h->ix, last, h->tier)->heap);
}

void pol_heap_update(struct pol_heap *h, uint32_t id)
{
	uint32_t pos = SLOT(h->ix, id, h->tier)->heap;

	if (pos == POL_NONE)
		return;
	sift_up(h, pos);
	sift_down(h, SLOT(h->ix, id, h->tier)->heap);
}
