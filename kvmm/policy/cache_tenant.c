/* SPDX-License-Identifier: MIT */
/*
 * The tiered cache's tenants: their rows and their limits per tier
 * (policy.h, "Tenants").  Bringing a tenant back within its limit moves
 * blocks, which is cache.c's (pol_cache_tenant_room_slow(), called
 * through tenant_room() in pol_cache_priv.h, only for a limited row).
 */
#include <errno.h>
#include <string.h>

#include "kvmm/policy/pol_cache_priv.h"

int pol_cache_tenant_limit(struct pol_cache *c, uint32_t id,
			   const uint64_t limit[POL_TIER_COUNT])
{
	struct pol_tenant_count *r;
	bool any = false;
	uint16_t row;
	int err;

	if (id == POL_TENANT_OTHERS)
		return -EINVAL;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
		if (limit[t] && !pol_cache_has_tier(c, t))
			return -EINVAL;
		any |= limit[t] != 0;
	}
	/* a new row for a tenant not seen yet, unless they are all taken
	 * (then nothing is made); lifting a limit it never had, nothing */
	row = pol_tenant_row_lookup(&c->tenants, id);
	if (row == POL_TENANT_NO_ROW) {
		if (!any)
			return 0;
		if (!pol_tenant_room(&c->tenants))
			return -ENOSPC;
		row = pol_tenant_row(&c->tenants, id);
	}
	r = &c->tenants.row[row];
	if (any && !r->limited) {
		err = pol_tenant_list_build(&c->tenants, &c->ix, row);
		if (err)
			return err;
	}
	r->limited = any;
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		r->limit[t] = limit[t];
	/* higher tiers first: what they send down counts below */
	for (unsigned t = 0; t < POL_TIER_COUNT; t++)
		tenant_room(c, row, t, NULL, false);
	return 0;
}

size_t pol_cache_tenants(const struct pol_cache *c,
			 struct pol_tenant_count *out, size_t max)
{
	size_t n = c->tenants.nr;

	if (out && max)
		memcpy(out, c->tenants.row, (n < max ? n : max) * sizeof(*out));
	return n;
}

int pol_cache_tenant_row(const struct pol_cache *c, uint32_t id)
{
	uint16_t row = pol_tenant_row_lookup(&c->tenants, id);

	return id == POL_TENANT_OTHERS || row == POL_TENANT_NO_ROW ? -ENOENT :
								     row;
}

uint32_t pol_cache_tenant_id(const struct pol_cache *c, uint16_t row)
{
	return row < c->tenants.nr ? c->tenants.row[row].id : POL_TENANT_OTHERS;
}
