/* SPDX-License-Identifier: MIT */
/*
 * tinylm --kvmm-stats: one JSON line with kvmmd's block-cache counters
 * (TIER_STATS), for the demo's report: what was shared on the GPU, demoted
 * to host and NVMe, and restored from each, through libkvmm's
 * kvmm_tier_stats().
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "kvmm/kvmm.h"
#include "kvmm/uapi.h"

int tlm_kvmm_print_tier_stats(const char *socket_path, FILE *f);

int tlm_kvmm_print_tier_stats(const char *socket_path, FILE *f)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_tier_stats_reply st = { 0 };
	struct kvmm_conn *conn;
	size_t len = 0;
	int ret;

	co.socket_path = socket_path;
	co.name = "tinylm-stats";
	ret = kvmm_connect(&co, &conn);
	if (ret)
		return ret;
	/* a 1.6 daemon's reply ends before prefix_holes: accepted, and
	 * st.size says so */
	ret = kvmm_tier_stats(conn, &st, sizeof(st));
	kvmm_disconnect(conn);
	if (ret)
		return ret;
	len = st.size;
	const struct kvmm_tier_info *g = &st.tiers[0], *h = &st.tiers[1],
				    *n = &st.tiers[2];
	fprintf(f,
		"{\"publishes\":%" PRIu64 ",\"duplicates\":%" PRIu64
		",\"not_cached\":%" PRIu64 ",\"busy_misses\":%" PRIu64
		",\"prefix_opens\":%" PRIu64 ",\"prefix_blocks_asked\":%" PRIu64
		",\"prefix_blocks_hit\":%" PRIu64 ",\"misses\":%" PRIu64
		",\"checksum_failures\":%" PRIu64 ",\"hits_gpu\":%" PRIu64
		",\"hits_host\":%" PRIu64 ",\"hits_nvme\":%" PRIu64
		",\"demoted_to_host\":%" PRIu64 ",\"demoted_to_nvme\":%" PRIu64
		",\"restored_host\":%" PRIu64 ",\"restored_nvme\":%" PRIu64
		",\"dropped\":%" PRIu64,
		st.publishes, st.duplicates, st.not_cached, st.busy_misses,
		st.prefix_opens, st.prefix_blocks_asked, st.prefix_blocks_hit,
		st.misses, st.checksum_failures, g->hits, h->hits, n->hits,
		h->demotions_in, n->demotions_in, h->promotions_out,
		n->promotions_out, g->drops + h->drops + n->drops);
	/* ABI 1.7 and later: what segmented and early opens did (absent
	 * from an older daemon's reply, so absent here) */
	if (len >= sizeof(st))
		fprintf(f,
			",\"prefix_holes\":%" PRIu64
			",\"prefix_blocks_after_hole\":%" PRIu64
			",\"held_copies\":%" PRIu64 ",\"early_opens\":%" PRIu64
			",\"early_reloads\":%" PRIu64
			",\"early_reload_failures\":%" PRIu64,
			st.prefix_holes, st.prefix_blocks_after_hole,
			st.held_copies, st.early_opens, st.early_reloads,
			st.early_reload_failures);
	/* ABI 1.20: shared blocks copied (copy-on-write) */
	if (len >= offsetof(struct kvmm_tier_stats_reply, blocks_unshared) +
			   sizeof(st.blocks_unshared))
		fprintf(f, ",\"blocks_unshared\":%" PRIu64, st.blocks_unshared);
	fputs("}\n", f);
	return 0;
}
