// SPDX-License-Identifier: MIT
/* Tenant rows of the tiered cache (pol_tenant.h). */
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

uint16_t pol_tenant_row_find(struct pol_tenants *t, uint32_t id)
{
	unsigned i;

	for (i = map_slot(id); t->map[i]; i = (i + 1) % POL_TENANT_MAP)
		if (t->row[t->map[i] - 1].id == id)
			return remember(t, id, (uint16_t)(t->map[i] - 1));
	if (t->nr == POL_TENANT_ROWS - 1) {
		/* the others' row: every id not given one of its own */
		t->row[t->nr].id = POL_TENANT_OTHERS;
		t->nr++;
	}
	if (t->nr == POL_TENANT_ROWS)
		return remember(t, id, POL_TENANT_ROWS - 1);
	t->row[t->nr].id = id;
	t->map[i] = (uint16_t)(t->nr + 1);
	return remember(t, id, (uint16_t)t->nr++);
}
