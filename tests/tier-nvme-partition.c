// SPDX-License-Identifier: MIT
/*
 * Two NVMe tiers in two partitions of one file (kvmmd's named block
 * sizes, tier_nvme_config.part_*), on one claimed fd (one lock):
 *   1. partition 0 (blocks of 16 KiB) and 1 (8 KiB) formatted, each half
 *      the file: partition 1's slot 0 is right after its superblock, at
 *      half the file; every slot of both written with bytes of its own
 *      and read back;
 *   2. both opened again: all recovered, every byte read back (the
 *      partitions never overlap);
 *   3. partition 1 opened with a layout id that is not partition 0's:
 *      formatted ("partition 0 was formatted anew since its blocks were
 *      written"), nothing recovered; 2 blocks written under that id;
 *   4. the whole file opened as one tier of 16 KiB blocks (one size):
 *      formatted ("it was cut in partitions"), though partition 0 holds
 *      blocks of its size; its superblock's partition words are zeros
 *      (a one-size file's bytes as before the partitions);
 *   5. the two partitions again: partition 0 formatted ("not cut for
 *      this list"), with a new layout id; partition 1 formatted too,
 *      though the superblock of step 3 is still at its start: nothing
 *      of steps 3 and 4 is found;
 *   6. a new file, partition 1 opened while partition 0's tier is not
 *      (layout id 0: kvmmd's first size without a host tier, or its
 *      partition failed to open): the file's start gets a superblock
 *      of partition 0 with no slot and a new layout id, which
 *      partition 1 takes; opened so again, its blocks are recovered
 *      (until 6 December it had layout id 0 and was formatted at every
 *      open); partition 0 opened then is formatted ("no slot yet")
 *      with that layout id, and partition 1 is still recovered;
 *   7. the whole file as one size's tier, then partition 1 alone again:
 *      the file's start gets a new layout id, and the superblock of
 *      step 6 at partition 1's start is not read: formatted.
 * Skips (77) where the file system cannot do O_DIRECT io_uring I/O.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PA (16 * 1024) /* partition 0's blocks */
#define PB (8 * 1024) /* partition 1's */
#define PART NT_CAPACITY(8, PA) /* 8 slots of PA; 13 of PB */
#define NA 8
#define NB 13

static char path[256];
static int fd;
static unsigned char *data, *back;
static char log[8192];

static unsigned char pat(int part, int i, size_t o)
{
	return (unsigned char)(o * 31 + (size_t)i * 7 + (size_t)part * 101 +
			       o / 4096);
}

static size_t payload(int part)
{
	return part ? PB : PA;
}

/* Partition part of 2 (part_count 0: the whole file), layout id given
 * to it; its slots and recovered blocks asserted, the log kept. */
static struct tier_nvme *open_part(int part, uint32_t count, uint64_t layout,
				   uint32_t slots, uint32_t recovered)
{
	struct tier_nvme_config cfg = {
		.path = path,
		.capacity_bytes = 2 * (uint64_t)PART,
		.payload_bytes = payload(part),
		.fd_held = true,
		.fd = fd,
		.part_index = count ? (uint32_t)part : 0,
		.part_count = count,
		.layout_id = layout,
	};
	struct tier_nvme_stats st;
	struct tier_nvme *t;
	int r;

	t = nt_open_logged(cfg, log, sizeof(log), &r);
	if (r)
		t_fail("open of partition %d: %d:\n%s", part, r, log);
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
	nt_part_blocks(t, 0x9a00, part, n, payload(part), write, data, back,
		       pat);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct tier_nvme *a, *b;
	uint64_t base, bytes, layout;
	unsigned char *sb = NULL;

	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-partition-%d",
		 dir ? dir : "/var/tmp", getpid());
	unlink(path);
	if (!t_nvme_usable(path))
		t_skip("no O_DIRECT io_uring I/O in %s", path);
	t_ok(tier_nvme_claim(path, false, &fd));
	data = t_page_alloc(PA);
	back = t_page_alloc(PA);
	sb = t_page_alloc(4096);

	/* 1 */
	a = open_part(0, 2, 0, NA, 0);
	t_assert_has(log,
		     " (partition 0 of 2): formatted 8 slots of 20480 bytes");
	layout = tier_nvme_layout_id(a);
	t_assert(layout != 0);
	b = open_part(1, 2, layout, NB, 0);
	t_assert_has(log,
		     " (partition 1 of 2): formatted 13 slots of 12288 bytes");
	t_assert_eq(tier_nvme_layout_id(b), layout);
	tier_nvme_partition(b, &base, &bytes);
	t_assert_eq(base, PART);
	t_assert_eq(bytes, PART);
	t_assert_eq(tier_nvme_slot_offset(a, 0), NT_SLOT_OFFSET(0, PA));
	t_assert_eq(tier_nvme_slot_offset(b, 0), PART + NT_SLOT_OFFSET(0, PB));
	blocks(a, 0, NA, true);
	blocks(b, 1, NB, true);
	blocks(a, 0, NA, false);
	blocks(b, 1, NB, false);
	tier_nvme_close(b);
	tier_nvme_close(a);

	/* 2 */
	a = open_part(0, 2, 0, NA, NA);
	t_assert_eq(tier_nvme_layout_id(a), layout);
	b = open_part(1, 2, layout, NB, NB);
	t_assert_has(log, " (partition 1 of 2): recovered 13 of 13 slots");
	blocks(a, 0, NA, false);
	blocks(b, 1, NB, false);
	tier_nvme_close(b);

	/* 3 */
	b = open_part(1, 2, layout + 1, NB, 0);
	t_assert_has(
		log,
		" (partition 1 of 2): partition 0 was formatted anew since its blocks were written: formatting it anew");
	blocks(b, 1, 2, true);
	tier_nvme_close(b);
	tier_nvme_close(a);

	/* 4 */
	a = open_part(0, 0, 0, 16, 0);
	t_assert_has(
		log,
		": it was cut in partitions for several block sizes: formatting it anew");
	t_assert(!strstr(log, "(partition"));
	t_assert_eq(tier_nvme_layout_id(a), 0);
	blocks(a, 0, NA, true); /* slots 0-7: partition 1's start untouched */
	t_assert_eq(pread(fd, sb, 4096, 0), 4096);
	for (int o = 88; o < 120; o++) /* part_*, layout_id, reserved */
		t_assert_eq(sb[o], 0);
	tier_nvme_close(a);

	/* 5 */
	a = open_part(0, 2, 0, NA, 0);
	t_assert_has(
		log,
		" (partition 0 of 2): it was not cut for this list of block sizes and --nvme-size: formatting it anew");
	t_assert(tier_nvme_layout_id(a) != layout);
	t_assert(tier_nvme_layout_id(a) != 0);
	b = open_part(1, 2, tier_nvme_layout_id(a), NB, 0);
	t_assert_has(
		log,
		" (partition 1 of 2): partition 0 was formatted anew since its blocks were written: formatting it anew");
	t_assert_eq(tier_nvme_lookup(b, 0x9a00 + 0x100, NULL, NULL, NULL),
		    -ENOENT);
	t_assert_eq(tier_nvme_lookup(a, 0x9a00, NULL, NULL, NULL), -ENOENT);
	tier_nvme_close(b);
	tier_nvme_close(a);

	/* 6 */
	t_ok(ftruncate(fd, 0));
	b = open_part(1, 2, 0, NB, 0);
	t_assert_has(
		log,
		" (partition 1 of 2): partition 0's tier is not open: the file's start now names this cut of it in 2 partitions");
	t_assert_has(log, " (partition 1 of 2): formatted 13 slots");
	layout = tier_nvme_layout_id(b);
	t_assert(layout != 0);
	blocks(b, 1, 2, true);
	tier_nvme_close(b);
	b = open_part(1, 2, 0, NB, 2);
	t_assert(!strstr(log, "is not open"));
	t_assert_eq(tier_nvme_layout_id(b), layout);
	blocks(b, 1, 2, false);
	tier_nvme_close(b);
	a = open_part(0, 2, 0, NA, 0);
	t_assert_has(
		log,
		" (partition 0 of 2): it holds no slot yet, only the partitions' layout: formatting it");
	t_assert_eq(tier_nvme_layout_id(a), layout);
	b = open_part(1, 2, layout, NB, 2);
	blocks(b, 1, 2, false);
	tier_nvme_close(b);
	tier_nvme_close(a);

	/* 7 */
	a = open_part(0, 0, 0, 16, 0);
	tier_nvme_close(a);
	b = open_part(1, 2, 0, NB, 0);
	t_assert_has(log,
		     " (partition 1 of 2): partition 0's tier is not open");
	t_assert_has(
		log,
		" (partition 1 of 2): partition 0 was formatted anew since its blocks were written: formatting it anew");
	t_assert(tier_nvme_layout_id(b) != layout);
	t_assert(tier_nvme_layout_id(b) != 0);
	t_assert_eq(tier_nvme_lookup(b, 0x9a00 + 0x100, NULL, NULL, NULL),
		    -ENOENT);
	tier_nvme_close(b);

	close(fd);
	unlink(path);
	free(sb);
	free(back);
	free(data);
	return 0;
}
