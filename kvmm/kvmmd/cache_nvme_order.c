// SPDX-License-Identifier: MIT
/*
 * Which named block size takes which NVMe partition, at start.
 *
 * With several sizes named (--cache-block-pages A,B) the i-th size has
 * partition i of the file (tier_nvme_config.part_*), and a partition's
 * blocks are recovered only by a tier of the size they have: the same
 * sizes listed in another order at the next start would format every
 * partition whose size moved.  So before the caches are made the list
 * is put in the file's order: each partition whose superblock names
 * this cut (partition 0's count, share, weights and layout id) and holds
 * blocks of a size the list names gets that size, its weight with it;
 * the sizes left take the partitions left, a size of the partition's
 * weight in the file's cut first (so that the cut stays the file's and
 * the partitions holding blocks are recovered), else in the order named.
 * With weights (--cache-block-pages 4:3,2:1) partition i is where the
 * file's cut put it (tier_nvme_part_base(), from partition 0's
 * superblock), not at i shares.
 *
 * Until 7 December only partition 0's size was put first (a swap with
 * the first named), which left two cases formatting blocks that could
 * be recovered: partition 0 holding no slot yet (its superblock written
 * by a later partition that opened first, "The NVMe partitions" in
 * Documentation/tiers.md), where no size was put first and the later
 * partition went to another size; and three or four sizes, where the
 * swap moved the others.
 *
 * Nothing here decides what is recovered: each tier's open checks its
 * superblock as ever (nvme_same_partition(): index, count, share, layout
 * id, payload, scope), so a stale superblock of another cut or layout,
 * which does not carry partition 0's layout id, is never read as valid;
 * here it is only not taken as a hint, and its partition is formatted as
 * before.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <stdio.h>
#include <string.h>

#include "kvmm/kvmmd/tier_nvme.h"

/* The bytes of partition i of the cut part0 names. */
static uint64_t kc_part_bytes(const struct tier_nvme_peek *part0, uint32_t i)
{
	return tier_nvme_part_base(part0, i + 1) -
	       tier_nvme_part_base(part0, i);
}

/*
 * The payload of the blocks partition i of the cut part0 names holds from
 * the last run: 0 when its superblock is not of that cut and layout, or
 * holds no slot.  With weights (--cache-block-pages N:W) partition i
 * starts and ends where the file's cut put it, kept in part0.
 */
static uint64_t kc_part_payload(int fd, const struct tier_nvme_peek *part0,
				uint32_t i)
{
	struct tier_nvme_peek pk;

	if (!i)
		return part0->payload_bytes;
	if (tier_nvme_peek_at(fd, tier_nvme_part_base(part0, i), &pk) ||
	    pk.part_index != i || pk.part_count != part0->part_count ||
	    pk.part_bytes != kc_part_bytes(part0, i) ||
	    pk.part_weights != part0->part_weights ||
	    pk.layout_id != part0->layout_id)
		return 0;
	return pk.payload_bytes;
}

/* The list as a string ("4,2", "4:3,2:1" with weights), for the log
 * line. */
static void kc_sizes_string(const uint32_t *sizes, const uint32_t *weights,
			    uint32_t n, bool weighted, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < n && at < len; i++) {
		at += (size_t)snprintf(buf + at, len - at, "%s%u", i ? "," : "",
				       sizes[i]);
		if (weighted && at < len)
			at += (size_t)snprintf(buf + at, len - at, ":%u",
					       weights[i]);
	}
}

/*
 * The first size left (not used) whose weight is the file's partition
 * p's, so that the cut stays the file's and the partitions already
 * holding blocks are kept; else the first left, in the order named.
 */
static uint32_t kc_size_left(const struct kd_config *cfg, const bool *used,
			     const struct tier_nvme_peek *part0, uint32_t p)
{
	const uint32_t n = cfg->nr_cache_block_sizes;
	uint64_t ours = tier_nvme_weights_pack(cfg->cache_block_weights, n);
	uint32_t first = n;

	for (uint32_t k = 0; k < n; k++) {
		if (used[k])
			continue;
		if (first == n)
			first = k;
		if (tier_nvme_weight_of(ours, k) ==
		    tier_nvme_weight_of(part0->part_weights, p))
			return k;
	}
	return first;
}

void kc_nvme_order_sizes(struct kd_cache *c)
{
	struct kd_config *cfg = &c->d->cfg;
	const uint32_t n = cfg->nr_cache_block_sizes;
	uint32_t order[KD_CACHE_SIZES] = { 0 }, weight[KD_CACHE_SIZES] = { 0 };
	bool used[KD_CACHE_SIZES] = { false }, by_blocks = false, weighted;
	char named[96], now[96];
	struct tier_nvme_peek part0;

	if (n < 2 || n > KD_CACHE_SIZES || c->nvme_fd < 0 ||
	    tier_nvme_peek_fd(c->nvme_fd, &part0) || part0.part_count != n ||
	    part0.part_index || !part0.layout_id || !part0.part_bytes ||
	    !tier_nvme_weights_valid(part0.part_weights, n))
		return; /* not cut for as many sizes: formatted as named */
	for (uint32_t p = 0; p < n; p++) {
		uint64_t payload = kc_part_payload(c->nvme_fd, &part0, p);

		for (uint32_t i = 0; payload && i < n; i++) {
			if (used[i] || (uint64_t)cfg->cache_block_sizes[i] *
						       c->d->page_size !=
					       payload)
				continue;
			order[p] = cfg->cache_block_sizes[i];
			weight[p] = cfg->cache_block_weights[i];
			used[i] = true;
			by_blocks = true;
			break;
		}
	}
	/* the sizes no partition holds: of the partition's weight first */
	for (uint32_t p = 0; p < n; p++) {
		uint32_t k;

		if (order[p])
			continue;
		k = kc_size_left(cfg, used, &part0, p);
		order[p] = cfg->cache_block_sizes[k];
		weight[p] = cfg->cache_block_weights[k];
		used[k] = true;
	}
	if (!memcmp(order, cfg->cache_block_sizes, n * sizeof(order[0])))
		return;
	weighted = tier_nvme_weights_pack(cfg->cache_block_weights, n) != 0;
	kc_sizes_string(cfg->cache_block_sizes, cfg->cache_block_weights, n,
			weighted, named, sizeof(named));
	kc_sizes_string(order, weight, n, weighted, now, sizeof(now));
	if (by_blocks)
		vmm_log(VMM_LOG_INFO,
			"cache: the NVMe tier's partitions hold blocks of the sizes --cache-block-pages %s names in the order %s: each size takes its partition",
			named, now);
	else
		vmm_log(VMM_LOG_INFO,
			"cache: the NVMe tier's partitions were cut for the shares --cache-block-pages %s names in the order %s: each size takes the partition of its share",
			named, now);
	if (order[0] != cfg->cache_block_sizes[0] &&
	    (uint64_t)order[0] * c->d->page_size == part0.payload_bytes)
		vmm_log(VMM_LOG_INFO,
			"cache: the NVMe tier's blocks from the last run have %u pages, a size --cache-block-pages names: the tier is that size's",
			order[0]);
	memcpy(cfg->cache_block_sizes, order, n * sizeof(order[0]));
	memcpy(cfg->cache_block_weights, weight, n * sizeof(weight[0]));
	cfg->cache_block_pages = order[0];
	c->named_ppb = order[0];
}
