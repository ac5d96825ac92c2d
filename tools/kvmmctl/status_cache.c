// SPDX-License-Identifier: MIT
/*
 * The block cache's figures that `kvmmctl status` prints alike for the
 * sums of every cached block size (cmd_status.c) and for each size alone
 * (status_sizes.c): the counts of publishes and prefix opens, the GPU
 * blocks moved down or copied, the tiers, the NVMe blocks a drop kept
 * and restamped, and what became of those a start recovered (an
 * operator with two models sees whose saved blocks are used).  One
 * printer each, so the sums and the sizes cannot name or order a
 * figure two ways; what only the sums show (the tiers' failures,
 * restores, early opens) stays in cmd_status.c.
 */
#include <stdio.h>

#include "tools/kvmmctl/kvmmctl.h"

void kvmmctl_cache_counts_json(const struct kvmm_tier_stats_reply *ts)
{
	const struct kvmmctl_json_u64 counts[] = {
		{ "publishes", ts->publishes },
		{ "duplicates", ts->duplicates },
		{ "not_cached", ts->not_cached },
		{ "prefix_opens", ts->prefix_opens },
		{ "prefix_blocks_asked", ts->prefix_blocks_asked },
		{ "prefix_blocks_hit", ts->prefix_blocks_hit },
		{ "misses", ts->misses },
		{ "pressure_reclaims", ts->pressure_reclaims },
	};

	KVMMCTL_JSON_U64S(counts);
	printf(",");
	/* absent from an older daemon; a size's reply (ABI 1.21) has both */
	if (KVMMCTL_TS_HAS(ts, quota_reclaims)) /* ABI 1.13 */
		printf("\"quota_reclaims\":%llu,",
		       (unsigned long long)ts->quota_reclaims);
	if (KVMMCTL_TS_HAS(ts, blocks_unshared)) /* ABI 1.20 */
		printf("\"blocks_unshared\":%llu,",
		       (unsigned long long)ts->blocks_unshared);
}

void kvmmctl_tiers_json(const struct kvmm_tier_stats_reply *ts)
{
	printf("\"tiers\":{");
	for (int t = 0; t < KVMMCTL_TIERS; t++) {
		const struct kvmm_tier_info *i = &ts->tiers[t];
		const struct kvmmctl_json_u64 tier[] = {
			{ "capacity_blocks", i->capacity_blocks },
			{ "used_blocks", i->used_blocks },
			{ "block_bytes", i->block_bytes },
			{ "hits", i->hits },
			{ "demotions_in", i->demotions_in },
			{ "promotions_out", i->promotions_out },
			{ "drops", i->drops },
			{ "bytes_in", i->bytes_in },
			{ "bytes_out", i->bytes_out },
			{ "restore_ns", i->restore_ns },
			{ "restore_max_ns", i->restore_max_ns },
			{ "promotions_by_publish", i->promotions_by_publish },
		};

		printf("%s\"%s\":{", t ? "," : "", kvmmctl_tier_names[t]);
		KVMMCTL_JSON_U64S(tier);
		printf("}");
	}
	printf("}");
}

void kvmmctl_cache_counts_text(const struct kvmm_tier_stats_reply *ts)
{
	printf("%llu published, %llu prefix blocks hit of %llu asked",
	       (unsigned long long)ts->publishes,
	       (unsigned long long)ts->prefix_blocks_hit,
	       (unsigned long long)ts->prefix_blocks_asked);
}

void kvmmctl_tier_text(const char *indent,
		       const struct kvmm_tier_stats_reply *ts)
{
	for (int t = 0; t < KVMMCTL_TIERS; t++) {
		printf("%stier %-7s %llu/%llu blocks, %llu hits, %llu in, %llu out, %llu dropped",
		       indent, kvmmctl_tier_names[t],
		       (unsigned long long)ts->tiers[t].used_blocks,
		       (unsigned long long)ts->tiers[t].capacity_blocks,
		       (unsigned long long)ts->tiers[t].hits,
		       (unsigned long long)ts->tiers[t].demotions_in,
		       (unsigned long long)ts->tiers[t].promotions_out,
		       (unsigned long long)ts->tiers[t].drops);
		/* blocks a publish moved up from here (ABI 1.4) */
		if (t)
			printf(", %llu up by publish",
			       (unsigned long long)ts->tiers[t]
				       .promotions_by_publish);
		printf("\n");
	}
}

void kvmmctl_restamp_json(const struct kvmm_tier_stats_reply *ts)
{
	/* the NVMe blocks drops kept, their headers written again above the
	 * drop's mark or not (ABI 1.23) */
	const struct kvmmctl_json_u64 restamps[] = {
		{ "nvme_restamped", ts->nvme_restamped },
		{ "nvme_restamp_failures", ts->nvme_restamp_failures },
	};

	if (!KVMMCTL_TS_HAS(ts, nvme_restamp_failures))
		return;
	KVMMCTL_JSON_U64S(restamps);
	printf(",");
}

void kvmmctl_cold_json(const struct kvmm_tier_stats_reply *ts)
{
	/* the blocks recovered from NVMe at start: still cold, and how the
	 * others stopped being so (ABI 1.24) */
	const struct kvmmctl_json_u64 cold[] = {
		{ "cold_blocks", ts->cold_blocks },
		{ "cold_admitted", ts->cold_admitted },
		{ "cold_evicted", ts->cold_evicted },
		{ "cold_dropped", ts->cold_dropped },
	};

	if (!KVMMCTL_TS_HAS(ts, cold_dropped))
		return;
	KVMMCTL_JSON_U64S(cold);
	printf(",");
}

void kvmmctl_cold_text(const char *indent,
		       const struct kvmm_tier_stats_reply *ts)
{
	/* ABI 1.24: whether the engines use what the last stop saved, or
	 * new traffic pushes it out unused */
	if (!KVMMCTL_TS_HAS(ts, cold_dropped) || !ts->recovered_blocks)
		return;
	printf("%s             recovered: %llu still cold, %llu taken in (an open or a pin), %llu evicted unused, %llu dropped unused\n",
	       indent, (unsigned long long)ts->cold_blocks,
	       (unsigned long long)ts->cold_admitted,
	       (unsigned long long)ts->cold_evicted,
	       (unsigned long long)ts->cold_dropped);
}

void kvmmctl_restamp_text(const char *indent,
			  const struct kvmm_tier_stats_reply *ts)
{
	/* ABI 1.23: the NVMe blocks drops kept, their headers written
	 * again above the drop's mark or not (lost at the next start) */
	if (!KVMMCTL_TS_HAS(ts, nvme_restamp_failures) ||
	    !(ts->nvme_restamped + ts->nvme_restamp_failures))
		return;
	printf("%s%s %llu kept NVMe blocks restamped above a drop mark, %llu not (a restart will not find those; see kvmmd's log)\n",
	       indent,
	       ts->nvme_restamp_failures ? "WARNING     " : "            ",
	       (unsigned long long)ts->nvme_restamped,
	       (unsigned long long)ts->nvme_restamp_failures);
}
