// SPDX-License-Identifier: MIT
/*
 * NVMe tier partitions: kvmmd caching several named block sizes gives
 * each its own tier in a share of the one file (tier_nvme_config.part_*),
 * equal, or by the weights the operator gave (--cache-block-pages 4:3,2:1).
 * Here: where a partition lies, whether the
 * superblock at its start names it (else tier_nvme_open() formats it),
 * and the layout id partition 0 draws when it formats, which the other
 * partitions' superblocks must carry to be read.  Every offset the tier
 * computes starts at part_base (nvme_slot_offset(), the superblock's
 * reads and writes); the rest of the tier does not know it is one.
 */
#include "tier_nvme_priv.h"

#include "crc32c.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint32_t gcd32(uint32_t a, uint32_t b)
{
	while (b) {
		uint32_t r = a % b;

		a = b;
		b = r;
	}
	return a;
}

/*
 * One form for every list of weights that cuts the file alike (2:2 is
 * 1:1, 6:2 is 3:1), so that comparing two superblocks' compares cuts;
 * and 0 for the equal cut, which is what files written before the
 * weights hold there, so that `--cache-block-pages 4,2` (or 4:1,2:1)
 * reads and writes them byte for byte as before.
 */
uint64_t tier_nvme_weights_pack(const uint32_t *weights, uint32_t n)
{
	uint32_t g = 0, zeros = 0;
	uint64_t packed = 0;
	bool equal = true;

	if (n < 2 || !weights)
		return 0;
	if (n > TIER_NVME_PARTS_MAX)
		return UINT64_MAX;
	for (uint32_t i = 0; i < n; i++) {
		zeros += !weights[i];
		if (weights[i] > TIER_NVME_WEIGHT_MAX)
			return UINT64_MAX;
		g = gcd32(g, weights[i]);
		equal = equal && weights[i] == weights[0];
	}
	if (zeros == n) /* none given: the equal cut */
		return 0;
	if (zeros)
		return UINT64_MAX;
	if (equal)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		packed |= (uint64_t)(weights[i] / g) << (16 * i);
	return packed;
}

uint32_t tier_nvme_weight_of(uint64_t packed, uint32_t i)
{
	if (!packed || i >= TIER_NVME_PARTS_MAX)
		return 1;
	return (uint32_t)(packed >> (16 * i)) & 0xffff;
}

/*
 * Whether packed, as read from a superblock, is a cut of n partitions
 * tier_nvme_weights_pack() could have made: 0 (the equal cut), or n
 * weights of 1 to TIER_NVME_WEIGHT_MAX and nothing past them.  A
 * superblock whose CRC holds may still carry other bits (damaged so,
 * or written by another program): partition 0's weight 0 there made
 * tier_nvme_part_base() divide by zero at start (SIGFPE).
 */
bool tier_nvme_weights_valid(uint64_t packed, uint32_t n)
{
	if (!packed)
		return true;
	if (n < 2 || n > TIER_NVME_PARTS_MAX)
		return false;
	for (uint32_t i = 0; i < TIER_NVME_PARTS_MAX; i++) {
		uint32_t w = (uint32_t)(packed >> (16 * i)) & 0xffff;

		if (i < n ? !w || w > TIER_NVME_WEIGHT_MAX : w != 0)
			return false;
	}
	return true;
}

/* The weights of partitions 0 to i - 1 (the units before partition i),
 * and all of them (the units the file is cut in). */
static uint64_t weights_before(uint64_t packed, uint32_t i)
{
	uint64_t sum = 0;

	for (uint32_t j = 0; j < i; j++)
		sum += tier_nvme_weight_of(packed, j);
	return sum;
}

/*
 * A partition's start from its cut: the unit is the bytes of partition
 * 0 over its weight (part_bytes of an equal cut, whose weights are 1),
 * and partition i starts after the units of those before it.  So an
 * equal cut's partition i is at i shares, as before the weights.
 */
static uint64_t part_base_of(uint64_t part0_bytes, uint64_t packed, uint32_t i)
{
	uint64_t unit = part0_bytes / tier_nvme_weight_of(packed, 0);

	return unit * weights_before(packed, i);
}

uint64_t tier_nvme_part_base(const struct tier_nvme_peek *part0, uint32_t i)
{
	return part_base_of(part0->part_bytes, part0->part_weights, i);
}

#if HAVE_LIBURING

/*
 * The tier's partition of a file of bytes (tier_nvme_config.part_*):
 * the file cut in units of whole 4 KiB pages, as many as the weights'
 * sum (the part_count partitions' when equal: one unit a partition, the
 * equal share of before the weights), partition i taking its weight's
 * units after the units of those before it; a tier with the whole file
 * has all of it.  The bytes the units leave at the end stay unused
 * (less than the weights' sum of 4 KiB pages).
 */
void nvme_cut_partition(struct tier_nvme *t, uint64_t bytes)
{
	uint64_t unit;

	if (!t->part_count) {
		t->part_base = 0;
		t->part_bytes = bytes;
		return;
	}
	unit = bytes / weights_before(t->part_weights, t->part_count) /
	       NVME_ALIGN * NVME_ALIGN;
	t->part_bytes =
		unit * tier_nvme_weight_of(t->part_weights, t->part_index);
	t->part_base = unit * weights_before(t->part_weights, t->part_index);
}

void nvme_part_share_text(const struct tier_nvme *t, uint64_t bytes, char *buf,
			  size_t len)
{
	uint64_t units, w, unit;

	buf[0] = '\0';
	if (!t->part_count)
		return;
	units = weights_before(t->part_weights, t->part_count);
	w = tier_nvme_weight_of(t->part_weights, t->part_index);
	/* the smallest unit whose w hold the superblock and one slot: a
	 * file of fewer pages than units gives every partition 0 bytes,
	 * whatever the block size */
	unit = (NVME_DATA_OFFSET + t->stride + w - 1) / w;
	unit = (unit + NVME_ALIGN - 1) / NVME_ALIGN * NVME_ALIGN;
	snprintf(
		buf, len,
		" (its share of the file's %llu bytes: %llu of %llu units of whole 4 KiB pages, as the block sizes' weights cut it; a file of at least %llu bytes gives it a slot)",
		(unsigned long long)bytes, (unsigned long long)w,
		(unsigned long long)units, (unsigned long long)(unit * units));
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
	    sb->part_index != t->part_index || !sb->layout_id)
		return false;
	/* another cut of as many partitions: every partition's start and
	 * bytes may differ, this one's too */
	*why = "it was cut for other shares of the block sizes (--cache-block-pages N:W)";
	if (sb->part_weights != t->part_weights)
		return false;
	*why = "it was not cut for this list of block sizes and --nvme-size";
	if (sb->part_bytes != t->part_bytes)
		return false;
	*why = "partition 0 was formatted anew since its blocks were written";
	return !t->part_index || sb->layout_id == layout_id;
}

/* The bytes of partition 0 of t's cut (t may be a later partition). */
static uint64_t part0_bytes(const struct tier_nvme *t)
{
	uint64_t unit = t->part_bytes /
			tier_nvme_weight_of(t->part_weights, t->part_index);

	return unit * tier_nvme_weight_of(t->part_weights, 0);
}

/*
 * Whether sb, read at the file's start, is partition 0's of t's cut (the
 * same count, weights and unit) and names its layout.  The weights make
 * the layout id the whole cut's: partition 0 keeps its bytes under other
 * weights (4:2:2:2 is 2:1:1:1, beside 4:1:2:3, on 10 units), where the
 * other partitions move, and a layout id kept then would let a later
 * partition read a superblock the older cut left where it starts now.
 */
static bool part0_names_cut(const struct tier_nvme *t,
			    const struct nvme_superblock *sb)
{
	return nvme_sb_valid(sb) && sb->part_count == t->part_count &&
	       !sb->part_index && sb->part_bytes == part0_bytes(t) &&
	       sb->part_weights == t->part_weights && sb->layout_id;
}

uint64_t nvme_part0_format_layout(const struct tier_nvme *t,
				  const struct nvme_superblock *sb)
{
	/* the same cut: no other layout wrote in the other partitions
	 * since this id was drawn, whatever partition 0 held */
	if (sb && part0_names_cut(t, sb))
		return sb->layout_id;
	return nvme_new_layout_id();
}

/* The superblock at the file's start: 0 (*sb as read, valid or not),
 * or the read's -errno. */
static int part0_read(const struct tier_nvme *t, struct nvme_superblock *sb)
{
	void *buf;
	ssize_t n;
	int r = 0;

	if (posix_memalign(&buf, NVME_ALIGN, NVME_ALIGN))
		return -ENOMEM;
	n = pread(t->fd, buf, NVME_ALIGN, 0);
	if (n < 0)
		r = -errno;
	else if (n != NVME_ALIGN)
		memset(sb, 0, sizeof(*sb)); /* a new file: none there */
	else
		memcpy(sb, buf, sizeof(*sb));
	free(buf);
	return r;
}

/*
 * Partition 0's superblock holding no slot (payload 0, which partition
 * 0's own open formats, keeping its layout id: nvme_part0_format_layout()),
 * naming t's cut, the layout id and t's cache scope and key (read at the
 * next start, scope.c, which the partitions' blocks are named under).
 */
static int part0_write(const struct tier_nvme *t, uint64_t layout_id)
{
	struct nvme_superblock sb = {
		.magic = TIER_NVME_SB_MAGIC,
		.version = TIER_NVME_VERSION,
		.sb_bytes = sizeof(sb),
		.stride = TIER_NVME_HEADER_BYTES,
		.format_id = nvme_new_layout_id(),
		.scope = t->scope,
		.part_count = t->part_count,
		.part_bytes = part0_bytes(t),
		.layout_id = layout_id,
		.part_weights = t->part_weights,
	};
	void *buf;
	int r = 0;

	memcpy(sb.scope_key, t->scope_key, sizeof(sb.scope_key));
	sb.crc = tier_crc32c(0, &sb, sizeof(sb));
	if (posix_memalign(&buf, NVME_ALIGN, NVME_ALIGN))
		return -ENOMEM;
	memset(buf, 0, NVME_ALIGN);
	memcpy(buf, &sb, sizeof(sb));
	r = nvme_sb_block_write(t->fd, buf, 0);
	free(buf);
	return r;
}

int nvme_part0_layout(struct tier_nvme *t, const char *path, const char *part,
		      uint64_t *layout_id)
{
	struct nvme_superblock sb;
	uint64_t id;
	int r;

	r = part0_read(t, &sb);
	if (r)
		goto err;
	if (part0_names_cut(t, &sb) &&
	    nvme_sb_same_scope(&sb, t->scope, t->scope_key)) {
		*layout_id = sb.layout_id;
		return 0;
	}
	/* no layout of this cut there (a new file, another cut, one
	 * size's tier), or another cache scope, whose blocks partition 0's
	 * open would format anyway: this cut's, as that open would leave it */
	id = nvme_part0_format_layout(t, &sb);
	r = part0_write(t, id);
	if (r)
		goto err;
	vmm_log(VMM_LOG_INFO,
		"tier_nvme: %s%s: partition 0's tier is not open: the file's start now names this cut of it in %u partitions, with no slot of partition 0 yet",
		path, part, t->part_count);
	*layout_id = id;
	return 0;
err:
	vmm_log(VMM_LOG_ERR,
		"tier_nvme: %s%s: partition 0's superblock, which names the partitions' layout: %s",
		path, part, strerror(-r));
	return r;
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
