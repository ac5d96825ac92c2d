// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * The operator's shares of --host-mem and the NVMe file per named block
 * size (--cache-block-pages 4:3,2:1; tiers.md, "Several block sizes"),
 * on one file and 4 MiB of each:
 *   1. the equal cut, as written before the weights: 4,2 formats two
 *      partitions of 2 MiB (7 and 15 slots), both sizes' blocks saved at
 *      the stop; on disk partition 1's superblock at 2 MiB, each
 *      superblock's part_bytes 2 MiB and its weights word 0 (the
 *      reserved word of the files written before the weights);
 *   2. 4:2,2:2 (equal weights given) on that file: both partitions
 *      recovered, read back from NVMe byte-identical, nothing formatted;
 *   3. 4:3,2:1: both partitions formatted, partition 0's line says why
 *      ("cut for other shares"; partition 1 now starts in the old one's
 *      slots, where no superblock lies); the host slots 12 of 256 KiB and 8 of 128 KiB
 *      (3 MiB and 1 MiB), the partitions 11 and 7 slots (3 MiB and
 *      1 MiB), in each size's TIER_STATS, kvmmctl status (text, --json)
 *      and kvmmctl metrics; the set-up lines say each size's share; both
 *      sizes' blocks saved, partition 1's superblock at 3 MiB;
 *   4. 4:3,2:1 again: both partitions recovered, each size's blocks
 *      read back from its partition byte-identical;
 *   5. 2:1,4:3 (the same weights, the list in another order): each size
 *      takes the partition holding its blocks, both recovered and read
 *      back; TIER_STATS lists 4 and 2 in the file's order, each with its
 *      weight (3 and 1, ABI 1.25; 3 and 1 at step 3 too);
 *   6. 4:1,2:3: both partitions formatted (partition 0: other shares),
 *      no block found; the weights 1 and 3;
 *   7. files too small for the cut refused at start, the line naming
 *      the partition's share and the file that gives it a slot
 *      (4:1000,2:999 on 4 MiB: partition 0 has 0 bytes; 4:3,2:1 on
 *      384 KiB: partition 1 96 KiB), and the file it names starting
 *      with a slot in each partition (the old line ended at the slot's
 *      bytes).
 * Fails on a kvmmd without the weights (4:3 a usage error) or one whose
 * weighted cut misreads the file.  The usage errors are
 * tests/kvmmd-option-errors.sh's.  Skips (77) where the NVMe tier cannot
 * run (no O_DIRECT io_uring).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/cache-multi-size-common.h"
#include "tests/lib/metrics.h"
#include "tests/lib/nvme_probe.h"

#include "kvmm/kvmmd/tier_nvme_priv.h"

#define MIB (1024ull * 1024)

static char nvme[256];
static const char *args[] = { "--cache-policy",
			      "lru",
			      "--cache-block-pages",
			      "4,2",
			      "--cache-gpu-blocks",
			      "2",
			      "--host-mem",
			      "4M",
			      "--nvme-path",
			      nvme,
			      "--nvme-size",
			      "4194304",
			      "--nvme-save-on-stop",
			      "5000",
			      NULL };

static char log_buf[1 << 17];

/* The superblock at offset in the file, read with kvmmd stopped. */
static void sb_at(uint64_t offset, struct nvme_superblock *sb)
{
	int fd = open(nvme, O_RDONLY | O_CLOEXEC);

	t_assert(fd >= 0);
	t_assert_eq(pread(fd, sb, sizeof(*sb), (off_t)offset),
		    (ssize_t)sizeof(*sb));
	close(fd);
	t_assert_eq(sb->magic, TIER_NVME_SB_MAGIC);
}

/* Both partitions' superblocks: partition 1 at base, each of its bytes
 * and the weights word, one layout id. */
static void expect_cut(uint64_t base, uint64_t bytes0, uint64_t bytes1,
		       uint64_t weights)
{
	struct nvme_superblock a, b;

	sb_at(0, &a);
	sb_at(base, &b);
	t_assert_eq(a.part_index, 0);
	t_assert_eq(b.part_index, 1);
	t_assert_eq(a.part_count, 2);
	t_assert_eq(b.part_count, 2);
	t_assert_eq(a.part_bytes, bytes0);
	t_assert_eq(b.part_bytes, bytes1);
	t_assert_eq(a.part_weights, weights);
	t_assert_eq(b.part_weights, weights);
	t_assert(a.layout_id != 0);
	t_assert_eq(b.layout_id, a.layout_id);
	t_assert_eq(a.payload_bytes, 4 * CC_PAGE);
	t_assert_eq(b.payload_bytes, 2 * CC_PAGE);
}

/* Content 0 of both models published, then kvmmd stopped: the stop saves
 * both sizes' blocks, each to its partition. */
static void publish_and_save(struct td_daemon *d)
{
	for (uint32_t layers = 1; layers <= 2; layers++) {
		ms_write(d->sock, layers, 0);
		t_assert_eq(res->status, 0);
		t_assert_eq(res->published, NB);
	}
	t_assert_eq(td_stop_log(d, log_buf, sizeof(log_buf)), 0);
	t_assert_eq(t_count(log_buf,
			    "cache: stopping: 2 blocks written to NVMe in"),
		    2);
}

/* Each size's host and NVMe slots (TIER_STATS of the size alone). */
static void expect_slots(struct td_daemon *d, uint64_t host4, uint64_t nvme4,
			 uint64_t host2, uint64_t nvme2)
{
	struct kvmm_tier_stats_reply a, b;

	ms_size_stats(d->sock, 4, &a);
	ms_size_stats(d->sock, 2, &b);
	t_assert_eq(a.tiers[1].capacity_blocks, host4);
	t_assert_eq(a.tiers[2].capacity_blocks, nvme4);
	t_assert_eq(b.tiers[1].capacity_blocks, host2);
	t_assert_eq(b.tiers[2].capacity_blocks, nvme2);
	t_assert_eq(a.nvme_open_error, 0);
	t_assert_eq(b.nvme_open_error, 0);
}

/* TIER_STATS' sizes, the NVMe file's order (4 first), and their weights
 * (ABI 1.25), each beside its size whatever order the option gave. */
static void expect_weights(struct td_daemon *d, uint32_t w4, uint32_t w2)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.nr_sizes, 2);
	t_assert_eq(ts.sizes[0], 4);
	t_assert_eq(ts.sizes[1], 2);
	t_assert_eq(ts.weights[0], w4);
	t_assert_eq(ts.weights[1], w2);
}

/* A restart that recovers both sizes' 2 blocks, read back from NVMe. */
static void expect_recovered(struct td_daemon *d, uint64_t nvme4,
			     uint64_t nvme2)
{
	char what[64];

	snprintf(what, sizeof(what), "recovered 2 of %llu slots",
		 (unsigned long long)nvme4);
	t_assert_eq(ms_part_line(d, nvme, 0, 2, what), 1);
	snprintf(what, sizeof(what), "recovered 2 of %llu slots",
		 (unsigned long long)nvme2);
	t_assert_eq(ms_part_line(d, nvme, 1, 2, what), 1);
	t_assert_eq(ms_log_count(d, "formatt"), 0);
	for (uint32_t layers = 1; layers <= 2; layers++)
		ms_expect_read(d->sock, layers, 0, 2); /* byte-identical */
}

static void equal_cut(void)
{
	struct td_daemon d;

	args[3] = "4,2";
	cc_start(&d, args);
	ms_expect_formatted(&d, nvme, 7, 15);
	expect_slots(&d, 8, 7, 16, 15);
	t_assert_eq(ms_log_count(&d, "a share of"), 0);
	publish_and_save(&d);
	expect_cut(2 * MIB, 2 * MIB, 2 * MIB, 0);
	printf("4,2: two partitions of 2 MiB, the weights word 0 as before the weights\n");

	args[3] = "4:2,2:2";
	cc_start(&d, args);
	expect_recovered(&d, 7, 15);
	expect_slots(&d, 8, 7, 16, 15);
	t_assert_eq(td_stop_log(&d, log_buf, sizeof(log_buf)), 0);
	expect_cut(2 * MIB, 2 * MIB, 2 * MIB, 0);
	printf("4:2,2:2 on the equal cut's file: both partitions recovered\n");
}

/* kvmmctl status (text, --json) and metrics: each size's slots. */
static void expect_shown(struct td_daemon *d)
{
	static char out[1 << 17];
	static struct tm_expo k;
	const char *p2, *p4;

	t_assert_eq(td_kvmmctl(d->sock, "status", out, sizeof(out)), 0);
	p4 = strstr(out, "\nsize 4 ");
	p2 = strstr(out, "\nsize 2 ");
	if (!p4 || !p2 || p2 < p4 || !strstr(p4, "\n  tier host    ") ||
	    !strstr(p4, "/12 blocks") || strstr(p4, "/12 blocks") > p2 ||
	    !strstr(p4, "/11 blocks") || strstr(p4, "/11 blocks") > p2 ||
	    !strstr(p2, "/8 blocks") || !strstr(p2, "/7 blocks") ||
	    !strstr(out, "\ntier host    ") || !strstr(out, "/20 blocks") ||
	    !strstr(out, "/18 blocks"))
		t_fail("kvmmctl status:\n%s", out);
	t_assert_eq(td_kvmmctl(d->sock, "--json status", out, sizeof(out)), 0);
	p4 = strstr(out, "{\"block_pages\":4,");
	p2 = strstr(out, "{\"block_pages\":2,");
	if (!p4 || !p2 || p2 < p4 ||
	    !strstr(p4, "\"host\":{\"capacity_blocks\":12,") ||
	    !strstr(p4, "\"nvme\":{\"capacity_blocks\":11,") ||
	    !strstr(p2, "\"host\":{\"capacity_blocks\":8,") ||
	    !strstr(p2, "\"nvme\":{\"capacity_blocks\":7,") ||
	    strstr(p4, "\"host\":{\"capacity_blocks\":12,") > p2)
		t_fail("kvmmctl --json status:\n%s", out);
	t_assert_eq(td_kvmmctl(d->sock, "metrics", out, sizeof(out)), 0);
	tm_parse(out, &k);
	t_assert_eq(tm_u64(&k, "kvmm_size_tier_capacity_blocks",
			   "size=\"4\",tier=\"host\""),
		    12);
	t_assert_eq(tm_u64(&k, "kvmm_size_tier_capacity_blocks",
			   "size=\"2\",tier=\"host\""),
		    8);
	t_assert_eq(tm_u64(&k, "kvmm_size_tier_capacity_blocks",
			   "size=\"4\",tier=\"nvme\""),
		    11);
	t_assert_eq(tm_u64(&k, "kvmm_size_tier_capacity_blocks",
			   "size=\"2\",tier=\"nvme\""),
		    7);
}

static void weighted(void)
{
	const char *why =
		"it was cut for other shares of the block sizes (--cache-block-pages N:W): formatting it anew";
	struct td_daemon d;

	args[3] = "4:3,2:1";
	cc_start(&d, args);
	/* partition 1 starts at 3 MiB now, in the slots of the equal
	 * cut's partition 1: no superblock there, formatted */
	t_assert_eq(ms_part_line(&d, nvme, 0, 2, why), 1);
	t_assert_eq(ms_part_line(&d, nvme, 0, 2, "recovered") +
			    ms_part_line(&d, nvme, 1, 2, "recovered"),
		    0);
	/* (3 MiB - 4 KiB) / (256 + 4 KiB), (1 MiB - 4 KiB) / (128 + 4) */
	ms_expect_formatted(&d, nvme, 11, 7);
	t_assert_eq(
		ms_log_count(
			&d,
			"cache: blocks of 4 pages (--cache-block-pages, a share of 3/4 of --host-mem and the NVMe file); GPU 2, host 10 of 12 slots, NVMe 10 of 11 slots"),
		1);
	t_assert_eq(
		ms_log_count(
			&d,
			"cache: blocks of 2 pages (--cache-block-pages, a share of 1/4 of --host-mem and the NVMe file); GPU 2, host 6 of 8 slots, NVMe 6 of 7 slots"),
		1);
	expect_slots(&d, 12, 11, 8, 7);
	expect_weights(&d, 3, 1);
	expect_shown(&d);
	publish_and_save(&d);
	expect_cut(3 * MIB, 3 * MIB, 1 * MIB, 3 | 1ull << 16);
	printf("4:3,2:1: host 12 and 8 slots, partitions of 3 and 1 MiB (11 and 7 slots), formatted: other shares\n");

	cc_start(&d, args);
	expect_recovered(&d, 11, 7);
	expect_slots(&d, 12, 11, 8, 7);
	cc_stop(&d);
	printf("4:3,2:1 again: both partitions recovered, read back byte-identical\n");

	args[3] = "2:1,4:3";
	cc_start(&d, args);
	t_assert_eq(
		ms_log_count(
			&d,
			"cache: the NVMe tier's partitions hold blocks of the sizes --cache-block-pages 2:1,4:3 names in the order 4:3,2:1: each size takes its partition"),
		1);
	expect_recovered(&d, 11, 7);
	expect_slots(&d, 12, 11, 8, 7);
	expect_weights(&d, 3, 1); /* the list in the file's order */
	t_assert_eq(td_stop_log(&d, log_buf, sizeof(log_buf)), 0);
	expect_cut(3 * MIB, 3 * MIB, 1 * MIB, 3 | 1ull << 16);
	printf("2:1,4:3: each size on the partition of its blocks, both recovered\n");

	args[3] = "4:1,2:3";
	cc_start(&d, args);
	/* partition 1 starts at 1 MiB, in partition 0's slots */
	t_assert_eq(ms_part_line(&d, nvme, 0, 2, why), 1);
	t_assert_eq(ms_part_line(&d, nvme, 1, 2, "formatted 23 slots"), 1);
	t_assert_eq(ms_part_line(&d, nvme, 0, 2, "recovered") +
			    ms_part_line(&d, nvme, 1, 2, "recovered"),
		    0);
	/* 1 MiB and 3 MiB: (1 MiB - 4 KiB) / (256 + 4), (3 MiB - 4) / 132 */
	expect_slots(&d, 4, 3, 24, 23);
	expect_weights(&d, 1, 3);
	for (uint32_t layers = 1; layers <= 2; layers++) {
		ms_read(d.sock, layers, layers, 0);
		t_assert_eq(res->found, 0);
	}
	cc_stop(&d);
	expect_cut(1 * MIB, 1 * MIB, 3 * MIB, 1 | 3ull << 16);
	printf("4:1,2:3: both partitions formatted (other shares), nothing found\n");
}

/* kvmmd must not start on args: its log's line for partition i of 2,
 * which holds no slot, ends with what. */
static void no_slot(uint32_t i, const char *what)
{
	char line[640];
	struct td_daemon d;

	unlink(nvme);
	t_assert_eq(td_start(&d, args), -ECHILD);
	t_assert(td_read_log(&d, log_buf, sizeof(log_buf)) > 0);
	snprintf(line, sizeof(line), "tier_nvme: %s (partition %u of 2): %s",
		 nvme, i, what);
	if (!strstr(log_buf, line))
		t_fail("no line '%s' in the log", line);
	unlink(d.log);
	rmdir(d.dir);
}

/*
 * A file too small for the cut: the line that refuses the start says
 * the partition's share and the file that gives it a slot.  Each
 * partition is a whole number of units of 4 KiB pages, as many units as
 * the weights' sum, so 1000:999 needs 1999 pages before any partition
 * has a byte; 4:3,2:1 on 384 KiB leaves the 2-page size 96 KiB.  The
 * size it names starts, with a slot in each partition.
 */
static void too_small(void)
{
	struct td_daemon d;

	args[3] = "4:1000,2:999";
	no_slot(0,
		"0 bytes hold no slot of 266240 bytes (its share of the file's 4194304 bytes: 1000 of 1999 units of whole 4 KiB pages, as the block sizes' weights cut it; a file of at least 8187904 bytes gives it a slot)");
	args[3] = "4:3,2:1";
	args[11] = "393216";
	no_slot(1,
		"98304 bytes hold no slot of 135168 bytes (its share of the file's 393216 bytes: 1 of 4 units of whole 4 KiB pages, as the block sizes' weights cut it; a file of at least 557056 bytes gives it a slot)");
	/* 34 pages a unit: 102 pages and 34, one slot each */
	args[11] = "557056";
	unlink(nvme);
	cc_start(&d, args);
	ms_expect_formatted(&d, nvme, 1, 1);
	cc_stop(&d);
	args[11] = "4194304";
	printf("a file too small for the cut: the refusal says the share and the file that holds a slot\n");
}

int main(void)
{
	ms_res_init();
	cc_nvme_path(nvme, sizeof(nvme), "multi-size-share");
	if (!t_nvme_usable(nvme))
		t_skip("no O_DIRECT io_uring I/O in %s", nvme);
	unlink(nvme);
	equal_cut();
	weighted();
	too_small();
	unlink(nvme);
	return 0;
}
