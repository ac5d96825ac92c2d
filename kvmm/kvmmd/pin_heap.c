// SPDX-License-Identifier: MIT
/*
 * The TTL pins' min-heap on their expiry (pin.c's records with
 * KVMM_PIN_F_TTL): the loop timer is armed at heap[0]'s expiry, and an
 * add or a delete costs O(log n), so a TTL record's pin, unpin and
 * expiry stay cheap with many pins.  Its own file so that pin.c keeps to
 * the records and the commands.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/kvmmd/pin_priv.h"

static void heap_set(struct kd_pins *ps, uint32_t i, struct kd_pin *p)
{
	ps->heap[i] = p;
	p->heap = i;
}

static void heap_up(struct kd_pins *ps, uint32_t i)
{
	struct kd_pin *p = ps->heap[i];

	while (i) {
		uint32_t up = (i - 1) / 2;

		if (ps->heap[up]->expires <= p->expires)
			break;
		heap_set(ps, i, ps->heap[up]);
		i = up;
	}
	heap_set(ps, i, p);
}

static void heap_down(struct kd_pins *ps, uint32_t i)
{
	struct kd_pin *p = ps->heap[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= ps->heap_n)
			break;
		if (c + 1 < ps->heap_n &&
		    ps->heap[c + 1]->expires < ps->heap[c]->expires)
			c++;
		if (p->expires <= ps->heap[c]->expires)
			break;
		heap_set(ps, i, ps->heap[c]);
		i = c;
	}
	heap_set(ps, i, p);
}

void pin_heap_add(struct kd_pins *ps, struct kd_pin *p)
{
	heap_set(ps, ps->heap_n++, p);
	heap_up(ps, p->heap);
}

void pin_heap_del(struct kd_pins *ps, struct kd_pin *p)
{
	uint32_t i = p->heap;
	struct kd_pin *last = ps->heap[--ps->heap_n];

	p->heap = PIN_NO_HEAP;
	if (last == p)
		return;
	heap_set(ps, i, last);
	heap_up(ps, i);
	heap_down(ps, last->heap);
}

/* Room for one more TTL record, so that adding one cannot fail later. */
int pin_heap_reserve(struct kd_pins *ps)
{
	uint32_t cap = ps->heap_cap ? 2 * ps->heap_cap : 64;
	struct kd_pin **h;

	if (ps->heap_n < ps->heap_cap)
		return 0;
	h = realloc(ps->heap, cap * sizeof(*h));
	if (!h)
		return -ENOMEM;
	ps->heap = h;
	ps->heap_cap = cap;
	return 0;
}
