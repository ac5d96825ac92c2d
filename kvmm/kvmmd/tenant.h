/* SPDX-License-Identifier: MIT */
/*
 * Tenants (ADMIN_TENANTS, `kvmmctl tenants`, the kvmm_tenant_* metrics):
 * per uid, or per gid under --cache-scope gid, what the cache holds for
 * it and what its sessions got from it.  The cached blocks come from the
 * policy (pol_cache_tenants(): charged to whoever admitted them, in
 * whichever tier they are now); what the sessions got is counted here:
 * prefix opens, the blocks they found in each tier, the blocks their
 * publishes cached; and the blocks the restart recovered for it, cold
 * until an open uses them.  A tenant's row is made when one of its
 * sessions first opens a prefix or publishes, a limit is set for it, or
 * the restart finds a block of it on NVMe, and is kept; the rows are the policy's (pol_tenant.h): 255 tenants, then a
 * shared one.
 *
 * Limits (--tenant-limit, ADMIN_SET_TENANT_LIMIT) are kept here and given
 * to the policy (pol_cache_tenant_limit(), which enforces them), also
 * when the policy is made after they were set: the cache's tiers open
 * with the first block size seen.
 */
#ifndef KVMM_KVMMD_TENANT_H
#define KVMM_KVMMD_TENANT_H

#include <stddef.h>
#include <stdint.h>

#include "kvmm/policy/pol_tenant.h"
#include "kvmm/uapi.h"

struct kd_daemon;
struct kd_session;

struct kd_tenant_counts {
	uint64_t prefix_opens;
	uint64_t hit_blocks[POL_TIER_COUNT]; /* by the tier found in */
	uint64_t published_blocks;
	uint64_t limit[POL_TIER_COUNT]; /* its limit per tier; 0: none */
	/*
	 * Its blocks the restart found on NVMe (their headers name it) that
	 * no open has used yet: "cold", outside the policy, so counted here
	 * (cache_recover.c) and added to the policy's counts in ADMIN_TENANTS
	 * as cached NVMe blocks; dropped of them left the cache while cold
	 * (an eviction for room, a drop, its NVMe limit: limit_drops of
	 * those), so that admitted - dropped stays what it has cached.  One
	 * an open uses is the policy's from then on, still this tenant's.
	 * Kept per size (its place in kd_daemon.caches: each size has its
	 * NVMe partition, and its tenant limits apply to each size apart),
	 * for ADMIN_TENANTS of one size (ABI 1.22) and kc_cold_limit();
	 * every size's is their sum.
	 */
	struct {
		uint64_t blocks, dropped, limit_drops;
	} cold_of[KVMM_TIER_STATS_SIZES];
};

struct kd_tenants {
	struct pol_tenants map; /* id -> row (its block counts unused) */
	struct kd_tenant_counts row[POL_TENANT_ROWS];
};

/* The tenant s counts for: its uid, or its gid under --cache-scope gid
 * (the id the policy charges its blocks to). */
uint32_t kd_tenant_id(const struct kd_session *s);
/*
 * The id s's blocks are charged to in the policy and its counts kept
 * under: kd_tenant_id(s), or POL_TENANT_OTHERS once the rows here are
 * taken (a row made on first sight).  The rows here decide who shares
 * the others' row, so the policy's rows (made when a tenant first admits
 * a block, a later moment) never split a tenant in two.
 */
uint32_t kd_tenant_charge(struct kd_daemon *d, const struct kd_session *s);
/* The counts of tenant id (a row made on first sight). */
struct kd_tenant_counts *kd_tenant(struct kd_daemon *d, uint32_t id);
/*
 * Set tenant id's limit per tier (blocks; all 0 lifts it) and apply it to
 * the cache's policy if there is one yet.  0; -EINVAL for id
 * KVMM_TENANT_OTHERS or a limit on a tier this kvmmd has not got;
 * -ENOSPC when the tenant would share the others' row (nothing changes).
 */
int kd_tenant_set_limit(struct kd_daemon *d, uint32_t id,
			const uint64_t limit[POL_TIER_COUNT]);
/* Give every limit set so far to pol (made just now); a limit on a tier
 * it has not got, or one it refuses, is logged and dropped. */
void kd_tenant_limits_apply(struct kd_daemon *d, struct pol_cache *pol);
/* The same for the policy of a later block size's cache (cache.h): a
 * tier it lacks (a later size has no NVMe tier, nor a host tier when no
 * size was named) has no limit there, and the tenants' limits stay as
 * they are. */
void kd_tenant_limits_apply_more(struct kd_daemon *d, struct pol_cache *pol);

/*
 * ADMIN_TENANTS: every tenant with a row here or in the policy, in the
 * order they were first seen; their cached blocks (per tier, admitted,
 * dropped, limit moves) those of every size's cache (block_pages 0) or
 * of the cache of blocks of block_pages pages alone (ABI 1.22).  *out
 * is malloc'ed (*len bytes); 0, -ENOENT (no cache of that size) or
 * -ENOMEM.
 */
int kd_tenants_reply(struct kd_daemon *d, uint32_t block_pages,
		     struct kvmm_tenants_reply **out, size_t *len);

#endif
