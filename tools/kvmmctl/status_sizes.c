// SPDX-License-Identifier: MIT
/*
 * Each cached block size's figures, for `kvmmctl status` and `kvmmctl
 * metrics`.  TIER_STATS without a body sums every size's cache; from ABI
 * 1.21 its reply lists the sizes cached (sizes[]) and a request naming
 * one (kvmm_tier_stats_size()) gets that size's cache alone.  With one
 * size the sum is that size, so nothing more is asked and the output
 * stays what it was; with two or more (a draft beside its target model)
 * each is asked for and shown in a block of its own.
 */
#include <errno.h>
#include <stdio.h>

#include "kvmm/kvmmd/metrics_text.h"
#include "tools/kvmmctl/kvmmctl.h"

int kvmmctl_fetch_sizes(struct kvmm_conn *c,
			const struct kvmm_tier_stats_reply *ts,
			struct kd_metrics_size *out, uint32_t *nr)
{
	uint32_t n;

	*nr = 0;
	if (!KVMMCTL_TS_HAS(ts, sizes) || ts->nr_sizes < 2)
		return 0;
	n = ts->nr_sizes < KVMM_TIER_STATS_SIZES ? ts->nr_sizes :
						   KVMM_TIER_STATS_SIZES;
	for (uint32_t i = 0; i < n; i++) {
		struct kd_metrics_size *s = &out[*nr];
		int err;

		s->pages = ts->sizes[i];
		err = kvmm_tier_stats_size(c, s->pages, &s->ts, sizeof(s->ts));
		if (err)
			return err;
		*nr += 1;
	}
	return 0;
}

void kvmmctl_tiers_json(const struct kvmm_tier_stats_reply *ts)
{
	printf("\"tiers\":{");
	for (int t = 0; t < KVMMCTL_TIERS; t++) {
		const struct kvmm_tier_info *i = &ts->tiers[t];

		printf("%s\"%s\":{\"capacity_blocks\":%llu,\"used_blocks\":%llu,"
		       "\"block_bytes\":%llu,\"hits\":%llu,"
		       "\"demotions_in\":%llu,\"promotions_out\":%llu,"
		       "\"drops\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,"
		       "\"restore_ns\":%llu,\"restore_max_ns\":%llu,"
		       "\"promotions_by_publish\":%llu}",
		       t ? "," : "", kvmmctl_tier_names[t],
		       (unsigned long long)i->capacity_blocks,
		       (unsigned long long)i->used_blocks,
		       (unsigned long long)i->block_bytes,
		       (unsigned long long)i->hits,
		       (unsigned long long)i->demotions_in,
		       (unsigned long long)i->promotions_out,
		       (unsigned long long)i->drops,
		       (unsigned long long)i->bytes_in,
		       (unsigned long long)i->bytes_out,
		       (unsigned long long)i->restore_ns,
		       (unsigned long long)i->restore_max_ns,
		       (unsigned long long)i->promotions_by_publish);
	}
	printf("}");
}

void kvmmctl_sizes_json(const struct kd_metrics_size *sz, uint32_t nr)
{
	if (!nr)
		return;
	printf(",\"sizes\":[");
	for (uint32_t k = 0; k < nr; k++) {
		const struct kvmm_tier_stats_reply *ts = &sz[k].ts;

		printf("%s{\"block_pages\":%u,\"publishes\":%llu,"
		       "\"duplicates\":%llu,\"not_cached\":%llu,"
		       "\"prefix_opens\":%llu,\"prefix_blocks_asked\":%llu,"
		       "\"prefix_blocks_hit\":%llu,\"misses\":%llu,"
		       "\"pressure_reclaims\":%llu,\"quota_reclaims\":%llu,"
		       "\"blocks_unshared\":%llu,",
		       k ? "," : "", sz[k].pages,
		       (unsigned long long)ts->publishes,
		       (unsigned long long)ts->duplicates,
		       (unsigned long long)ts->not_cached,
		       (unsigned long long)ts->prefix_opens,
		       (unsigned long long)ts->prefix_blocks_asked,
		       (unsigned long long)ts->prefix_blocks_hit,
		       (unsigned long long)ts->misses,
		       (unsigned long long)ts->pressure_reclaims,
		       (unsigned long long)ts->quota_reclaims,
		       (unsigned long long)ts->blocks_unshared);
		kvmmctl_tiers_json(ts);
		printf("}");
	}
	printf("]");
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

void kvmmctl_sizes_text(const struct kd_metrics_size *sz, uint32_t nr)
{
	if (!nr)
		return;
	printf("sizes        %u block sizes cached, the figures above their sums; each alone:\n",
	       nr);
	for (uint32_t k = 0; k < nr; k++) {
		const struct kvmm_tier_stats_reply *ts = &sz[k].ts;

		printf("size %-7u %llu bytes a block; %llu published, %llu prefix blocks hit of %llu asked, %llu misses\n",
		       sz[k].pages,
		       (unsigned long long)ts->tiers[0].block_bytes,
		       (unsigned long long)ts->publishes,
		       (unsigned long long)ts->prefix_blocks_hit,
		       (unsigned long long)ts->prefix_blocks_asked,
		       (unsigned long long)ts->misses);
		kvmmctl_tier_text("  ", ts);
	}
}
