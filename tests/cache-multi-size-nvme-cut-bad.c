// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * The restart's order logic (cache_nvme_order.c) reads partition 0's
 * superblock at start and finds each partition from its bytes and
 * weights: the unit is partition 0's bytes over partition 0's weight
 * (tier_nvme_part_base()).  A superblock whose CRC holds but whose
 * weights name no cut kvmmd could have written (partition 0's weight 0,
 * partition 1's 1: a damaged file, or one another program wrote) must
 * be taken for what it is, a superblock of no cut of ours, and the file
 * formatted, as the tiers' own checks would.  Until 7 December kvmmd
 * divided by that weight 0 and died of SIGFPE at start, before its
 * socket was up, at every start on that file.
 *
 * kvmmd --cache-block-pages 4,2 on a 4 MiB file whose start holds such a
 * superblock (part_count 2, partition 0, 2 MiB, a layout id, weights
 * word 1 << 16): it starts, both partitions are formatted (7 and 15
 * slots, as on a new file), each size's TIER_STATS has them, and a
 * content of each size is cached and read back byte-identical.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT io_uring).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/crc32c.h"
#include "kvmm/kvmmd/tier_nvme_priv.h"
#include "tests/cache-multi-size-common.h"
#include "tests/lib/nvme_probe.h"

#define MIB (1024ull * 1024)

/* A 4 MiB file whose first 4 KiB are a superblock of partition 0 of 2,
 * valid but for its weights: partition 0's 0, partition 1's 1. */
static void write_bad_cut(const char *nvme)
{
	static char block[4096] __attribute__((aligned(4096)));
	struct nvme_superblock sb = {
		.magic = TIER_NVME_SB_MAGIC,
		.version = TIER_NVME_VERSION,
		.sb_bytes = sizeof(sb),
		.stride = TIER_NVME_HEADER_BYTES + 4 * CC_PAGE,
		.payload_bytes = 4 * CC_PAGE,
		.slot_count = 7,
		.format_id = 0x5eed5eed5eedull,
		.part_index = 0,
		.part_count = 2,
		.part_bytes = 2 * MIB,
		.layout_id = 0x1a7e1a7eull,
		.part_weights = 1ull << 16,
	};
	int fd;

	sb.crc = tier_crc32c(0, &sb, sizeof(sb));
	memcpy(block, &sb, sizeof(sb));
	fd = open(nvme, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	t_assert(fd >= 0);
	t_assert_eq(ftruncate(fd, (off_t)(4 * MIB)), 0);
	t_assert_eq(pwrite(fd, block, sizeof(block), 0),
		    (ssize_t)sizeof(block));
	t_assert_eq(fsync(fd), 0);
	close(fd);
}

int main(void)
{
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4,2",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "4M",
			       "--nvme-path",
			       NULL,
			       "--nvme-size",
			       "4194304",
			       NULL };
	struct kvmm_tier_stats_reply a, b;
	struct td_daemon d;
	char nvme[256];

	ms_res_init();
	cc_nvme_path(nvme, sizeof(nvme), "multi-size-nvme-cut-bad");
	if (!t_nvme_usable(nvme))
		t_skip("no O_DIRECT io_uring I/O in %s", nvme);
	args[9] = nvme;
	write_bad_cut(nvme);

	cc_start(&d, args); /* on the old kvmmd: SIGFPE, no socket */
	ms_expect_formatted(&d, nvme, 7, 15);
	t_assert_eq(ms_log_count(&d, "each size takes"), 0);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.tiers[2].capacity_blocks, 7);
	t_assert_eq(b.tiers[2].capacity_blocks, 15);
	t_assert_eq(a.nvme_open_error, 0);
	t_assert_eq(b.nvme_open_error, 0);
	for (uint32_t layers = 1; layers <= 2; layers++) {
		ms_write(d.sock, layers, 0);
		t_assert_eq(res->published, NB);
		ms_expect_read(d.sock, layers, 0, 0); /* GPU */
	}
	cc_stop(&d);
	unlink(nvme);
	printf("a superblock of no cut of ours (partition 0's weight 0): formatted, kvmmd serves\n");
	return 0;
}
