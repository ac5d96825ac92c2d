// SPDX-License-Identifier: MIT
/*
 * The partitions of one NVMe tier file cut by weights
 * (tier_nvme_config.part_weights, kvmmd's --cache-block-pages N:W), on
 * one claimed fd, three partitions of 8 KiB blocks in 8 units U of
 * 40 KiB:
 *   1. tier_nvme_weights_pack(): 2:2 and 1:1 are 0 (the equal cut, as
 *      files before the weights), 6:2 is 3:1, a weight 0 among others,
 *      above 1000 or a fifth partition refused; an open with them
 *      -EINVAL;
 *   2. 2:1:1 (units of 2U): partitions at 0, 4U and 6U of 4U, 2U and
 *      2U (13, 6 and 6 slots), each superblock with the weights word;
 *      2 blocks written in each, all recovered and read back when
 *      opened again;
 *   3. 4:1:3 (units of U): partition 0 keeps its 4U but is formatted
 *      ("cut for other shares"), with a new layout id; partition 1
 *      (at 4U, the 2:1:1 cut's superblock there) formatted too, and
 *      partition 2 at 5U; 3 blocks written in it, up to 6U;
 *   4. 2:1:1 again: partition 0 formatted, a new layout id; partition 2
 *      finds its superblock of step 2 at 6U but not the layout id:
 *      formatted, none of its old blocks served.  A layout id kept
 *      across cuts whose partition 0 has the same bytes would have let
 *      it read that superblock and the slots after it, which step 3's
 *      partition 2 (5U to 8U) may have written over;
 *   5. the equal cut: weights 0,0,0 then 5:5:5 on the same file: one
 *      cut (the weights word 0 on disk), recovered;
 *   6. a new file, 2:1:1's partition 2 opened while partition 0's tier
 *      is not (kvmmd's late claim): the superblock it writes at the
 *      file's start names partition 0's 4U and the weights, so
 *      partition 0 opened then keeps the layout id and partition 2's
 *      blocks are recovered (with partition 2's 2U written there,
 *      partition 0 drew a new id and they were lost).
 * Skips (77) where the file system cannot do O_DIRECT io_uring I/O.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define P (8 * 1024) /* every partition's blocks */
#define U NT_CAPACITY(3, P) /* 40 KiB: 3 slots after a superblock */
#define FILE_BYTES (8 * (uint64_t)U)

static char path[256];
static int fd;
static unsigned char *data, *back;
static char log[8192];

static unsigned char pat(int part, int i, size_t o)
{
	return (unsigned char)(o * 13 + (size_t)i * 5 + (size_t)part * 71 +
			       o / 4096);
}

/* Partition part of 3 cut by w, layout id given; its start, bytes,
 * slots and recovered blocks asserted, the log kept. */
static struct tier_nvme *open_part(int part, const uint32_t *w, uint64_t layout,
				   uint64_t base, uint64_t bytes,
				   uint32_t slots, uint32_t recovered)
{
	struct tier_nvme_config cfg = {
		.path = path,
		.capacity_bytes = FILE_BYTES,
		.payload_bytes = P,
		.fd_held = true,
		.fd = fd,
		.part_index = (uint32_t)part,
		.part_count = 3,
		.layout_id = layout,
	};
	struct tier_nvme_stats st;
	struct tier_nvme *t;
	uint64_t b, n;
	int r;

	memcpy(cfg.part_weights, w, 3 * sizeof(*w));
	t = nt_open_logged(cfg, log, sizeof(log), &r);
	if (r)
		t_fail("open of partition %d: %d:\n%s", part, r, log);
	tier_nvme_partition(t, &b, &n);
	t_assert_eq(b, base);
	t_assert_eq(n, bytes);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.capacity_slots, slots);
	if (st.recovered_slots != recovered)
		t_fail("partition %d: %llu recovered, expected %u:\n%s", part,
		       (unsigned long long)st.recovered_slots, recovered, log);
	return t;
}

/* n blocks of partition part written (write) or read back and checked. */
static void blocks(struct tier_nvme *t, int part, int n, bool write)
{
	nt_part_blocks(t, 0x7b00, part, n, P, write, data, back, pat);
}

/* The weights word of the superblock at offset. */
static uint64_t weights_at(uint64_t offset)
{
	struct nvme_superblock sb;

	t_assert_eq(pread(fd, back, 4096, (off_t)offset), 4096);
	memcpy(&sb, back, sizeof(sb));
	t_assert_eq(sb.magic, TIER_NVME_SB_MAGIC);
	return sb.part_weights;
}

static void pack(void)
{
	const uint32_t eq[] = { 2, 2 }, one[] = { 1, 1 }, six[] = { 6, 2 };
	const uint32_t zero[] = { 0, 1 }, big[] = { 1001, 1 };
	const uint32_t five[] = { 1, 1, 1, 1, 2 };
	struct tier_nvme_config cfg = { .size = sizeof(cfg),
					.path = path,
					.capacity_bytes = FILE_BYTES,
					.payload_bytes = P,
					.fd_held = true,
					.fd = fd,
					.part_count = 2,
					.part_weights = { 0, 1 } };
	struct tier_nvme *t = NULL;

	t_assert_eq(tier_nvme_weights_pack(eq, 2), 0);
	t_assert_eq(tier_nvme_weights_pack(one, 2), 0);
	t_assert_eq(tier_nvme_weights_pack(six, 2), 3 | 1ull << 16);
	t_assert_eq(tier_nvme_weights_pack(zero, 2), UINT64_MAX);
	t_assert_eq(tier_nvme_weights_pack(big, 2), UINT64_MAX);
	t_assert_eq(tier_nvme_weights_pack(five, 5), UINT64_MAX);
	t_assert_eq(tier_nvme_weight_of(0, 2), 1);
	t_assert_eq(tier_nvme_weight_of(3 | 1ull << 16, 1), 1);
	/* weights as read from a superblock: a cut of ours, or none */
	t_assert(tier_nvme_weights_valid(0, 2));
	t_assert(tier_nvme_weights_valid(3 | 1ull << 16, 2));
	t_assert(tier_nvme_weights_valid(2 | 1ull << 16 | 1ull << 32, 3));
	t_assert(!tier_nvme_weights_valid(1ull << 16, 2)); /* 0:1 */
	t_assert(!tier_nvme_weights_valid(3, 2)); /* 3:0 */
	t_assert(!tier_nvme_weights_valid(1001 | 1ull << 16, 2));
	t_assert(!tier_nvme_weights_valid(3 | 1ull << 16 | 1ull << 32, 2));
	t_assert(!tier_nvme_weights_valid(3 | 1ull << 16, 5));
	t_assert(!tier_nvme_weights_valid(3, 1));
	t_assert_eq(tier_nvme_open(&cfg, &t), -EINVAL);
	cfg.part_weights[0] = 1001;
	t_assert_eq(tier_nvme_open(&cfg, &t), -EINVAL);
	t_assert(t == NULL);
	printf("weights packed: equal ones 0, 6:2 as 3:1, 0 and 1001 refused; read back: 0:1, 3:0, 1001:1, bits past the count refused\n");
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	const char *other =
		"it was cut for other shares of the block sizes (--cache-block-pages N:W): formatting it anew";
	const uint32_t a_w[] = { 2, 1, 1 }, b_w[] = { 4, 1, 3 };
	const uint32_t none[] = { 0, 0, 0 }, fives[] = { 5, 5, 5 };
	const uint64_t a_packed = 2 | 1ull << 16 | 1ull << 32;
	/* the equal cut's share: 8U / 3 in whole 4 KiB pages */
	const uint64_t third = FILE_BYTES / 3 / 4096 * 4096;
	struct tier_nvme *t0, *t1, *t2;
	uint64_t layout;

	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-weights-%d",
		 dir ? dir : "/var/tmp", getpid());
	unlink(path);
	if (!t_nvme_usable(path))
		t_skip("no O_DIRECT io_uring I/O in %s", path);
	t_ok(tier_nvme_claim(path, false, &fd));
	data = t_page_alloc(P);
	back = t_page_alloc(P);

	/* 1 */
	pack();

	/* 2 */
	t0 = open_part(0, a_w, 0, 0, 4 * U, 13, 0);
	layout = tier_nvme_layout_id(t0);
	t1 = open_part(1, a_w, layout, 4 * U, 2 * U, 6, 0);
	t2 = open_part(2, a_w, layout, 6 * U, 2 * U, 6, 0);
	blocks(t0, 0, 2, true);
	blocks(t1, 1, 2, true);
	blocks(t2, 2, 2, true);
	tier_nvme_close(t2);
	tier_nvme_close(t1);
	tier_nvme_close(t0);
	t_assert_eq(weights_at(0), a_packed);
	t_assert_eq(weights_at(4 * U), a_packed);
	t_assert_eq(weights_at(6 * U), a_packed);
	t0 = open_part(0, a_w, 0, 0, 4 * U, 13, 2);
	t_assert_eq(tier_nvme_layout_id(t0), layout);
	t1 = open_part(1, a_w, layout, 4 * U, 2 * U, 6, 2);
	t2 = open_part(2, a_w, layout, 6 * U, 2 * U, 6, 2);
	blocks(t0, 0, 2, false);
	blocks(t1, 1, 2, false);
	blocks(t2, 2, 2, false);
	tier_nvme_close(t2);
	tier_nvme_close(t1);
	tier_nvme_close(t0);
	printf("2:1:1: partitions at 0, 4U, 6U of 4U, 2U, 2U, recovered\n");

	/* 3 */
	t0 = open_part(0, b_w, 0, 0, 4 * U, 13, 0);
	t_assert_has(log, " (partition 0 of 3): ");
	t_assert_has(log, other);
	t_assert(tier_nvme_layout_id(t0) != layout);
	layout = tier_nvme_layout_id(t0);
	t1 = open_part(1, b_w, layout, 4 * U, U, 3, 0);
	t_assert_has(log, other);
	t2 = open_part(2, b_w, layout, 5 * U, 3 * U, 9, 0);
	/* slots 0-2, 5U to 6U: in the 2:1:1 cut's partition 1, short of
	 * its partition 2's superblock */
	blocks(t2, 2, 3, true);
	tier_nvme_close(t2);
	tier_nvme_close(t1);
	tier_nvme_close(t0);
	printf("4:1:3: partition 0 of the same bytes formatted, a new layout id\n");

	/* 4 */
	t0 = open_part(0, a_w, 0, 0, 4 * U, 13, 0);
	t_assert_has(log, other);
	t_assert(tier_nvme_layout_id(t0) != layout);
	layout = tier_nvme_layout_id(t0);
	t2 = open_part(2, a_w, layout, 6 * U, 2 * U, 6, 0);
	t_assert_has(
		log,
		" (partition 2 of 3): partition 0 was formatted anew since its blocks were written: formatting it anew");
	t_assert_eq(tier_nvme_lookup(t2, 0x7b00 + 0x200, NULL, NULL, NULL),
		    -ENOENT);
	tier_nvme_close(t2);
	tier_nvme_close(t0);
	printf("2:1:1 again: the old partition 2's superblock not read\n");

	/* 5 */
	t0 = open_part(0, none, 0, 0, third, 8, 0);
	layout = tier_nvme_layout_id(t0);
	t1 = open_part(1, none, layout, third, third, 8, 0);
	blocks(t1, 1, 2, true);
	tier_nvme_close(t1);
	tier_nvme_close(t0);
	t_assert_eq(weights_at(0), 0);
	t_assert_eq(weights_at(third), 0);
	t0 = open_part(0, fives, 0, 0, third, 8, 0);
	t_assert_eq(tier_nvme_layout_id(t0), layout);
	t1 = open_part(1, fives, layout, third, third, 8, 2);
	blocks(t1, 1, 2, false);
	tier_nvme_close(t1);
	tier_nvme_close(t0);
	printf("5:5:5 on the equal cut: one cut, the weights word 0, recovered\n");

	/* 6 */
	t_ok(ftruncate(fd, 0));
	t2 = open_part(2, a_w, 0, 6 * U, 2 * U, 6, 0);
	t_assert_has(
		log,
		" (partition 2 of 3): partition 0's tier is not open: the file's start now names this cut of it in 3 partitions");
	layout = tier_nvme_layout_id(t2);
	blocks(t2, 2, 2, true);
	tier_nvme_close(t2);
	t_assert_eq(weights_at(0), a_packed);
	t0 = open_part(0, a_w, 0, 0, 4 * U, 13, 0);
	t_assert_has(
		log,
		" (partition 0 of 3): it holds no slot yet, only the partitions' layout: formatting it");
	t_assert_eq(tier_nvme_layout_id(t0), layout);
	t2 = open_part(2, a_w, layout, 6 * U, 2 * U, 6, 2);
	blocks(t2, 2, 2, false);
	tier_nvme_close(t2);
	tier_nvme_close(t0);
	printf("2:1:1, partition 2 first: partition 0's superblock names the cut, its layout id kept\n");

	close(fd);
	unlink(path);
	free(back);
	free(data);
	return 0;
}
