// SPDX-License-Identifier: MIT
/*
 * The kvmm_size_* families (metrics_text_priv.h): with more than one
 * block size cached, each size's share of the figures the other
 * families sum over every size, labelled size="PAGES" (pages a block),
 * so a dashboard can tell one model's blocks from another's.  With one
 * size the sums are that size's and none of these is printed.
 *
 * The per-size tenant families multiply the tenant rows (~280 KB of text
 * for 255 tenants already) by the sizes: a tenant with nothing in one
 * size's cache (no block there now, none admitted, dropped or moved
 * down for its limit) has no series of that size, so a deployment where
 * each tenant serves one model pays about once for them.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kvmm/kvmmd/metrics_text_priv.h"

/*
 * The tier families again for each block size's cache, as
 * kvmm_size_tier_*{size="PAGES",tier="..."} (the kvmm_tier_* ones are
 * their sums), and each size's publishes.
 */
static const char *const size_names[] = {
	"kvmm_size_tier_capacity_blocks",
	"kvmm_size_tier_used_blocks",
	"kvmm_size_tier_block_bytes",
	"kvmm_size_tier_hits_total",
	"kvmm_size_tier_demotions_in_total",
	"kvmm_size_tier_promotions_out_total",
	"kvmm_size_tier_promotions_by_publish_total",
	"kvmm_size_tier_drops_total",
	"kvmm_size_tier_bytes_in_total",
	"kvmm_size_tier_bytes_out_total",
	"kvmm_size_tier_restore_seconds_total",
	"kvmm_size_tier_restore_max_seconds",
};

static void size_tiers(FILE *f, const struct kd_metrics_size *sz, uint32_t nr)
{
	char label[64];

	_Static_assert(sizeof(size_names) / sizeof(size_names[0]) ==
			       KD_MT_NR_TIER_METRICS,
		       "a kvmm_size_tier_* family for each kvmm_tier_* one");
	for (size_t i = 0; i < KD_MT_NR_TIER_METRICS; i++) {
		const struct kd_metric *m = &kd_mt_tier_metrics[i];
		const char *name = size_names[i];

		/* the same family, of one size */
		if (strcmp(name + strlen("kvmm_size_"),
			   m->name + strlen("kvmm_")))
			continue;
		kd_mt_family(f, name, m->type, m->help);
		for (uint32_t k = 0; k < nr; k++)
			for (int t = 0; t < 3; t++) {
				snprintf(label, sizeof(label),
					 "size=\"%u\",tier=\"%s\"", sz[k].pages,
					 kd_mt_tier_names[t]);
				kd_mt_sample(f, name, NULL, label,
					     kd_mt_field(&sz[k].ts.tiers[t], m),
					     m->unit);
			}
	}
	kd_mt_family(f, "kvmm_size_publishes_total", KD_COUNTER,
		     "Blocks published of one block size (pages a block).");
	for (uint32_t k = 0; k < nr; k++) {
		snprintf(label, sizeof(label), "size=\"%u\"", sz[k].pages);
		kd_mt_sample(f, "kvmm_size_publishes_total", NULL, label,
			     sz[k].ts.publishes, KD_AS_IS);
	}
}

/*
 * Each size's NVMe partition's opens and writes (that size's TIER_STATS),
 * as kvmm_size_nvme_*{size="PAGES"}: the kvmm_cache_* families of them
 * show the first size that has an error, so an alert on one model's
 * partition (out, waiting for an attempt, out of service for writes)
 * needs these, and so does one on a drop's kept blocks that the next
 * start will not find (the restamp failures), and one on a model's
 * recovered blocks going out unused (the cold ones).  A field a size's
 * reply ends before is left out (only the restamps and the cold counts
 * can be: the sizes came with ABI 1.21, the others with 1.15 and 1.17,
 * the restamps 1.23, the cold counts 1.24).
 */
#define TS(f) offsetof(struct kvmm_tier_stats_reply, f)
static const struct kd_metric size_nvme_metrics[] = {
	{ "kvmm_size_nvme_open_error", KD_GAUGE,
	  "Errno of one block size's (pages a block) NVMe partition that could not open, while it is out (0: open, or no NVMe tier); only with more than one size cached.",
	  "", TS(nvme_open_error) },
	{ "kvmm_size_nvme_open_attempts_total", KD_COUNTER,
	  "Opens of one block size's NVMe partition tried (a failed claim at start and the one that worked included).",
	  "", TS(nvme_open_attempts) },
	{ "kvmm_size_nvme_open_last_error", KD_GAUGE,
	  "Errno of the last open of one block size's NVMe partition that failed, kept once one works (0: none failed).",
	  "", TS(nvme_open_last_error) },
	{ "kvmm_size_nvme_open_retry_seconds", KD_GAUGE,
	  "While one block size's NVMe partition is out: seconds until kvmmd tries to open it again (+Inf: it will not, a failure no wait mends).",
	  "", TS(nvme_open_retry_ms), KD_MS_INF },
	{ "kvmm_size_nvme_write_error", KD_GAUGE,
	  "While one block size's NVMe partition is out of service for writes: the errno of the last one (0: it takes writes).",
	  "", TS(nvme_write_error) },
	{ "kvmm_size_nvme_write_retry_seconds", KD_GAUGE,
	  "While one block size's NVMe partition is out of service for writes: seconds until a move down is written to try it again (0: the next one).",
	  "", TS(nvme_write_retry_ms), KD_MS },
	{ "kvmm_size_nvme_write_outs_total", KD_COUNTER,
	  "Times one block size's NVMe partition was taken out of service for writes.",
	  "", TS(nvme_write_outs) },
	{ "kvmm_size_nvme_write_returns_total", KD_COUNTER,
	  "Blocks of one block size whose host -> NVMe write failed that went back to the host tier with their host copy.",
	  "", TS(nvme_write_returns) },
	{ "kvmm_size_nvme_restamped_total", KD_COUNTER,
	  "NVMe blocks of one block size that kvmmctl cache-drop kept (in use) whose header was written again above the drop's mark: the next start finds them.",
	  "", TS(nvme_restamped) },
	{ "kvmm_size_nvme_restamp_failures_total", KD_COUNTER,
	  "NVMe blocks of one block size that kvmmctl cache-drop kept (in use) whose header could not be written above the drop's mark: lost at the next start.",
	  "", TS(nvme_restamp_failures) },
	{ "kvmm_size_cold_blocks", KD_GAUGE,
	  "Blocks of one block size recovered from NVMe at start that are still cold (neither used by an open nor pinned yet).",
	  "", TS(cold_blocks) },
	{ "kvmm_size_cold_admitted_total", KD_COUNTER,
	  "Recovered NVMe blocks of one block size the cache took in, an open's restore or a client's pin.",
	  "", TS(cold_admitted) },
	{ "kvmm_size_cold_evicted_total", KD_COUNTER,
	  "Recovered NVMe blocks of one block size evicted unused, for NVMe room or by their tenant's NVMe limit.",
	  "", TS(cold_evicted) },
	{ "kvmm_size_cold_dropped_total", KD_COUNTER,
	  "Recovered NVMe blocks of one block size that left the cache unused any other way (kvmmctl cache-drop, a read that failed).",
	  "", TS(cold_dropped) },
};
#undef TS

static void size_nvme(FILE *f, const struct kd_metrics_size *sz, uint32_t nr)
{
	const size_t n =
		sizeof(size_nvme_metrics) / sizeof(size_nvme_metrics[0]);
	char label[32];

	for (size_t i = 0; i < n; i++) {
		const struct kd_metric *m = &size_nvme_metrics[i];

		kd_mt_family(f, m->name, m->type, m->help);
		for (uint32_t k = 0; k < nr; k++) {
			if (m->off + sizeof(uint64_t) > sz[k].ts.size)
				continue;
			snprintf(label, sizeof(label), "size=\"%u\"",
				 sz[k].pages);
			kd_mt_sample(f, m->name, NULL, label,
				     kd_mt_field(&sz[k].ts, m), m->unit);
		}
	}
}

/*
 * kvmm_size_demotions_queued{size}: ADMIN_STATUS' demotions waiting for
 * a free host slot, of each size (ABI 1.22; they add up to
 * kvmm_demotions_queued).  Left out for a reply that ends before them
 * (an older daemon, to kvmmctl metrics).
 */
static void size_demotions(FILE *f, const struct kvmm_status_reply *st)
{
	size_t len = st->size && st->size < sizeof(*st) ? st->size :
							  sizeof(*st);
	uint32_t nr = st->nr_sizes < KVMM_TIER_STATS_SIZES ?
			      st->nr_sizes :
			      KVMM_TIER_STATS_SIZES;
	char label[32];

	if (len < offsetof(struct kvmm_status_reply, demotions_queued_size) +
			    sizeof(st->demotions_queued_size) ||
	    nr < 2)
		return;
	kd_mt_family(
		f, "kvmm_size_demotions_queued", KD_GAUGE,
		"Demotions of blocks of one block size (pages a block) waiting for a free host slot now; only with more than one size cached.");
	for (uint32_t k = 0; k < nr; k++) {
		snprintf(label, sizeof(label), "size=\"%u\"", st->sizes[k]);
		kd_mt_sample(f, "kvmm_size_demotions_queued", NULL, label,
			     st->demotions_queued_size[k], KD_AS_IS);
	}
}

/*
 * kvmm_size_weight{size}: each size's weight (TIER_STATS' weights[], ABI
 * 1.25), the --cache-block-pages N:W that sets its share of --host-mem,
 * the NVMe file and half the GPU pool (1 unless given; 0 for a size
 * taken from a region, which shares by no weight), so that a dashboard can tell why one model has 3/4 of the
 * host tier.  Left out for a reply that ends before them (an older
 * daemon, to kvmmctl metrics), and with one size, as the other
 * kvmm_size_* families are.
 */
static void size_weights(FILE *f, const struct kvmm_tier_stats_reply *ts)
{
	uint32_t nr;
	char label[32];

	if (!ts || ts->size < offsetof(struct kvmm_tier_stats_reply, weights) +
				      sizeof(ts->weights))
		return;
	nr = ts->nr_sizes < KVMM_TIER_STATS_SIZES ? ts->nr_sizes :
						    KVMM_TIER_STATS_SIZES;
	if (nr < 2)
		return;
	kd_mt_family(
		f, "kvmm_size_weight", KD_GAUGE,
		"Weight of one block size (pages a block), as kvmmd --cache-block-pages N:W gave it (1 without :W; 0 for a size taken from a region, which shares by no weight): with sizes named, its share of --host-mem, of the NVMe file and of half the GPU pool is its weight over their sum; only with more than one size cached.");
	for (uint32_t k = 0; k < nr; k++) {
		snprintf(label, sizeof(label), "size=\"%u\"", ts->sizes[k]);
		kd_mt_sample(f, "kvmm_size_weight", NULL, label, ts->weights[k],
			     KD_AS_IS);
	}
}

void kd_mt_sizes(FILE *f, const struct kd_metrics_src *src)
{
	size_weights(f, src->ts);
	if (src->sizes && src->nr_sizes > 1) {
		size_tiers(f, src->sizes, src->nr_sizes);
		size_nvme(f, src->sizes, src->nr_sizes);
	}
	size_demotions(f, src->st);
}

/* The figures of a tenant entry that ADMIN_TENANTS gives per block size
 * (Documentation/abi.md, "ABI 1.22"); the rest is the daemon's. */
static const struct {
	const char *name, *help;
	enum kd_mtype type;
	size_t off; /* of the first u64 */
	int tiers; /* 3: one u64 per tier from off on, 0: one */
} size_tenant_fams[] = {
	{ "kvmm_size_tenant_cached_blocks",
	  "Cached blocks of one block size (pages a block) charged to the tenant, by tier; only with more than one size cached, and only for a tenant with something in that size's cache.",
	  KD_GAUGE, offsetof(struct kvmm_tenant_info, cached_blocks), 3 },
	{ "kvmm_size_tenant_admitted_blocks_total",
	  "Blocks of one block size the tenant's accesses brought into the cache (as kvmm_size_tenant_cached_blocks: several sizes, a tenant with something there).",
	  KD_COUNTER, offsetof(struct kvmm_tenant_info, admitted_blocks), 0 },
	{ "kvmm_size_tenant_dropped_blocks_total",
	  "Blocks of one block size charged to the tenant that the cache dropped (as kvmm_size_tenant_cached_blocks: several sizes, a tenant with something there).",
	  KD_COUNTER, offsetof(struct kvmm_tenant_info, dropped_blocks), 0 },
	{ "kvmm_size_tenant_limit_moves_total",
	  "The tenant's blocks of one block size moved down a tier (or dropped) for its limit (as kvmm_size_tenant_cached_blocks: several sizes, a tenant with something there).",
	  KD_COUNTER, offsetof(struct kvmm_tenant_info, limit_moves), 0 },
};

static uint64_t tenant_u64(const struct kvmm_tenant_info *t, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)t + off, sizeof(v));
	return v;
}

/* Has tenant t anything in this size's cache (a per-size figure not 0)? */
static bool tenant_in_size(const struct kvmm_tenant_info *t)
{
	for (int j = 0; j < 3; j++)
		if (t->cached_blocks[j])
			return true;
	return t->admitted_blocks || t->dropped_blocks || t->limit_moves;
}

/* Entry i of a reply, entry_size bytes apart (a later daemon's may be
 * longer; kvmmctl widens an older one's). */
static const struct kvmm_tenant_info *
tenant_at(const struct kvmm_tenants_reply *tn, uint32_t i)
{
	return (const void *)((const char *)tn->tenants +
			      (size_t)i * tn->entry_size);
}

/* Family k's series of one size's tenants (ADMIN_TENANTS of that size). */
static void size_tenant_rows(FILE *f, size_t k, uint32_t pages,
			     const struct kvmm_tenants_reply *tn)
{
	int n = size_tenant_fams[k].tiers ? size_tenant_fams[k].tiers : 1;
	char labels[128];
	uint64_t v;
	int len;

	for (uint32_t i = 0; i < tn->nr; i++) {
		const struct kvmm_tenant_info *t = tenant_at(tn, i);

		if (!tenant_in_size(t))
			continue;
		for (int j = 0; j < n; j++) {
			len = snprintf(labels, sizeof(labels), "size=\"%u\",",
				       pages);
			kd_mt_tenant_labels(labels + len, sizeof(labels) - len,
					    tn->kind, t->id,
					    size_tenant_fams[k].tiers ?
						    kd_mt_tier_names[j] :
						    NULL);
			v = tenant_u64(t, size_tenant_fams[k].off +
						  j * sizeof(uint64_t));
			kd_mt_sample(f, size_tenant_fams[k].name, NULL, labels,
				     v, KD_AS_IS);
		}
	}
}

void kd_mt_size_tenants(FILE *f, const struct kd_metrics_src *src)
{
	const size_t nr_fams =
		sizeof(size_tenant_fams) / sizeof(size_tenant_fams[0]);
	bool any = false;

	if (!src->tn || !src->sizes || src->nr_sizes < 2)
		return;
	/* kvmmctl against a daemon before ABI 1.22 has the sums alone */
	for (uint32_t s = 0; s < src->nr_sizes; s++)
		any |= src->sizes[s].tn != NULL;
	if (!any)
		return;
	for (size_t k = 0; k < nr_fams; k++) {
		kd_mt_family(f, size_tenant_fams[k].name,
			     size_tenant_fams[k].type,
			     size_tenant_fams[k].help);
		for (uint32_t s = 0; s < src->nr_sizes; s++)
			if (src->sizes[s].tn)
				size_tenant_rows(f, k, src->sizes[s].pages,
						 src->sizes[s].tn);
	}
}
