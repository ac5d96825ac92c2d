// SPDX-License-Identifier: MIT
/*
 * TIER_STATS: the cache's counters and each tier's fill, of one block
 * size (kd_cache_size_stats(), kd_cache_tier_stats_of()) or summed over
 * the sizes (kd_cache_tier_stats()), with the list of sizes cached (ABI
 * 1.21) and their weights (ABI 1.25).  The counters are kept where they
 * happen (c->st); here they are read, with what the tiers count
 * themselves.
 *
 * Everything here runs on the event-loop thread.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <string.h>

#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"

/* One size's TIER_STATS. */
static void kc_tier_stats_one(struct kd_cache *c,
			      struct kvmm_tier_stats_reply *st)
{
	*st = c->st;
	/* reaped, not yet settled: still in flight for whoever waits */
	st->migrations_in_flight += c->nr_restored;
	if (c->pol)
		for (int t = 0; t < POL_TIER_COUNT; t++)
			st->tiers[t].used_blocks = pol_cache_count(c->pol, t);
	kc_open_stats(c, st);
	kc_nvme_stats(c, st);
	kc_nvme_write_stats(c, st);
	if (c->nvme) {
		struct tier_nvme_stats ns;

		tier_nvme_get_stats(c->nvme, &ns);
		/* opened at start for the blocks the file held, before the
		 * first region: what it found, and their size (the cache's is
		 * not known yet) */
		if (!c->opened) {
			st->recovered_blocks = ns.recovered_slots;
			st->cold_blocks = ns.recovered_slots; /* none used */
			st->tiers[POL_TIER_NVME].block_bytes = ns.payload_bytes;
		}
		st->checksum_failures = ns.checksum_failures;
		st->nvme_read_error_drops = ns.read_error_drops;
		/* what the disk holds against what --nvme-size allows */
		st->tiers[POL_TIER_NVME].used_blocks = ns.used_slots;
		st->tiers[POL_TIER_NVME].capacity_blocks = ns.capacity_slots;
	}
	if (c->host) {
		struct tier_host_stats hs;

		tier_host_get_stats(c->host, &hs);
		st->tiers[POL_TIER_HOST].used_blocks = hs.used_slots;
		st->tiers[POL_TIER_HOST].capacity_blocks = hs.capacity_slots;
	}
}

/*
 * Another size's counters added to the first's (what TIER_STATS has room
 * for is one figure each: the sum; block_bytes stays the first size's,
 * restore_max_ns the largest).  Each named size's NVMe partition adds
 * its slots, as its host tier does, and its failures: an error (the
 * set-up's, the NVMe tier's open or writes) is the first size's that
 * has one, with that size's retry, so that a later size's partition
 * out of service shows in the sum; TIER_STATS of one size says whose.
 */
static void kc_tier_stats_add(struct kvmm_tier_stats_reply *st,
			      const struct kvmm_tier_stats_reply *o)
{
#define ADD(f) (st->f += o->f)
	ADD(publishes);
	ADD(duplicates);
	ADD(not_cached);
	ADD(prefix_opens);
	ADD(prefix_blocks_asked);
	ADD(prefix_blocks_hit);
	ADD(misses);
	ADD(busy_misses);
	ADD(migrations_failed);
	ADD(migrations_in_flight);
	ADD(slot_waits);
	ADD(pressure_reclaims);
	ADD(restores_waited);
	ADD(prefix_opens_pending);
	ADD(restores_cancelled);
	ADD(prefix_holes);
	ADD(prefix_blocks_after_hole);
	ADD(plan_recomputes_host);
	ADD(plan_recomputes_nvme);
	ADD(held_copies);
	ADD(early_opens);
	ADD(early_reloads);
	ADD(early_reload_failures);
	ADD(quota_reclaims);
	ADD(lower_free_refused);
	ADD(checksum_failures);
	ADD(nvme_read_error_drops);
	ADD(recovered_blocks);
	ADD(nvme_admission_rejects);
	ADD(nvme_invalidate_jobs);
	ADD(nvme_invalidated_blocks);
	ADD(nvme_invalidate_failures);
	ADD(nvme_write_returns);
	ADD(nvme_write_outs);
	ADD(blocks_unshared);
	ADD(nvme_restamped);
	ADD(nvme_restamp_failures);
	ADD(cold_blocks);
	ADD(cold_admitted);
	ADD(cold_evicted);
	ADD(cold_dropped);
	for (int t = 0; t < POL_TIER_COUNT; t++) {
		struct kvmm_tier_info *a = &st->tiers[t];
		const struct kvmm_tier_info *b = &o->tiers[t];

		a->capacity_blocks += b->capacity_blocks;
		a->used_blocks += b->used_blocks;
		if (!a->block_bytes)
			a->block_bytes = b->block_bytes;
		a->hits += b->hits;
		a->demotions_in += b->demotions_in;
		a->promotions_out += b->promotions_out;
		a->drops += b->drops;
		a->bytes_in += b->bytes_in;
		a->bytes_out += b->bytes_out;
		a->restore_ns += b->restore_ns;
		if (b->restore_max_ns > a->restore_max_ns)
			a->restore_max_ns = b->restore_max_ns;
		a->promotions_by_publish += b->promotions_by_publish;
	}
	ADD(cache_open_attempts);
#define FIRST_ERROR(err, retry)               \
	do {                                  \
		if (!st->err && o->err) {     \
			st->err = o->err;     \
			st->retry = o->retry; \
		}                             \
	} while (0)
	FIRST_ERROR(cache_open_error, cache_open_retry_ms);
	if (!st->cache_open_last_error)
		st->cache_open_last_error = o->cache_open_last_error;
	/* the NVMe opens' four figures of one size, which kvmmctl status
	 * reads together: the first out now, else the first that failed */
	if ((!st->nvme_open_error && o->nvme_open_error) ||
	    (!st->nvme_open_error && !st->nvme_open_last_error &&
	     o->nvme_open_last_error)) {
		st->nvme_open_error = o->nvme_open_error;
		st->nvme_open_attempts = o->nvme_open_attempts;
		st->nvme_open_last_error = o->nvme_open_last_error;
		st->nvme_open_retry_ms = o->nvme_open_retry_ms;
	}
	FIRST_ERROR(nvme_write_error, nvme_write_retry_ms);
#undef FIRST_ERROR
#undef ADD
}

/* c's block size: opened, or named (--cache-block-pages, or a later
 * size's cache before its tiers opened); 0 while the first is unknown. */
/* the sizes TIER_STATS' sizes[] lists (kvmmctl metrics asks for each,
 * and the two exporters agree) */
int kd_cache_size_stats(struct kd_daemon *d, uint32_t i, uint32_t *pages,
			struct kvmm_tier_stats_reply *st)
{
	if (i >= d->nr_caches || !kc_size(d->caches[i]))
		return -ENOENT;
	*pages = kc_size(d->caches[i]);
	kc_tier_stats_one(d->caches[i], st);
	return 0;
}

/*
 * The weight of the block size of `pages` (ABI 1.25): as
 * --cache-block-pages N:W gave it, found by the size (the list may have
 * been put in the NVMe file's order since, cache_nvme_order.c), 1 for a
 * size named without :W.  0 for a size not named (taken from a region,
 * without --cache-block-pages): such sizes share by no weight (the first
 * has all of --host-mem and the NVMe tier, a later one the GPU alone),
 * and a weight of 1 would tell the operator they split them.
 */
static uint32_t kc_size_weight(const struct kd_config *cfg, uint32_t pages)
{
	for (uint32_t i = 0; i < cfg->nr_cache_block_sizes; i++)
		if (cfg->cache_block_sizes[i] == pages)
			return cfg->cache_block_weights[i] ?
				       cfg->cache_block_weights[i] :
				       1;
	return 0;
}

/* TIER_STATS' tail (ABI 1.21): the sizes cached, the first first, and
 * (ABI 1.25) each one's weight, so that an operator sees why a size got
 * its share of --host-mem, the NVMe file and the GPU pool. */
static void kc_tier_stats_sizes(struct kd_daemon *d, uint32_t block_pages,
				struct kvmm_tier_stats_reply *st)
{
	struct kd_cache *c;
	uint32_t i;

	_Static_assert(KD_CACHE_SIZES <= KVMM_TIER_STATS_SIZES,
		       "TIER_STATS has room for every size");
	st->block_pages = block_pages;
	st->nr_sizes = 0;
	memset(st->sizes, 0, sizeof(st->sizes));
	memset(st->weights, 0, sizeof(st->weights));
	kc_for_each(d, c, i) {
		if (!kc_size(c))
			continue;
		st->sizes[st->nr_sizes] = kc_size(c);
		st->weights[st->nr_sizes++] =
			kc_size_weight(&d->cfg, kc_size(c));
	}
}

int kd_cache_tier_stats(struct kd_daemon *d, struct kvmm_tier_stats_reply *st)
{
	struct kd_cache *c;
	uint32_t i;

	if (!d->cache)
		return -ENODEV;
	kc_tier_stats_one(d->cache, st);
	kc_for_each(d, c, i) {
		struct kvmm_tier_stats_reply o;

		if (!i)
			continue;
		kc_tier_stats_one(c, &o);
		kc_tier_stats_add(st, &o);
	}
	kc_tier_stats_sizes(d, 0, st);
	return 0;
}

int kd_cache_tier_stats_of(struct kd_daemon *d, uint32_t block_pages,
			   struct kvmm_tier_stats_reply *st)
{
	struct kd_cache *c;
	uint32_t i;

	if (!block_pages)
		return kd_cache_tier_stats(d, st);
	if (!d->cache)
		return -ENODEV;
	kc_for_each(d, c, i) {
		if (kc_size(c) != block_pages)
			continue;
		kc_tier_stats_one(c, st);
		kc_tier_stats_sizes(d, block_pages, st);
		return 0;
	}
	return -ENOENT;
}
