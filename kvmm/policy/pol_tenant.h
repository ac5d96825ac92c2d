/* SPDX-License-Identifier: MIT */
/*
 * The tiered cache's tenant rows (policy.h, "Tenants"): a tenant id maps
 * to a row once, when it first admits a block; the block keeps the row
 * number (pol_block.tenant), so entering or leaving a tier updates its
 * tenant's counts in O(1) without a lookup.  The map is a small
 * open-addressing table; the last id looked up is remembered, since an
 * owner admits a request's blocks one after another.
 *
 * A tenant with a limit (policy.h, "Tenants") also has a list of its
 * blocks per tier, least recently used first, linked through
 * pol_block.tenant_prev/next: its victims when it is over its limit.  The
 * lists are kept only while the row is limited (row[].limited), so a
 * cache without limits pays one test per move; setting a limit builds
 * them from the index.
 */
#ifndef KVMM_POLICY_POL_TENANT_H
#define KVMM_POLICY_POL_TENANT_H

#include "kvmm/policy/policy.h"

#define POL_TENANT_MAP 512 /* twice the rows: short probes */

struct pol_tenants {
	struct pol_tenant_count row[POL_TENANT_ROWS];
	uint32_t nr; /* rows in use, the others' one included */
	/* the others' row + 1 (0: none yet): the id POL_TENANT_OTHERS, and
	 * every id past the first POL_TENANT_ROWS - 1; made when first
	 * needed, at any position, so that an owner may charge that id
	 * itself (kvmmd does) without taking a tenant's row */
	uint16_t others;
	uint16_t map[POL_TENANT_MAP]; /* row + 1 by the id's hash; 0 free */
	uint32_t last_id; /* the id of the latest lookup ... */
	uint16_t last_row; /* ... and its row (valid once nr > 0) */
	/* per limited row and tier: its blocks, least recently used first */
	uint32_t head[POL_TENANT_ROWS][POL_TIER_COUNT];
	uint32_t tail[POL_TENANT_ROWS][POL_TIER_COUNT];
};

uint16_t pol_tenant_row_find(struct pol_tenants *t, uint32_t id);
/* The row of id if it has one of its own, else POL_TENANT_NO_ROW (none
 * is made). */
#define POL_TENANT_NO_ROW UINT16_MAX
uint16_t pol_tenant_row_lookup(const struct pol_tenants *t, uint32_t id);
/* Whether a tenant not seen yet would get a row of its own. */
static inline bool pol_tenant_room(const struct pol_tenants *t)
{
	return t->nr - (t->others != 0) < POL_TENANT_ROWS - 1;
}

/* The row of tenant id, made on first sight (the shared last row once
 * every other is taken); the last id's inline. */
static inline uint16_t pol_tenant_row(struct pol_tenants *t, uint32_t id)
{
	if (t->nr && id == t->last_id)
		return t->last_row;
	return pol_tenant_row_find(t, id);
}

/* Append b (entry id, of row's, now in tier) as its most recent. */
void pol_tenant_list_add(struct pol_tenants *t, struct pol_index *ix,
			 uint16_t row, unsigned tier, uint32_t id);
void pol_tenant_list_del(struct pol_tenants *t, struct pol_index *ix,
			 uint16_t row, unsigned tier, uint32_t id);
/* Rebuild row's lists from every block of it the index holds in a
 * tier, least recent (lowest tick) first; 0 or -ENOMEM. */
int pol_tenant_list_build(struct pol_tenants *t, struct pol_index *ix,
			  uint16_t row);

static inline void pol_tenant_enter(struct pol_tenants *t, struct pol_index *ix,
				    struct pol_block *b, unsigned tier)
{
	t->row[b->tenant].blocks[tier]++;
	if (t->row[b->tenant].limited)
		pol_tenant_list_add(t, ix, b->tenant, tier,
				    pol_index_id(ix, b));
}

static inline void pol_tenant_leave(struct pol_tenants *t, struct pol_index *ix,
				    struct pol_block *b, unsigned tier)
{
	t->row[b->tenant].blocks[tier]--;
	if (t->row[b->tenant].limited)
		pol_tenant_list_del(t, ix, b->tenant, tier,
				    pol_index_id(ix, b));
}

/* b, in tier, was used: it becomes its (limited) tenant's most recent
 * there. */
static inline void pol_tenant_touch(struct pol_tenants *t, struct pol_index *ix,
				    struct pol_block *b, unsigned tier)
{
	uint32_t id = pol_index_id(ix, b);

	pol_tenant_list_del(t, ix, b->tenant, tier, id);
	pol_tenant_list_add(t, ix, b->tenant, tier, id);
}

#endif
