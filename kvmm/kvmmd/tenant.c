// SPDX-License-Identifier: MIT
/*
 * Tenants (tenant.h): the counts kvmmd keeps per tenant, and the
 * ADMIN_TENANTS reply that joins them with the policy's cached blocks.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/scope.h"
#include "kvmm/kvmmd/tenant.h"

_Static_assert(POL_TIER_COUNT == 3, "kvmm_tenant_info's per-tier arrays");
_Static_assert(offsetof(struct kvmm_tenant_info, limit_blocks) + 24 ==
		       KVMM_TENANT_INFO_SIZE_1_10,
	       "1.10 entries end where the limits begin");

uint32_t kd_tenant_id(const struct kd_session *s)
{
	return s->d->scope.mode == KD_SCOPE_GID ? (uint32_t)s->gid :
						  (uint32_t)s->uid;
}

uint32_t kd_tenant_charge(struct kd_daemon *d, const struct kd_session *s)
{
	uint16_t r = pol_tenant_row(&d->tenants.map, kd_tenant_id(s));

	return d->tenants.map.row[r].id; /* its own, or POL_TENANT_OTHERS */
}

struct kd_tenant_counts *kd_tenant(struct kd_daemon *d, uint32_t id)
{
	return &d->tenants.row[pol_tenant_row(&d->tenants.map, id)];
}

int kd_tenant_set_limit(struct kd_daemon *d, uint32_t id,
			const uint64_t limit[POL_TIER_COUNT])
{
	const struct pol_cache *pol = kd_cache_policy(d);
	uint64_t old[POL_TIER_COUNT];
	struct kd_tenant_counts *k;
	uint16_t row;
	int err;

	if (id == KVMM_TENANT_OTHERS)
		return -EINVAL;
	if ((limit[POL_TIER_HOST] && !d->cfg.host_mem) ||
	    (limit[POL_TIER_NVME] && !d->cfg.nvme_path[0]))
		return -EINVAL;
	/* once the cache is open, the tiers it opened (a host tier smaller
	 * than a block did not), before a row is made */
	for (unsigned t = 0; pol && t < POL_TIER_COUNT; t++)
		if (limit[t] && !pol_cache_has_tier(pol, t))
			return -EINVAL;
	row = pol_tenant_row_lookup(&d->tenants.map, id);
	if (row == POL_TENANT_NO_ROW) {
		/* lifting a limit it never had changes nothing; a new
		 * tenant past the 255th cannot have one */
		if (!limit[0] && !limit[1] && !limit[2])
			return 0;
		if (!pol_tenant_room(&d->tenants.map))
			return -ENOSPC;
		row = pol_tenant_row(&d->tenants.map, id);
	}
	k = &d->tenants.row[row];
	memcpy(old, k->limit, sizeof(old));
	memcpy(k->limit, limit, sizeof(k->limit));
	err = kd_cache_tenant_limit(d, id, limit);
	if (err) /* -ENOMEM building the tenant's lists: as it was */
		memcpy(k->limit, old, sizeof(old));
	return err;
}

void kd_tenant_limits_apply(struct kd_daemon *d, struct pol_cache *pol)
{
	static const char *const tier[POL_TIER_COUNT] = { "gpu", "host",
							  "nvme" };

	for (uint32_t i = 0; i < d->tenants.map.nr; i++) {
		uint64_t *l = d->tenants.row[i].limit;
		uint32_t id = d->tenants.map.row[i].id;
		int err;

		if (!l[0] && !l[1] && !l[2])
			continue;
		/* a tier the options promised may not have opened (a host
		 * tier smaller than one block): its limit goes, the rest
		 * applies, and ADMIN_TENANTS shows what does */
		for (unsigned t = 0; t < POL_TIER_COUNT; t++)
			if (l[t] && !pol_cache_has_tier(pol, t)) {
				vmm_log(VMM_LOG_WARN,
					"cache: tenant %u: no %s tier opened, its limit there (%llu blocks) is not applied",
					id, tier[t], (unsigned long long)l[t]);
				l[t] = 0;
			}
		err = pol_cache_tenant_limit(pol, id, l);
		if (err) {
			vmm_log(VMM_LOG_WARN,
				"cache: the limit of tenant %u is not applied: %s",
				id, strerror(-err));
			memset(l, 0, sizeof(d->tenants.row[i].limit));
		}
	}
}

void kd_tenant_limits_apply_more(struct kd_daemon *d, struct pol_cache *pol)
{
	for (uint32_t i = 0; i < d->tenants.map.nr; i++) {
		const uint64_t *l = d->tenants.row[i].limit;
		uint64_t lim[POL_TIER_COUNT];

		if (!l[0] && !l[1] && !l[2])
			continue;
		for (unsigned t = 0; t < POL_TIER_COUNT; t++)
			lim[t] = pol_cache_has_tier(pol, t) ? l[t] : 0;
		if (pol_cache_tenant_limit(pol, d->tenants.map.row[i].id, lim))
			vmm_log(VMM_LOG_WARN,
				"cache: the limit of tenant %u is not applied to a later block size",
				d->tenants.map.row[i].id);
	}
}

/* Room in a reply: the rows here and in the policy (the same tenants
 * and the others' row: the policy is charged only ids that have a row
 * here, or KVMM_TENANT_OTHERS), then the tenants of live sessions not
 * served yet while there is room. */
#define REPLY_MAX (POL_TENANT_ROWS + 128)

/* The entry of id in r, made at the end if it is not there yet (NULL
 * when r is full). */
static struct kvmm_tenant_info *entry(struct kvmm_tenants_reply *r, uint32_t id)
{
	struct kvmm_tenant_info *t;

	for (uint32_t i = 0; i < r->nr; i++)
		if (r->tenants[i].id == id)
			return &r->tenants[i];
	if (r->nr == REPLY_MAX)
		return NULL;
	t = &r->tenants[r->nr++];
	t->size = sizeof(*t);
	t->id = id;
	return t;
}

/* The index of the cache of blocks of block_pages pages (every one for
 * 0: -1), or -ENOENT. */
static int size_index(struct kd_daemon *d, uint32_t block_pages)
{
	if (!block_pages)
		return -1;
	for (uint32_t i = 0; i < KD_CACHE_SIZES; i++)
		if (kd_cache_size_at(d, i) == block_pages)
			return (int)i;
	return -ENOENT;
}

int kd_tenants_reply(struct kd_daemon *d, uint32_t block_pages,
		     struct kvmm_tenants_reply **out, size_t *len)
{
	const struct pol_cache *pol;
	struct pol_tenant_count *pt;
	struct kvmm_tenants_reply *r;
	int only = size_index(d, block_pages);

	_Static_assert(
		sizeof(struct kvmm_msg_hdr) +
				sizeof(struct kvmm_tenants_reply) +
				REPLY_MAX * sizeof(struct kvmm_tenant_info) <=
			KVMM_MSG_MAX,
		"ADMIN_TENANTS fits a message");
	_Static_assert(KD_CACHE_SIZES <= KVMM_TIER_STATS_SIZES,
		       "a tenant's cold counts have room for every size");
	if (only == -ENOENT)
		return -ENOENT;
	r = calloc(1, sizeof(*r) + REPLY_MAX * sizeof(r->tenants[0]));
	pt = calloc(POL_TENANT_ROWS, sizeof(*pt));
	if (!r || !pt) {
		free(r);
		free(pt);
		return -ENOMEM;
	}
	r->entry_size = sizeof(r->tenants[0]);
	r->kind = d->scope.mode == KD_SCOPE_GID ? KVMM_TENANT_GID :
						  KVMM_TENANT_UID;
	for (uint32_t i = 0; i < d->tenants.map.nr; i++) {
		const struct kd_tenant_counts *k = &d->tenants.row[i];
		struct kvmm_tenant_info *t = entry(r, d->tenants.map.row[i].id);

		if (!t)
			break;
		t->prefix_opens += k->prefix_opens;
		for (unsigned tier = 0; tier < POL_TIER_COUNT; tier++)
			t->hit_blocks[tier] += k->hit_blocks[tier];
		t->published_blocks += k->published_blocks;
		for (unsigned tier = 0; tier < POL_TIER_COUNT; tier++)
			t->limit_blocks[tier] = k->limit[tier];
		/* its recovered blocks no open used yet, outside the
		 * policy: cached on NVMe, admitted when they were found
		 * (those of every size, or of the one asked) */
		for (uint32_t size = 0; size < KD_CACHE_SIZES; size++) {
			const uint64_t blocks = k->cold_of[size].blocks;
			const uint64_t dropped = k->cold_of[size].dropped;

			if (only >= 0 && size != (uint32_t)only)
				continue;
			t->cached_blocks[POL_TIER_NVME] += blocks;
			t->admitted_blocks += blocks + dropped;
			t->dropped_blocks += dropped;
			t->limit_moves += k->cold_of[size].limit_drops;
		}
	}
	/* the blocks of every block size's cache (cache.h), or of one */
	for (uint32_t size = 0; size < KD_CACHE_SIZES; size++) {
		size_t np;

		if (only >= 0 && size != (uint32_t)only)
			continue;
		pol = kd_cache_policy_at(d, size);
		np = pol ? pol_cache_tenants(pol, pt, POL_TENANT_ROWS) : 0;
		for (size_t i = 0; i < np && i < POL_TENANT_ROWS; i++) {
			struct kvmm_tenant_info *t = entry(r, pt[i].id);

			if (!t)
				break;
			for (unsigned tier = 0; tier < POL_TIER_COUNT; tier++)
				t->cached_blocks[tier] += pt[i].blocks[tier];
			t->admitted_blocks += pt[i].admitted;
			t->dropped_blocks += pt[i].dropped;
			t->limit_moves += pt[i].limit_moves;
		}
	}
	free(pt);
	/* a tenant connected but not yet served is listed too */
	for (struct kd_session *s = d->sessions; s; s = s->next) {
		struct kvmm_tenant_info *t;

		if (s->admin_only || !s->hello_done)
			continue;
		t = entry(r, kd_tenant_id(s));
		if (t)
			t->sessions++;
	}
	/*
	 * A uid's quota: what is charged to it, cached pages too.  After
	 * the sessions' rows (a tenant connected but not served yet showed
	 * 0 used), and a uid whose quarantined processes hold pages gets
	 * a row if it has none: those pages count against its quota until
	 * the processes exit, and nothing else showed them.  And a uid
	 * with a quota: one set by --quota or kvmmctl quota for a uid not
	 * connected yet was shown nowhere, so it could not be read back.
	 * Only those: a uid the policy folds into the others' row stays
	 * there.
	 */
	for (uint64_t b = 0;
	     r->kind == KVMM_TENANT_UID && d->quotas.b && b <= d->quotas.mask;
	     b++)
		for (struct kd_hnode *n = d->quotas.b[b]; n; n = n->next) {
			const struct kd_quota *q = (const void *)n;

			if ((q->zombies && q->used_pages) || q->limit_pages)
				(void)entry(r, q->uid);
		}
	for (uint32_t i = 0; r->kind == KVMM_TENANT_UID && i < r->nr; i++) {
		struct kvmm_tenant_info *t = &r->tenants[i];
		const struct kd_quota *q = t->id == KVMM_TENANT_OTHERS ?
						   NULL :
						   kd_quota_find(d, t->id);

		if (!q)
			continue;
		t->quota_pages = q->limit_pages;
		t->quota_used_pages = q->used_pages;
		t->quota_cached_pages = q->cached_pages;
	}
	*len = sizeof(*r) + r->nr * sizeof(r->tenants[0]);
	r->size = (uint32_t)*len;
	*out = r;
	return 0;
}
