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
 * this cut (partition 0's count, share and layout id) and holds blocks
 * of a size the list names gets that size; the sizes left take the
 * partitions left in the order named.
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

/*
 * The payload of the blocks partition i of the cut part0 names holds from
 * the last run: 0 when its superblock is not of that cut and layout, or
 * holds no slot.
 */
static uint64_t kc_part_payload(int fd, const struct tier_nvme_peek *part0,
				uint32_t i)
{
	struct tier_nvme_peek pk;

	if (!i)
		return part0->payload_bytes;
	if (tier_nvme_peek_at(fd, (uint64_t)i * part0->part_bytes, &pk) ||
	    pk.part_index != i || pk.part_count != part0->part_count ||
	    pk.part_bytes != part0->part_bytes ||
	    pk.layout_id != part0->layout_id)
		return 0;
	return pk.payload_bytes;
}

/* The list as a string ("4,2"), for the log line. */
static void kc_sizes_string(const uint32_t *sizes, uint32_t n, char *buf,
			    size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%u", i ? "," : "",
				       sizes[i]);
}

void kc_nvme_order_sizes(struct kd_cache *c)
{
	struct kd_config *cfg = &c->d->cfg;
	const uint32_t n = cfg->nr_cache_block_sizes;
	uint32_t order[KD_CACHE_SIZES] = { 0 };
	bool used[KD_CACHE_SIZES] = { false };
	char named[64], now[64];
	struct tier_nvme_peek part0;
	uint32_t k = 0;

	if (n < 2 || n > KD_CACHE_SIZES || c->nvme_fd < 0 ||
	    tier_nvme_peek_fd(c->nvme_fd, &part0) || part0.part_count != n ||
	    part0.part_index || !part0.layout_id || !part0.part_bytes)
		return; /* not cut for as many sizes: formatted as named */
	for (uint32_t p = 0; p < n; p++) {
		uint64_t payload = kc_part_payload(c->nvme_fd, &part0, p);

		for (uint32_t i = 0; payload && i < n; i++) {
			if (used[i] || (uint64_t)cfg->cache_block_sizes[i] *
						       c->d->page_size !=
					       payload)
				continue;
			order[p] = cfg->cache_block_sizes[i];
			used[i] = true;
			break;
		}
	}
	/* the sizes no partition holds, in the order named */
	for (uint32_t p = 0; p < n; p++) {
		if (order[p])
			continue;
		while (used[k])
			k++;
		order[p] = cfg->cache_block_sizes[k];
		used[k] = true;
	}
	if (!memcmp(order, cfg->cache_block_sizes, n * sizeof(order[0])))
		return;
	kc_sizes_string(cfg->cache_block_sizes, n, named, sizeof(named));
	kc_sizes_string(order, n, now, sizeof(now));
	vmm_log(VMM_LOG_INFO,
		"cache: the NVMe tier's partitions hold blocks of the sizes --cache-block-pages %s names in the order %s: each size takes its partition",
		named, now);
	if (order[0] != cfg->cache_block_sizes[0] &&
	    (uint64_t)order[0] * c->d->page_size == part0.payload_bytes)
		vmm_log(VMM_LOG_INFO,
			"cache: the NVMe tier's blocks from the last run have %u pages, a size --cache-block-pages names: the tier is that size's",
			order[0]);
	memcpy(cfg->cache_block_sizes, order, n * sizeof(order[0]));
	cfg->cache_block_pages = order[0];
	c->named_ppb = order[0];
}
