// SPDX-License-Identifier: MIT
/*
 * NVMe tier partitions: kvmmd caching several named block sizes gives
 * each its own tier in an equal share of the one file
 * (tier_nvme_config.part_*).  Here: where a partition lies, whether the
 * superblock at its start names it (else tier_nvme_open() formats it),
 * and the layout id partition 0 draws when it formats, which the other
 * partitions' superblocks must carry to be read.  Every offset the tier
 * computes starts at part_base (nvme_slot_offset(), the superblock's
 * reads and writes); the rest of the tier does not know it is one.
 */
#include "tier_nvme_priv.h"

#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#if HAVE_LIBURING

/*
 * The tier's partition of a file of bytes (tier_nvme_config.part_*):
 * equal shares of whole 4 KiB pages, partition i at i shares; a tier
 * with the whole file has one share, all of it.  The bytes a share
 * leaves at the end stay unused.
 */
void nvme_cut_partition(struct tier_nvme *t, uint64_t bytes)
{
	if (!t->part_count) {
		t->part_base = 0;
		t->part_bytes = bytes;
		return;
	}
	t->part_bytes = bytes / t->part_count / NVME_ALIGN * NVME_ALIGN;
	t->part_base = (uint64_t)t->part_index * t->part_bytes;
}

/*
 * Whether the superblock at the partition's start names this partition
 * of this layout.  A tier with the whole file takes a superblock of one
 * (the partitions' fields zeros, as every file written before them); a
 * partition takes one of the same index, count and bytes, and a layout
 * id: partition 0 any (its superblock, at the file's start, never lies
 * in another layout's slots; formatted, it draws a new one), the others
 * partition 0's (layout_id): a superblock at their start from another
 * layout, or from the bytes of a block another layout's slots held
 * there, never names it.  *why says what differs.
 */
bool nvme_same_partition(const struct tier_nvme *t,
			 const struct nvme_superblock *sb, uint64_t layout_id,
			 const char **why)
{
	if (!t->part_count) {
		*why = "it was cut in partitions for several block sizes";
		return sb->part_count <= 1;
	}
	*why = "it was not cut for this list of block sizes and --nvme-size";
	if (sb->part_count != t->part_count ||
	    sb->part_index != t->part_index ||
	    sb->part_bytes != t->part_bytes || !sb->layout_id)
		return false;
	*why = "partition 0 was formatted anew since its blocks were written";
	return !t->part_index || sb->layout_id == layout_id;
}

/* A new layout id, never 0 (0: none). */
uint64_t nvme_new_layout_id(void)
{
	uint64_t id = 0;

	while (!id)
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = ((uint64_t)time(NULL) << 20) ^
			     ((uint64_t)getpid() << 40) ^ (uint64_t)clock();
	return id;
}

void tier_nvme_partition(struct tier_nvme *t, uint64_t *base, uint64_t *bytes)
{
	*base = t->part_base;
	*bytes = t->part_bytes;
}

uint64_t tier_nvme_layout_id(struct tier_nvme *t)
{
	return t->layout_id;
}

#else /* !HAVE_LIBURING */

void tier_nvme_partition(struct tier_nvme *t, uint64_t *base, uint64_t *bytes)
{
	*base = 0;
	*bytes = 0;
}

uint64_t tier_nvme_layout_id(struct tier_nvme *t)
{
	return 0;
}

#endif /* HAVE_LIBURING */
