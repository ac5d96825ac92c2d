/* SPDX-License-Identifier: MIT */
/*
 * The tiered cache's tenant rows (policy.h, "Tenants"): a tenant id maps
 * to a row once, when it first admits a block; the block keeps the row
 * number (pol_block.tenant), so entering or leaving a tier updates its
 * tenant's counts in O(1) without a lookup.  The map is a small
 * open-addressing table; the last id looked up is remembered, since an
 * owner admits a request's blocks one after another.
 */
#ifndef KVMM_POLICY_POL_TENANT_H
#define KVMM_POLICY_POL_TENANT_H

#include "kvmm/policy/policy.h"

#define POL_TENANT_MAP 512 /* twice the rows: short probes */

struct pol_tenants {
	struct pol_tenant_count row[POL_TENANT_ROWS];
	uint32_t nr; /* rows in use */
	uint16_t map[POL_TENANT_MAP]; /* row + 1 by the id's hash; 0 free */
	uint32_t last_id; /* the id of the latest lookup ... */
	uint16_t last_row; /* ... and its row (valid once nr > 0) */
};

uint16_t pol_tenant_row_find(struct pol_tenants *t, uint32_t id);

/* The row of tenant id, made on first sight (the shared last row once
 * every other is taken); the last id's inline. */
static inline uint16_t pol_tenant_row(struct pol_tenants *t, uint32_t id)
{
	if (t->nr && id == t->last_id)
		return t->last_row;
	return pol_tenant_row_find(t, id);
}

static inline void pol_tenant_enter(struct pol_tenants *t, uint16_t row,
				    unsigned tier)
{
	t->row[row].blocks[tier]++;
}

static inline void pol_tenant_leave(struct pol_tenants *t, uint16_t row,
				    unsigned tier)
{
	t->row[row].blocks[tier]--;
}

#endif
