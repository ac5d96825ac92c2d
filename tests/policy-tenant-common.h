/* SPDX-License-Identifier: MIT */
/*
 * What the policy's tenant tests (policy-tenants, policy-tenant-limit)
 * share: an access by a tenant one clock tick after the last, and a
 * tenant's row as pol_cache_tenants() copies it (row(), or row_present()
 * where it must be there).
 */
#ifndef KVMM_TESTS_POLICY_TENANT_COMMON_H
#define KVMM_TESTS_POLICY_TENANT_COMMON_H

#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

static uint64_t clock_now;

/* Block h, a child of parent (0: none), accessed by tenant. */
static inline void touch_child(struct pol_cache *c, uint64_t h, uint64_t parent,
			       uint32_t tenant)
{
	struct pol_block_desc d = { .hash = h,
				    .parent_hash = parent,
				    .flags = parent ? POL_BLOCK_HAS_PARENT : 0,
				    .tenant = tenant };

	pol_cache_set_clock(c, ++clock_now);
	t_ok(pol_cache_access(c, &d, NULL));
}

static inline void touch(struct pol_cache *c, uint64_t h, uint32_t tenant)
{
	touch_child(c, h, 0, tenant);
}

/* The row of tenant id (a copy, valid until the next call), or NULL. */
static inline const struct pol_tenant_count *row(const struct pol_cache *c,
						 uint32_t id)
{
	static struct pol_tenant_count rows[POL_TENANT_ROWS];
	size_t n = pol_cache_tenants(c, rows, POL_TENANT_ROWS);

	for (size_t i = 0; i < n; i++)
		if (rows[i].id == id)
			return &rows[i];
	return NULL;
}

/* The row of tenant id, which must be there: the test fails, saying
 * which, where a tenant has none (not a NULL dereference). */
static inline const struct pol_tenant_count *
row_present(const struct pol_cache *c, uint32_t id)
{
	const struct pol_tenant_count *r = row(c, id);

	if (!r)
		t_fail("tenant %u has no row", id);
	return r;
}

#endif
