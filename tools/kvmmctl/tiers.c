// SPDX-License-Identifier: MIT
/*
 * The tiers' names as kvmmctl prints and parses them, in the wire's
 * order: kvmm_tier_stats_reply.tiers[], the tenant rows' per-tier counts
 * and the KVMM_CACHE_DROP_* bits all number them 0 GPU, 1 host, 2 NVMe.
 * One table, so that status, tenants, tenant-limit and cache-drop cannot
 * spell a tier two ways.
 */
#include <stdio.h>

#include "tools/kvmmctl/kvmmctl.h"

_Static_assert(KVMM_CACHE_DROP_GPU == 1u << 0 &&
		       KVMM_CACHE_DROP_HOST == 1u << 1 &&
		       KVMM_CACHE_DROP_NVME == 1u << 2,
	       "the cache-drop bits follow the tier numbers");

const char *const kvmmctl_tier_names[KVMMCTL_TIERS] = { "gpu", "host", "nvme" };

void kvmmctl_json_tiers(const uint64_t v[KVMMCTL_TIERS])
{
	const struct kvmmctl_json_u64 m[KVMMCTL_TIERS] = {
		{ kvmmctl_tier_names[0], v[0] },
		{ kvmmctl_tier_names[1], v[1] },
		{ kvmmctl_tier_names[2], v[2] },
	};

	putchar('{');
	KVMMCTL_JSON_U64S(m);
	putchar('}');
}
