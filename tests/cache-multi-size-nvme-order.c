// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * The named sizes take the NVMe partitions whose blocks they have,
 * whatever the order of --cache-block-pages, so that a restart listing
 * them in another order recovers each size's blocks
 * (cache_nvme_order.c):
 *   1. partition 0 holding no slot: 4,2 with the file claimed late and
 *      partition 0's opens failing (KVMMD_TEST_NVME_OPEN_FAIL), the
 *      2-page size's partition 1 opens first and writes partition 0's
 *      empty superblock; its blocks saved at the stop.  The restart
 *      with 2,4 puts 2 pages on partition 1 again: partition 0 is
 *      formatted (it held no slot), partition 1 recovered, its blocks
 *      read back from NVMe byte-identical.  Until 7 December the order
 *      was left as named (no size's blocks in partition 0) and
 *      partition 1, given to the 4-page size, was formatted;
 *   2. three sizes, 4,2,6 then 4,6,2: every partition recovered, each
 *      size's blocks read back from NVMe.  Until 7 December only
 *      partition 0's size was put first, and partitions 1 and 2 were
 *      formatted.
 * A stale superblock of another cut never counts: the tiers check
 * theirs as before (tests/cache-multi-size-nvme.c steps 4 and 5,
 * tests/tier-nvme-partition.c).
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT io_uring).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/cache-multi-size-common.h"
#include "tests/lib/nvme_probe.h"

static void partition_zero_empty(const char *nvme)
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
			       "--nvme-save-on-stop",
			       "5000",
			       NULL };
	struct kvmm_tier_stats_reply a, b;
	char dir[300], file[320];
	struct td_daemon d;
	uint64_t t0;

	snprintf(dir, sizeof(dir), "%s.d", nvme);
	snprintf(file, sizeof(file), "%s/tier", dir);
	args[9] = file;
	setenv("KVMMD_TEST_NVME_OPEN_FAIL", "1000000", 1);
	cc_start_with_delay(&d, args, "KVMMD_TEST_CACHE_RETRY_MS", 100);
	unsetenv("KVMMD_TEST_NVME_OPEN_FAIL");
	t_ok(mkdir(dir, 0700));
	for (t0 = cc_now_ms();; usleep(50000)) {
		ms_size_stats(d.sock, 2, &b);
		if (b.tiers[2].capacity_blocks)
			break;
		if (cc_now_ms() - t0 > 15000)
			t_fail("the 2-page partition did not join in 15 s: error %llu",
			       (unsigned long long)b.nvme_open_error);
	}
	ms_size_stats(d.sock, 4, &a);
	t_assert_eq(a.nvme_open_error, EIO);
	t_assert_eq(a.tiers[2].capacity_blocks, 0);
	t_assert_eq(
		ms_part_line(
			&d, file, 1, 2,
			"partition 0's tier is not open: the file's start now names this cut of it in 2 partitions"),
		1);
	ms_write(d.sock, 1, 0);
	t_assert_eq(res->published, NB);
	cc_stop(&d); /* the 2-page size's blocks saved to partition 1 */

	args[3] = "2,4";
	cc_start(&d, args);
	t_assert_eq(
		ms_part_line(
			&d, file, 0, 2,
			"it holds no slot yet, only the partitions' layout: formatting it"),
		1);
	t_assert_eq(ms_part_line(&d, file, 1, 2, "recovered 2 of 15 slots"), 1);
	t_assert_eq(
		ms_log_count(
			&d,
			"cache: the NVMe tier's partitions hold blocks of the sizes --cache-block-pages 2,4 names in the order 4,2: each size takes its partition"),
		1);
	t_assert_eq(ms_log_count(&d, "formatting it anew"), 0);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(b.recovered_blocks, NB);
	ms_expect_read(d.sock, 1, 0, 2); /* from NVMe, byte-identical */
	cc_stop(&d);
	unlink(file);
	rmdir(dir);
	printf("partition 0 empty: the 2-page size's partition recovered with the sizes in the other order\n");
}

static void three_sizes(const char *nvme)
{
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4,2,6",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "6M",
			       "--nvme-path",
			       nvme,
			       "--nvme-size",
			       "6291456",
			       "--nvme-save-on-stop",
			       "5000",
			       NULL };
	struct td_daemon d;

	unlink(nvme);
	cc_start(&d, args);
	for (uint32_t layers = 1; layers <= 3; layers++) {
		ms_write(d.sock, layers, 0);
		t_assert_eq(res->published, NB);
	}
	cc_stop(&d); /* each size's blocks saved to its partition */

	args[3] = "4,6,2";
	cc_start(&d, args);
	t_assert_eq(ms_part_line(&d, nvme, 0, 3, "recovered 2 of"), 1);
	t_assert_eq(ms_part_line(&d, nvme, 1, 3, "recovered 2 of"), 1);
	t_assert_eq(ms_part_line(&d, nvme, 2, 3, "recovered 2 of"), 1);
	t_assert_eq(
		ms_log_count(
			&d,
			"cache: the NVMe tier's partitions hold blocks of the sizes --cache-block-pages 4,6,2 names in the order 4,2,6: each size takes its partition"),
		1);
	t_assert_eq(ms_log_count(&d, "formatt"), 0);
	for (uint32_t layers = 1; layers <= 3; layers++)
		ms_expect_read(d.sock, layers, 0, 2);
	cc_stop(&d);
	unlink(nvme);
	printf("three sizes in another order: every partition recovered\n");
}

int main(void)
{
	char nvme[256];

	ms_res_init();
	cc_nvme_path(nvme, sizeof(nvme), "multi-size-nvme-order");
	if (!t_nvme_usable(nvme))
		t_skip("no O_DIRECT io_uring I/O in %s", nvme);
	unlink(nvme);
	partition_zero_empty(nvme);
	three_sizes(nvme);
	return 0;
}
