// SPDX-License-Identifier: MIT
/* Tenant rows of the tiered cache (pol_tenant.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/pol_tenant.h"

_Static_assert(POL_TENANT_MAP == 1 << 9, "map_slot() takes 9 bits");
_Static_assert(POL_TENANT_MAP >= 2 * POL_TENANT_ROWS, "room to probe");

static unsigned map_slot(uint32_t id)
{
	return (id * 0x9e3779b1u) >> (32 - 9);
}

static uint16_t remember(struct pol_tenants *t, uint32_t id, uint16_t row)
{
	t->last_id = id;
	t->last_row = row;
	return row;
}

uint16_t pol_tenant_row_lookup(const struct pol_tenants *t, uint32_t id)
{
	if (id == POL_TENANT_OTHERS)
		return t->others ? (uint16_t)(t->others - 1) :
				   POL_TENANT_NO_ROW;
	for (unsigned i = map_slot(id); t->map[i]; i = (i + 1) % POL_TENANT_MAP)
		if (t->row[t->map[i] - 1].id == id)
			return (uint16_t)(t->map[i] - 1);
	return POL_TENANT_NO_ROW;
}

uint16_t pol_tenant_row_find(struct pol_tenants *t, uint32_t id)
{
	unsigned i;

	if (id != POL_TENANT_OTHERS) {
		for (i = map_slot(id); t->map[i]; i = (i + 1) % POL_TENANT_MAP)
			if (t->row[t->map[i] - 1].id == id)
				return remember(t, id,
						(uint16_t)(t->map[i] - 1));
	}
	if (id == POL_TENANT_OTHERS || !pol_tenant_room(t)) {
		/* the others' row: every id not given one of its own */
		if (!t->others) {
			t->row[t->nr].id = POL_TENANT_OTHERS;
			t->others = (uint16_t)++t->nr;
		}
		return remember(t, id, (uint16_t)(t->others - 1));
	}
	t->row[t->nr].id = id;
	t->map[i] = (uint16_t)(t->nr + 1);
	return remember(t, id, (uint16_t)t->nr++);
}

void pol_tenant_list_add(struct pol_tenants *t, struct pol_index *ix,
			 uint16_t row, unsigned tier, uint32_t id)
{
	struct pol_block *b = pol_index_at(ix, id);
	uint32_t tail = t->tail[row][tier];

	b->tenant_prev = tail;
	b->tenant_next = POL_NONE;
	if (tail == POL_NONE)
		t->head[row][tier] = id;
	else
		pol_index_at(ix, tail)->tenant_next = id;
	t->tail[row][tier] = id;
}

void pol_tenant_list_del(struct pol_tenants *t, struct pol_index *ix,
			 uint16_t row, unsigned tier, uint32_t id)
{
	struct pol_block *b = pol_index_at(ix, id);

	if (b->tenant_prev == POL_NONE)
		t->head[row][tier] = b->tenant_next;
	else
		pol_index_at(ix, b->tenant_prev)->tenant_next = b->tenant_next;
	if (b->tenant_next == POL_NONE)
		t->tail[row][tier] = b->tenant_prev;
	else
		pol_index_at(ix, b->tenant_next)->tenant_prev = b->tenant_prev;
	b->tenant_prev = b->tenant_next = POL_NONE;
}

struct tick_id {
	uint64_t tick;
	uint32_t id;
};

static int by_tick(const void *a, const void *b)
{
	uint64_t x = ((const struct tick_id *)a)->tick;
	uint64_t y = ((const struct tick_id *)b)->tick;

	return x < y ? -1 : x > y;
}

int pol_tenant_list_build(struct pol_tenants *t, struct pol_index *ix,
			  uint16_t row)
{
	const uint64_t *in = t->row[row].blocks;
	uint64_t total = in[0] + in[1] + in[2];
	struct tick_id *v = NULL;
	uint32_t n = 0;

	if (total) {
		v = malloc(sizeof(*v) * total);
		if (!v)
			return -ENOMEM;
	}
	for (unsigned tier = 0; tier < POL_TIER_COUNT; tier++)
		t->head[row][tier] = t->tail[row][tier] = POL_NONE;
	for (uint32_t id = 0; v && id < ix->high_water; id++) {
		const struct pol_block *b = pol_index_at(ix, id);

		if (b->live && b->tier < POL_TIER_COUNT && b->tenant == row &&
		    n < total)
			v[n++] = (struct tick_id){ b->tick, id };
	}
	if (n)
		qsort(v, n, sizeof(*v), by_tick);
	for (uint32_t i = 0; i < n; i++)
		pol_tenant_list_add(t, ix, row, pol_index_at(ix, v[i].id)->tier,
				    v[i].id);
	free(v);
	return 0;
}

int pol_tenant_limit_parse(const char *spec, uint64_t limit[POL_TIER_COUNT])
{
	static const char *const tiers[POL_TIER_COUNT] = { "gpu", "host",
							   "nvme" };
	const char *p = spec;

	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		limit[t] = 0;
	if (!strcmp(spec, "none"))
		return 0;
	for (;;) {
		const char *colon = strchr(p, ':');
		unsigned long long v;
		char *end;
		unsigned t;

		if (!colon)
			return -EINVAL;
		for (t = 0; t < POL_TIER_COUNT; t++)
			if ((size_t)(colon - p) == strlen(tiers[t]) &&
			    !strncmp(p, tiers[t], colon - p))
				break;
		if (t == POL_TIER_COUNT || !isdigit((unsigned char)colon[1]))
			return -EINVAL;
		errno = 0;
		v = strtoull(colon + 1, &end, 10);
		if (errno || !v || (*end && *end != ',') || limit[t])
			return -EINVAL;
		limit[t] = v;
		if (!*end)
			return 0;
		p = end + 1;
	}
}
