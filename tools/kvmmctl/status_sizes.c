// SPDX-License-Identifier: MIT
/*
 * Each cached block size's figures, for `kvmmctl status` and `kvmmctl
 * metrics`.  TIER_STATS without a body sums every size's cache; from ABI
 * 1.21 its reply lists the sizes cached (sizes[]) and a request naming
 * one (kvmm_tier_stats_size()) gets that size's cache alone.  With one
 * size the sum is that size, so nothing more is asked and the output
 * stays what it was; with two or more (a draft beside its target model)
 * each is asked for and shown in a block of its own, with its weight
 * among the sizes' (ABI 1.25: --cache-block-pages N:W, which sets its
 * share of --host-mem, the NVMe file and half the GPU pool).
 */
#include <errno.h>
#include <stdbool.h>
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

/*
 * The demotions of blocks of `pages` waiting for a host slot now, from
 * ADMIN_STATUS' sizes (ABI 1.22): false from an older daemon, or when
 * it does not list the size.
 */
static bool queued_of(const struct kvmm_status_reply *st, uint32_t pages,
		      uint64_t *queued)
{
	if (!KVMMCTL_ST_HAS(st, demotions_queued_size))
		return false;
	for (uint32_t i = 0; i < st->nr_sizes && i < KVMM_TIER_STATS_SIZES; i++)
		if (st->sizes[i] == pages) {
			*queued = st->demotions_queued_size[i];
			return true;
		}
	return false;
}

/*
 * The weight of the size of `pages` and the weights' sum, from any
 * TIER_STATS reply that lists the sizes (ABI 1.25: weights[]): false
 * from an older daemon, whose reply ends before them, or when it does
 * not list the size.
 */
static bool weight_of(const struct kvmm_tier_stats_reply *ts, uint32_t pages,
		      uint32_t *weight, uint32_t *sum)
{
	uint32_t n = ts->nr_sizes < KVMM_TIER_STATS_SIZES ?
			     ts->nr_sizes :
			     KVMM_TIER_STATS_SIZES;
	bool found = false;

	if (!KVMMCTL_TS_HAS(ts, weights))
		return false;
	*sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		*sum += ts->weights[i];
		if (ts->sizes[i] == pages) {
			*weight = ts->weights[i];
			found = true;
		}
	}
	return found;
}

void kvmmctl_sizes_json(const struct kvmm_status_reply *st,
			const struct kd_metrics_size *sz, uint32_t nr)
{
	uint32_t weight, sum;
	uint64_t queued;

	if (!nr)
		return;
	printf(",\"sizes\":[");
	for (uint32_t k = 0; k < nr; k++) {
		const struct kvmm_tier_stats_reply *ts = &sz[k].ts;
		const struct kvmmctl_json_u64 nvme_out[] = {
			{ "nvme_open_error", ts->nvme_open_error },
			{ "nvme_write_error", ts->nvme_write_error },
			{ "nvme_write_outs", ts->nvme_write_outs },
		};

		printf("%s{\"block_pages\":%u,", k ? "," : "", sz[k].pages);
		/* its share: weight / weights_total (ABI 1.25) */
		if (weight_of(ts, sz[k].pages, &weight, &sum))
			printf("\"weight\":%u,\"weights_total\":%u,", weight,
			       sum);
		if (queued_of(st, sz[k].pages, &queued))
			printf("\"demotions_queued\":%llu,",
			       (unsigned long long)queued);
		kvmmctl_cache_counts_json(ts);
		/* which size's saved blocks a restart found and used, whose
		 * kept blocks a drop restamped (ABI 1.24, 1.23) */
		kvmmctl_restamp_json(ts);
		kvmmctl_cold_json(ts);
		/* whose NVMe partition is out (the sums' say a size's) */
		if (KVMMCTL_TS_HAS(ts, nvme_write_retry_ms)) {
			KVMMCTL_JSON_U64S(nvme_out);
			printf(",");
		}
		kvmmctl_tiers_json(ts);
		printf("}");
	}
	printf("]");
}

void kvmmctl_sizes_text(const struct kvmm_status_reply *st,
			const struct kd_metrics_size *sz, uint32_t nr)
{
	uint32_t weight, sum;
	uint64_t queued;

	if (!nr)
		return;
	printf("sizes        %u block sizes cached, the figures above their sums; each alone:\n",
	       nr);
	for (uint32_t k = 0; k < nr; k++) {
		const struct kvmm_tier_stats_reply *ts = &sz[k].ts;

		printf("size %-7u %llu bytes a block", sz[k].pages,
		       (unsigned long long)ts->tiers[0].block_bytes);
		/* why it has its share of the host tier, the NVMe file and
		 * the GPU (--cache-block-pages N:W; ABI 1.25) */
		if (weight_of(ts, sz[k].pages, &weight, &sum) && weight)
			printf(", weight %u of %u", weight, sum);
		else if (KVMMCTL_TS_HAS(ts, weights))
			/* sizes from the regions (no --cache-block-pages):
			 * the first has the host and NVMe tiers, a later
			 * one the GPU alone (weight 0 on the wire) */
			printf(", not shared by weight");
		printf("; ");
		kvmmctl_cache_counts_text(ts);
		printf(", %llu misses", (unsigned long long)ts->misses);
		if (queued_of(st, sz[k].pages, &queued))
			printf(", %llu demotions queued",
			       (unsigned long long)queued);
		printf("\n");
		kvmmctl_cold_text("  ", ts);
		kvmmctl_tier_text("  ", ts);
		kvmmctl_nvme_text("  ", ts);
		kvmmctl_restamp_text("  ", ts);
	}
}
