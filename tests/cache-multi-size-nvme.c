// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * With several block sizes named (--cache-block-pages 4,2) and
 * --nvme-path, each size has its own NVMe tier, in its own partition of
 * the one file (half of --nvme-size each: 7 slots of 256 KiB blocks, 15
 * of 128 KiB ones), where only the first size had one:
 *   1. both partitions formatted at start (a log line each, naming the
 *      partition); TIER_STATS of one size shows that size's NVMe tier,
 *      the sum both; a stop with --nvme-save-on-stop saves both sizes'
 *      blocks;
 *   2. a restart with the same sizes recovers both partitions' blocks,
 *      each size's its own (TIER_STATS of each size, and the log), all
 *      cold until read back from NVMe byte-identical, which takes them
 *      in (each size's cold_admitted, kvmm_size_cold_*, and kvmmctl
 *      status' recovered line and cold keys in each size's block: the
 *      4-page size's 2 taken in while the 2-page size's 2 are still
 *      cold); blocks of each size pushed out of
 *      the GPU and host tiers go down to their size's partition and come
 *      back from it byte-identical; kvmmctl status shows each size's
 *      NVMe tier, kvmmctl metrics each size's NVMe families;
 *      kvmmctl cache-drop drops both sizes' NVMe blocks and
 *      marks both partitions;
 *   3. the next restart recovers nothing (both drop marks held);
 *   3b. the sizes named in the other order (2,4): the size partition 0
 *      holds is put first, both partitions recovered and read back;
 *   4. a restart with one size (4): the file is its whole, the
 *      partitioned superblock at its start is formatted anew, though its
 *      blocks have the same size: nothing recovered nor served;
 *   5. and back to 4,2: the file of one size is cut anew, both
 *      partitions formatted: nothing of the one-size run is served;
 *   6. every host -> NVMe write failing: the 2-page size's demotions
 *      take its partition out of service for writes (its TIER_STATS),
 *      the 4-page size's still takes them; the sums say so (TIER_STATS,
 *      kvmmctl status, kvmmctl metrics' kvmm_cache_nvme_write_error),
 *      and the 2-page size's own families (kvmm_size_nvme_write_*);
 *      the blocks whose writes failed read back from host memory; the
 *      4-page size's partition out too, the sums add both outs;
 *   7. --nvme-path in a directory that is not there at start: both
 *      sizes' TIER_STATS say ENOENT; the directory made, the first
 *      size's retries claim the file and both partitions join their
 *      caches (7 and 15 slots), where blocks of each size then go down
 *      and come back from NVMe byte-identical;
 *   8. a drop of the 2-page size alone (kvmmctl cache-drop --block-pages
 *      2, ABI 1.22): its NVMe blocks dropped and its partition marked,
 *      the 4-page size's blocks read back from NVMe byte-identical, in
 *      the run and after a restart that recovers none of the 2-page
 *      size's; ADMIN_TENANTS of each size counts the uid's recovered
 *      (cold) NVMe blocks of that size alone;
 *   8b. the same drop keeping one of the 2-page size's NVMe blocks (a
 *      pin): its header written again above that size's mark, which the
 *      reply, that size's kvmm_size_nvme_restamped_total (1, the 4-page
 *      size's 0) and kvmmctl status' restamp line and keys in that
 *      size's block alone say, and the restart recovers it there;
 *   9. partition 0's open failing once after a late claim
 *      (KVMMD_TEST_NVME_OPEN_FAIL=1): the 2-page size's partition opens
 *      first and makes the file's start name the cut; partition 0
 *      joins later keeping that layout, and a restart recovers both
 *      sizes' blocks;
 *  10. the first size replaced (4,2 then 8,2): partition 0 formatted,
 *      keeping the layout id, the 2-page size's blocks recovered and
 *      read back from NVMe.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT io_uring).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cache-multi-size-common.h"
#include "tests/lib/metrics.h"
#include "tests/lib/nvme_probe.h"

#define NVME_SIZE "4194304" /* 2 MiB a partition */
#define SLOTS_4 7 /* (2 MiB - 4 KiB) / (256 + 4 KiB) */
#define SLOTS_2 15 /* (2 MiB - 4 KiB) / (128 + 4 KiB) */

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
			      NVME_SIZE,
			      "--nvme-save-on-stop",
			      "5000",
			      NULL };

/* kvmmd stopped cleanly; its whole log kept in stop_log. */
static char stop_log[1 << 17];

static void stop_keep_log(struct td_daemon *d)
{
	t_assert_eq(td_stop_log(d, stop_log, sizeof(stop_log)), 0);
}

/* kvmmctl status' line (from "\n"), in the block of size pages when
 * given, else in the sums above the sizes' blocks. */
static bool status_has(const char *out, int pages, const char *line)
{
	char head[32];
	const char *from = out, *to = strstr(out, "\nsize ");
	const char *p;

	if (pages) {
		snprintf(head, sizeof(head), "\nsize %-7d", pages);
		from = strstr(out, head);
		t_assert(from != NULL);
		to = strstr(from + 1, "\nsize ");
	}
	p = strstr(from, line);
	return p && (!to || p < to);
}

static void fresh_and_save(void)
{
	struct kvmm_tier_stats_reply a, b, sum;
	struct td_daemon d;

	cc_start(&d, args);
	ms_expect_formatted(&d, nvme, 7, 15);
	for (uint32_t layers = 1; layers <= 2; layers++) {
		ms_write(d.sock, layers, 0);
		t_assert_eq(res->status, 0);
		t_assert_eq(res->published, NB);
	}
	/* each size its own NVMe tier (no longer 0/0 for the second) */
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.tiers[2].capacity_blocks, SLOTS_4);
	t_assert_eq(b.tiers[2].capacity_blocks, SLOTS_2);
	t_assert_eq(a.tiers[2].block_bytes, 4 * CC_PAGE);
	t_assert_eq(b.tiers[2].block_bytes, 2 * CC_PAGE);
	t_assert_eq(a.nvme_open_error, 0);
	t_assert_eq(b.nvme_open_error, 0);
	cc_settled_stats(d.sock, &sum);
	t_assert_eq(sum.tiers[2].capacity_blocks, SLOTS_4 + SLOTS_2);
	stop_keep_log(&d);
	/* both sizes' blocks saved, each in its partition */
	t_assert_eq(
		t_count(stop_log,
			"cache: stopping: moving 2 GPU and 0 host blocks to NVMe"),
		2);
	t_assert_eq(t_count(stop_log,
			    "cache: stopping: 2 blocks written to NVMe in"),
		    2);
	printf("fresh: two partitions formatted, both sizes' blocks saved\n");
}

/*
 * kvmmctl status (text and --json) after the 4-page size's recovered
 * blocks were read back and the 2-page size's not yet: each size's
 * block has its own recovered line and cold keys, the sums' add both
 * (until 7 December a size's block had neither, and an operator with
 * two models could not tell whose saved blocks were used).
 */
static void status_cold_per_size(const char *sock)
{
	static char out[1 << 15];
	const char *p2, *p4;

	t_assert_eq(td_kvmmctl(sock, "status", out, sizeof(out)), 0);
	if (!status_has(
		    out, 0,
		    "\n             recovered: 2 still cold, 2 taken in (an open or a pin), 0 evicted unused, 0 dropped unused\n") ||
	    !status_has(
		    out, 4,
		    "\n               recovered: 0 still cold, 2 taken in (an open or a pin), 0 evicted unused, 0 dropped unused\n") ||
	    !status_has(
		    out, 2,
		    "\n               recovered: 2 still cold, 0 taken in (an open or a pin), 0 evicted unused, 0 dropped unused\n"))
		t_fail("kvmmctl status:\n%s", out);
	t_assert_eq(td_kvmmctl(sock, "--json status", out, sizeof(out)), 0);
	p4 = strstr(out, "{\"block_pages\":4,");
	p2 = strstr(out, "{\"block_pages\":2,");
	if (!p2 || !p4 || p4 > p2 ||
	    !strstr(out,
		    "\"cold_blocks\":2,\"cold_admitted\":2,\"cold_evicted\":0,\"cold_dropped\":0,") ||
	    !strstr(p2,
		    "\"cold_blocks\":2,\"cold_admitted\":0,\"cold_evicted\":0,\"cold_dropped\":0,") ||
	    !strstr(p4,
		    "\"cold_blocks\":0,\"cold_admitted\":2,\"cold_evicted\":0,\"cold_dropped\":0,") ||
	    strstr(p4, "\"cold_blocks\":0,") > p2)
		t_fail("kvmmctl --json status:\n%s", out);
}

static void restart_recovers_both(void)
{
	struct kvmm_tier_stats_reply a, b, sum;
	struct kvmm_admin_cache_drop_reply dr;
	static char out[8192];
	struct td_daemon d;

	cc_start(&d, args);
	t_assert_eq(ms_part_line(&d, nvme, 0, 2, "recovered 2 of 7 slots"), 1);
	t_assert_eq(ms_part_line(&d, nvme, 1, 2, "recovered 2 of 15 slots"), 1);
	t_assert_eq(ms_log_count(&d, "formatted"), 0);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.recovered_blocks, NB);
	t_assert_eq(b.recovered_blocks, NB);
	t_assert_eq(a.tiers[2].used_blocks, NB);
	t_assert_eq(b.tiers[2].used_blocks, NB);
	/* all cold, each size's and the sum (ABI 1.24) */
	t_assert_eq(a.cold_blocks, NB);
	t_assert_eq(b.cold_blocks, NB);
	t_assert_eq(a.cold_admitted + b.cold_admitted, 0);
	cc_settled_stats(d.sock, &sum);
	t_assert_eq(sum.recovered_blocks, 2 * NB);
	t_assert_eq(sum.cold_blocks, 2 * NB);
	/* each from its own partition, every byte the writer's; the
	 * 4-page size's read first, kvmmctl status then tells the sizes
	 * apart: its blocks taken in, the 2-page size's still cold */
	ms_expect_read(d.sock, 2, 0, 2);
	status_cold_per_size(d.sock);
	ms_expect_read(d.sock, 1, 0, 2);
	/* the reads took them in, each in its size */
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.cold_blocks, 0);
	t_assert_eq(a.cold_admitted, NB);
	t_assert_eq(b.cold_blocks, 0);
	t_assert_eq(b.cold_admitted, NB);
	/* a size's blocks are not the other's */
	ms_read(d.sock, 2, 1, 0);
	t_assert_eq(res->found, 0);

	/*
	 * Demotion: GPU 2 and host 6 blocks of 4 pages, GPU 2 and host 14
	 * of 2 pages; contents 1..N written past both, content 1 (the
	 * least recently used after content 0, read above) goes down to
	 * NVMe, and comes back from it.
	 */
	for (int k = 1; k <= 5; k++) {
		ms_write(d.sock, 2, k);
		t_assert_eq(res->published, NB);
	}
	for (int k = 1; k <= 9; k++) {
		ms_write(d.sock, 1, k);
		t_assert_eq(res->published, NB);
	}
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.tiers[2].demotions_in, 2 * NB);
	t_assert_eq(b.tiers[2].demotions_in, 2 * NB);
	t_assert_eq(a.tiers[2].used_blocks, 2 * NB);
	t_assert_eq(b.tiers[2].used_blocks, 2 * NB);
	ms_expect_read(d.sock, 2, 1, 2);
	ms_expect_read(d.sock, 1, 1, 2);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.tiers[2].hits, 2 * NB);
	t_assert_eq(b.tiers[2].hits, 2 * NB);

	/*
	 * kvmmctl status: each size's NVMe tier, and their sum.  The
	 * restore of content 1 pushed the GPU's last content down to host
	 * and content 2 on to NVMe: contents 0 and 2 there (4 blocks), in
	 * 6 (content 0 twice), out 4 (contents 0 and 1).
	 */
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (!strstr(out, "\ntier nvme    8/22 blocks, 8 hits, 12 in, 8 out") ||
	    !strstr(out, "\n  tier nvme    4/7 blocks, 4 hits, 6 in, 4 out") ||
	    !strstr(out, "\n  tier nvme    4/15 blocks, 4 hits, 6 in, 4 out"))
		t_fail("kvmmctl status:\n%s", out);

	/* kvmmctl metrics: each size's NVMe partition */
	{
		static struct tm_expo k;
		static char mout[1 << 17];

		t_assert_eq(td_kvmmctl(d.sock, "metrics", mout, sizeof(mout)),
			    0);
		tm_parse(mout, &k);
		t_assert_eq(tm_u64(&k, "kvmm_size_tier_capacity_blocks",
				   "size=\"4\",tier=\"nvme\""),
			    SLOTS_4);
		t_assert_eq(tm_u64(&k, "kvmm_size_tier_capacity_blocks",
				   "size=\"2\",tier=\"nvme\""),
			    SLOTS_2);
		t_assert_eq(tm_u64(&k, "kvmm_size_tier_used_blocks",
				   "size=\"2\",tier=\"nvme\""),
			    2 * NB);
		/* the recovered blocks, each size's taken in (ABI 1.24) */
		t_assert_eq(tm_u64(&k, "kvmm_cache_cold_admitted_total", NULL),
			    2 * NB);
		t_assert_eq(tm_u64(&k, "kvmm_size_cold_admitted_total",
				   "size=\"2\""),
			    NB);
		t_assert_eq(tm_u64(&k, "kvmm_size_cold_admitted_total",
				   "size=\"4\""),
			    NB);
		t_assert_eq(tm_u64(&k, "kvmm_size_cold_blocks", "size=\"2\""),
			    0);
	}

	/* a drop of every tier: both partitions' blocks and marks */
	dr = cd_kvmmctl(d.sock, "");
	t_assert_eq(dr.dropped[2], 4 * NB);
	t_assert_eq(dr.nvme_invalidate_failures, 0);
	/* two marks, one a partition: neither's generation alone (until 7
	 * December the line named the last size's as the drop's) */
	t_assert_eq(ms_log_count(&d, "NVMe slots below generation"), 0);
	t_assert_eq(
		ms_log_count(
			&d,
			"NVMe slots below each partition's drop mark dropped on disk (2 partitions)"),
		1);
	cc_stop(&d);
	printf("restart: both partitions recovered, demoted to, read back, dropped\n");
}

static void restart_after_drop(void)
{
	struct kvmm_tier_stats_reply a, b;
	struct td_daemon d;

	cc_start(&d, args);
	t_assert_eq(ms_part_line(&d, nvme, 0, 2, "recovered 0 of 7 slots"), 1);
	t_assert_eq(ms_part_line(&d, nvme, 1, 2, "recovered 0 of 15 slots"), 1);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.recovered_blocks, 0);
	t_assert_eq(b.recovered_blocks, 0);
	for (uint32_t layers = 1; layers <= 2; layers++)
		for (int k = 0; k < 2; k++) {
			ms_read(d.sock, layers, layers, k);
			t_assert_eq(res->found, 0);
		}
	/* blocks for the next run to find (or not) */
	ms_write(d.sock, 2, 7);
	t_assert_eq(res->published, NB);
	ms_write(d.sock, 1, 7);
	t_assert_eq(res->published, NB);
	cc_stop(&d);
	printf("after a drop: both partitions' marks held\n");
}

/* The sizes named in the other order: the one partition 0 holds is put
 * first, and both partitions are recovered. */
static void other_order(void)
{
	struct td_daemon d;

	args[3] = "2,4";
	cc_start(&d, args);
	t_assert_eq(
		ms_log_count(
			&d,
			"cache: the NVMe tier's blocks from the last run have 4 pages, a size --cache-block-pages names: the tier is that size's"),
		1);
	t_assert_eq(ms_part_line(&d, nvme, 0, 2, "recovered 2 of 7 slots"), 1);
	t_assert_eq(ms_part_line(&d, nvme, 1, 2, "recovered 2 of 15 slots"), 1);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	ms_expect_read(d.sock, 2, 7, 2);
	ms_expect_read(d.sock, 1, 7, 2);
	cc_stop(&d);
	args[3] = "4,2";
	printf("other order: both partitions recovered\n");
}

static void one_size_and_back(void)
{
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	char line[512];

	/* one size, the first partition's: the file is its whole */
	args[3] = "4";
	cc_start(&d, args);
	snprintf(
		line, sizeof(line),
		"tier_nvme: %s: it was cut in partitions for several block sizes: formatting it anew",
		nvme);
	t_assert_eq(ms_log_count(&d, line), 1);
	snprintf(line, sizeof(line),
		 "tier_nvme: %s: formatted 15 slots of 266240 bytes", nvme);
	t_assert_eq(ms_log_count(&d, line), 1);
	t_assert_eq(cd_recovered(d.sock), 0);
	ms_read(d.sock, 2, 2, 7);
	t_assert_eq(res->found, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].capacity_blocks, 15);
	/* 5 contents: all in the file at the stop, up to its end */
	for (int k = 8; k < 13; k++) {
		ms_write(d.sock, 2, k);
		t_assert_eq(res->published, NB);
	}
	cc_stop(&d);

	/* back to two: cut anew, nothing of the one-size run served */
	args[3] = "4,2";
	cc_start(&d, args);
	t_assert_eq(
		ms_part_line(
			&d, nvme, 0, 2,
			"it was not cut for this list of block sizes and --nvme-size: formatting it anew"),
		1);
	t_assert_eq(ms_part_line(&d, nvme, 0, 2, "formatted 7 slots"), 1);
	t_assert_eq(ms_part_line(&d, nvme, 1, 2, "formatted 15 slots"), 1);
	t_assert_eq(cd_recovered(d.sock), 0);
	for (int k = 8; k < 13; k++) {
		ms_read(d.sock, 2, 2, k);
		t_assert_eq(res->found, 0);
	}
	cc_stop(&d);
	printf("one size and back: formatted each time, nothing misread\n");
}

/* Wait (at most 15 s) for both sizes' partitions to join. */
static void wait_both_joined(const char *sock)
{
	struct kvmm_tier_stats_reply a, b;
	uint64_t t0 = cc_now_ms();

	for (;;) {
		ms_size_stats(sock, 4, &a);
		ms_size_stats(sock, 2, &b);
		if (a.tiers[2].capacity_blocks && b.tiers[2].capacity_blocks)
			break;
		if (cc_now_ms() - t0 > 15000)
			t_fail("not joined in 15 s: errors %llu and %llu",
			       (unsigned long long)a.nvme_open_error,
			       (unsigned long long)b.nvme_open_error);
		usleep(50000);
	}
	t_assert_eq(a.tiers[2].capacity_blocks, SLOTS_4);
	t_assert_eq(b.tiers[2].capacity_blocks, SLOTS_2);
	t_assert_eq(a.nvme_open_error, 0);
	t_assert_eq(b.nvme_open_error, 0);
}

/*
 * The end of a run on a file in a directory of its own: both sizes'
 * content 0 read back byte-identical, kvmmd stopped, the file and the
 * directory removed, --nvme-path back to the usual file.
 */
static void end_in_dir(struct td_daemon *d, const char *dir, const char *file)
{
	ms_expect_read(d->sock, 2, 0, 2);
	ms_expect_read(d->sock, 1, 0, 2);
	cc_stop(d);
	args[9] = nvme;
	unlink(file);
	rmdir(dir);
}

static void join_late(void)
{
	struct kvmm_tier_stats_reply a, b;
	char dir[300], file[320];
	struct td_daemon d;

	snprintf(dir, sizeof(dir), "%s.d", nvme);
	snprintf(file, sizeof(file), "%s/tier", dir);
	args[9] = file;
	cc_start_with_delay(&d, args, "KVMMD_TEST_CACHE_RETRY_MS", 100);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.nvme_open_error, ENOENT);
	t_assert_eq(b.nvme_open_error, ENOENT);
	t_assert_eq(b.tiers[2].capacity_blocks, 0);
	t_ok(mkdir(dir, 0700));
	wait_both_joined(d.sock);
	for (int ppb = 2; ppb <= 4; ppb += 2) {
		char line[512];

		snprintf(
			line, sizeof(line),
			"cache: the NVMe tier %s (the partition of blocks of %d pages) opened at attempt",
			file, ppb);
		t_assert_eq(ms_log_count(&d, line), 1);
	}
	/* each size's blocks down to its partition and back */
	for (int k = 0; k <= 4; k++) {
		ms_write(d.sock, 2, k);
		t_assert_eq(res->published, NB);
	}
	for (int k = 0; k <= 8; k++) {
		ms_write(d.sock, 1, k);
		t_assert_eq(res->published, NB);
	}
	end_in_dir(&d, dir, file);
	printf("late join: both partitions joined their caches\n");
}

/*
 * Every host -> NVMe write failing (KVMMD_TEST_MIGRATE_FAIL, counted by
 * each size's engine): the 2-page size's demotions take its partition
 * out of service for writes, and TIER_STATS of that size says so; the
 * 4-page size's partition, whose writes have not run, still takes
 * writes.  The sums say it too, the all-sizes TIER_STATS, kvmmctl
 * status and the metrics (until 6 December they kept the first size's
 * error, 0 here).  Then the 4-page size's demotions take its partition
 * out too, and the sums add both sizes' outs.
 */
static void write_failures_per_size(void)
{
	struct kvmm_tier_stats_reply a, b, sum;
	static char out[1 << 15];
	static struct tm_expo k;
	static char mout[1 << 17];
	const char *p2, *p4;
	struct td_daemon d;

	unlink(nvme);
	setenv("KVMMD_TEST_MIGRATE_FAIL", "host-nvme:1+", 1);
	cc_start(&d, args);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	for (int c = 0; c <= 8; c++) {
		ms_write(d.sock, 1, c);
		t_assert_eq(res->published, NB);
	}
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(b.nvme_write_error, EIO);
	t_assert_eq(b.nvme_write_outs, 1);
	t_assert(b.nvme_write_returns >= 1);
	t_assert_eq(b.tiers[2].used_blocks, 0);
	t_assert_eq(a.nvme_write_error, 0);
	t_assert_eq(a.nvme_write_outs, 0);
	t_assert_eq(a.nvme_write_returns, 0);
	/* the sums: the second size's partition out shows there */
	cc_settled_stats(d.sock, &sum);
	t_assert_eq(sum.nvme_write_error, EIO);
	t_assert_eq(sum.nvme_write_outs, 1);
	t_assert_eq(sum.nvme_write_returns, b.nvme_write_returns);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (!status_has(
		    out, 0,
		    "\ntier nvme    OUT of service for writes: Input/output error (writes failed in a row; out 1 times;") ||
	    !status_has(
		    out, 2,
		    "\n  tier nvme    OUT of service for writes: Input/output error") ||
	    status_has(out, 4, "\n  tier nvme    OUT of service"))
		t_fail("kvmmctl status:\n%s", out);
	t_assert_eq(td_kvmmctl(d.sock, "--json status", out, sizeof(out)), 0);
	p2 = strstr(out, "{\"block_pages\":2,");
	p4 = strstr(out, "{\"block_pages\":4,");
	if (!p2 || !p4 || p4 > p2 ||
	    !strstr(out, "\"nvme_write_outs\":1,\"nvme_write_error\":5,") ||
	    !strstr(p2, "\"nvme_write_error\":5,\"nvme_write_outs\":1,") ||
	    !strstr(p4, "\"nvme_write_error\":0,\"nvme_write_outs\":0,") ||
	    strstr(p4, "\"nvme_write_error\":0,\"nvme_write_outs\":0,") > p2)
		t_fail("kvmmctl --json status:\n%s", out);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", mout, sizeof(mout)), 0);
	tm_parse(mout, &k);
	t_assert_eq(tm_u64(&k, "kvmm_cache_nvme_write_error", NULL), EIO);
	t_assert_eq(tm_u64(&k, "kvmm_cache_nvme_write_outs_total", NULL), 1);
	/* and each size's families whose partition it is */
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_write_error", "size=\"2\""),
		    EIO);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_write_error", "size=\"4\""), 0);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_write_outs_total", "size=\"2\""),
		    1);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_write_outs_total", "size=\"4\""),
		    0);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_write_returns_total",
			   "size=\"2\""),
		    b.nvme_write_returns);
	/* what is still cached reads back byte-identical, none from NVMe
	 * (the blocks whose writes failed went back to host memory; the
	 * policy dropped host victims once the partition was out) */
	ms_expect_read(d.sock, 1, 8, 0);
	for (int c = 0; c < 4; c++) {
		ms_read(d.sock, 1, 1, c);
		t_assert_eq(res->from[2], 0);
	}
	t_assert(b.tiers[1].drops >= 1);

	/* the first size's partition out too: both outs in the sums */
	for (int c = 0; c <= 4; c++) {
		ms_write(d.sock, 2, c);
		t_assert_eq(res->published, NB);
	}
	ms_size_stats(d.sock, 4, &a);
	t_assert_eq(a.nvme_write_error, EIO);
	t_assert_eq(a.nvme_write_outs, 1);
	t_assert_eq(a.tiers[2].used_blocks, 0);
	cc_settled_stats(d.sock, &sum);
	t_assert_eq(sum.nvme_write_error, EIO);
	t_assert_eq(sum.nvme_write_outs, 2);
	cc_stop(&d);
	unlink(nvme);
	printf("write failures: one size's partition out of service, the other's not, the sums say it\n");
}

/* The test uid's NVMe blocks in ADMIN_TENANTS of one size (0: the sums,
 * ABI 1.22). */
static uint64_t tenant_nvme(const char *sock, uint32_t block_pages)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_admin_tenants_req q = { .size = sizeof(q),
					    .block_pages = block_pages };
	struct kvmm_tenants_reply *r = (void *)buf;
	struct kvmm_conn *c;

	t_ok(kc_connect_admin(sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_TENANTS, block_pages ? &q : NULL,
			block_pages ? sizeof(q) : 0, buf, sizeof(buf), NULL));
	kvmm_disconnect(c);
	for (uint32_t i = 0; i < r->nr; i++)
		if (r->tenants[i].id == (uint32_t)getuid())
			return r->tenants[i].cached_blocks[2];
	return 0;
}

/*
 * A drop of one size (ABI 1.22, kvmmctl cache-drop --block-pages 2)
 * takes that size's NVMe blocks and marks its partition alone: the
 * other size's blocks are read back from NVMe byte-identical, in this
 * run and after a restart, which recovers nothing of the dropped size.
 */
static void drop_one_partition(void)
{
	struct kvmm_tier_stats_reply a, b;
	static char out[8192];
	struct td_daemon d;
	char cmd[64];

	unlink(nvme);
	cc_start(&d, args);
	ms_write(d.sock, 2, 0);
	ms_write(d.sock, 1, 0);
	cc_stop(&d); /* both saved to their partitions */
	cc_start(&d, args);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.tiers[2].used_blocks, NB);
	t_assert_eq(b.tiers[2].used_blocks, NB);
	/* the recovered blocks, cold, charged to the uid in each size */
	t_assert_eq(tenant_nvme(d.sock, 4), NB);
	t_assert_eq(tenant_nvme(d.sock, 2), NB);
	t_assert_eq(tenant_nvme(d.sock, 0), 2 * NB);
	/* a tenant limit holds for each size apart: NB on NVMe keeps each
	 * size's NB cold blocks (the other size's do not count) */
	snprintf(cmd, sizeof(cmd), "tenant-limit %u nvme:%d", getuid(), NB);
	t_assert_eq(td_kvmmctl(d.sock, cmd, out, sizeof(out)), 0);
	t_assert_eq(tenant_nvme(d.sock, 4), NB);
	t_assert_eq(tenant_nvme(d.sock, 2), NB);
	snprintf(cmd, sizeof(cmd), "tenant-limit %u none", getuid());
	t_assert_eq(td_kvmmctl(d.sock, cmd, out, sizeof(out)), 0);
	t_assert_eq(td_kvmmctl(d.sock, "--json cache-drop --block-pages 2", out,
			       sizeof(out)),
		    0);
	if (!strstr(out, "\"dropped\":{\"gpu\":0,\"host\":0,\"nvme\":2}") ||
	    !strstr(out,
		    "\"sizes\":[{\"block_pages\":2,\"dropped\":{\"gpu\":0,\"host\":0,\"nvme\":2}") ||
	    strstr(out, "\"block_pages\":4"))
		t_fail("kvmmctl --json cache-drop --block-pages 2:\n%s", out);
	t_assert_eq(
		ms_log_count(
			&d,
			"of blocks of 2 pages: dropped gpu 0, host 0, nvme 2 blocks"),
		1);
	t_assert_eq(ms_log_count(&d, "NVMe slots below generation"), 1);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.tiers[2].used_blocks, NB);
	t_assert_eq(b.tiers[2].used_blocks, 0);
	t_assert_eq(tenant_nvme(d.sock, 2), 0);
	t_assert_eq(tenant_nvme(d.sock, 4), NB);
	ms_expect_read(d.sock, 2, 0, 2); /* from NVMe, byte-identical */
	ms_read(d.sock, 1, 1, 0);
	t_assert_eq(res->found, 0);
	cc_stop(&d);

	/* the dropped size's mark holds, the other's blocks come back */
	cc_start(&d, args);
	t_assert_eq(ms_part_line(&d, nvme, 1, 2, "recovered 0 of 15 slots"), 1);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert(a.recovered_blocks >= NB);
	t_assert_eq(b.recovered_blocks, 0);
	ms_expect_read(d.sock, 2, 0, 2);
	ms_read(d.sock, 1, 1, 0);
	t_assert_eq(res->found, 0);
	cc_stop(&d);
	unlink(nvme);
	printf("drop of one size: its partition dropped and marked, the other's blocks read back\n");
}

/*
 * A drop of one size that keeps one of its NVMe blocks (a client's pin):
 * the kept block's header is written again above that size's mark (ABI
 * 1.23), which the reply and that size's own families say
 * (kvmm_size_nvme_restamped_total{size="2"} 1, the other size's 0), and
 * the restart recovers it in the dropped size's partition.
 */
static void drop_keeps_pinned_per_size(void)
{
	struct kvmm_tier_stats_reply a, b;
	static struct tm_expo k;
	static char mout[1 << 17];
	static char out[8192];
	static char sout[1 << 15];
	const char *p2, *p4;
	struct kvmm_pin_opts po;
	struct kvmm_conn *pin;
	struct td_daemon d;
	uint64_t h[NB];

	unlink(nvme);
	cc_start(&d, args);
	ms_write(d.sock, 2, 0);
	/* the 2-page size's content 0 pushed down to NVMe in this run (a
	 * block recovered at start is not in the policy until used, and
	 * a pin does not find it) */
	for (int c = 0; c <= 8; c++)
		ms_write(d.sock, 1, c);
	ms_size_stats(d.sock, 2, &b);
	t_assert(b.tiers[2].used_blocks >= NB);
	pin = cc_connect_lib(d.sock, "pinner");
	ms_hashes(1, 0, h);
	t_ok(cc_pin(pin, h[0], 0, 0, 0, &po));
	t_assert_eq(td_kvmmctl(d.sock, "--json cache-drop --block-pages 2", out,
			       sizeof(out)),
		    0);
	if (!strstr(out, "\"kept\":{\"gpu\":0,\"host\":0,\"nvme\":1}}],") ||
	    !strstr(out, "\"nvme_restamped\":1,\"nvme_restamp_failures\":0,"))
		t_fail("kvmmctl --json cache-drop --block-pages 2:\n%s", out);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(b.nvme_restamped, 1);
	t_assert_eq(a.nvme_restamped, 0);
	/* kvmmctl status: the sums' line, and the 2-page size's alone */
	t_assert_eq(td_kvmmctl(d.sock, "status", sout, sizeof(sout)), 0);
	if (!status_has(
		    sout, 0,
		    "\n             1 kept NVMe blocks restamped above a drop mark, 0 not (") ||
	    !status_has(
		    sout, 2,
		    "\n               1 kept NVMe blocks restamped above a drop mark, 0 not (") ||
	    status_has(sout, 4, "kept NVMe blocks restamped"))
		t_fail("kvmmctl status:\n%s", sout);
	t_assert_eq(td_kvmmctl(d.sock, "--json status", sout, sizeof(sout)), 0);
	p4 = strstr(sout, "{\"block_pages\":4,");
	p2 = strstr(sout, "{\"block_pages\":2,");
	if (!p2 || !p4 || p4 > p2 ||
	    !strstr(sout,
		    "\"nvme_restamped\":1,\"nvme_restamp_failures\":0,") ||
	    !strstr(p2, "\"nvme_restamped\":1,\"nvme_restamp_failures\":0,") ||
	    !strstr(p4, "\"nvme_restamped\":0,\"nvme_restamp_failures\":0,") ||
	    strstr(p4, "\"nvme_restamped\":0,") > p2)
		t_fail("kvmmctl --json status:\n%s", sout);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", mout, sizeof(mout)), 0);
	tm_parse(mout, &k);
	t_assert_eq(tm_u64(&k, "kvmm_cache_nvme_restamped_total", NULL), 1);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_restamped_total", "size=\"2\""),
		    1);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_restamped_total", "size=\"4\""),
		    0);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_restamp_failures_total",
			   "size=\"2\""),
		    0);
	kvmm_disconnect(pin);
	cc_stop(&d);

	/* the kept block alone comes back in the 2-page size's partition */
	cc_start(&d, args);
	t_assert_eq(ms_part_line(&d, nvme, 1, 2, "recovered 1 of 15 slots"), 1);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(b.recovered_blocks, 1);
	ms_read(d.sock, 1, 1, 0); /* its first block, from NVMe, checked */
	t_assert_eq(res->found, 1);
	t_assert_eq(res->from[2], 1);
	cc_stop(&d);
	unlink(nvme);
	printf("drop of one size keeping a pinned NVMe block: restamped in that size's families, recovered\n");
}

/*
 * Partition 0's tier not open while the 2-page size's partition opens:
 * the file's directory made after the start, the first size's open of
 * it failing once (KVMMD_TEST_NVME_OPEN_FAIL=1), the later partition's
 * attempt runs then.  It takes the layout id the file's start names,
 * written there by it ("partition 0's tier is not open"); partition 0
 * joins at its next attempt (formatted, keeping the id), and a restart
 * recovers both sizes' blocks (until 6 December the later partition had
 * layout id 0 then and was formatted at the next start).
 */
static void partition_zero_late(void)
{
	char dir[300], file[320], line[512];
	struct td_daemon d;

	snprintf(dir, sizeof(dir), "%s.d", nvme);
	snprintf(file, sizeof(file), "%s/tier", dir);
	args[9] = file;
	setenv("KVMMD_TEST_NVME_OPEN_FAIL", "1", 1);
	cc_start_with_delay(&d, args, "KVMMD_TEST_CACHE_RETRY_MS", 100);
	unsetenv("KVMMD_TEST_NVME_OPEN_FAIL");
	t_ok(mkdir(dir, 0700));
	wait_both_joined(d.sock);
	/* the knob's failure, once, after the claim (attempt 2, or later
	 * on a loaded machine whose mkdir came after the 100 ms wait) */
	t_assert_eq(ms_log_count(&d, "): Input/output error; the cache runs"),
		    1);
	snprintf(
		line, sizeof(line),
		"cache: the NVMe tier %s (the partition of blocks of 4 pages) cannot open (attempt",
		file);
	t_assert(ms_log_count(&d, line) >= 2);
	snprintf(
		line, sizeof(line),
		"tier_nvme: %s (partition 1 of 2): partition 0's tier is not open: the file's start now names this cut of it in 2 partitions",
		file);
	t_assert_eq(ms_log_count(&d, line), 1);
	snprintf(
		line, sizeof(line),
		"tier_nvme: %s (partition 0 of 2): it holds no slot yet, only the partitions' layout: formatting it",
		file);
	t_assert_eq(ms_log_count(&d, line), 1);
	ms_write(d.sock, 2, 0);
	t_assert_eq(res->published, NB);
	ms_write(d.sock, 1, 0);
	t_assert_eq(res->published, NB);
	cc_stop(&d); /* both saved to their partitions */

	cc_start(&d, args);
	snprintf(line, sizeof(line),
		 "tier_nvme: %s (partition 1 of 2): recovered 2 of 15 slots",
		 file);
	t_assert_eq(ms_log_count(&d, line), 1);
	snprintf(line, sizeof(line),
		 "tier_nvme: %s (partition 0 of 2): recovered 2 of 7 slots",
		 file);
	t_assert_eq(ms_log_count(&d, line), 1);
	t_assert_eq(ms_log_count(&d, "is not open"), 0);
	end_in_dir(&d, dir, file);
	printf("partition 0 late: the later partition's blocks recovered at the restart\n");
}

/*
 * The first size replaced (4,2, then 8,2): partition 0 is formatted for
 * the new size and keeps the file's layout id, since the file is cut
 * as before, so the 2-page size's blocks are recovered (until 6
 * December partition 0 drew a new id and partition 1 was formatted
 * too).
 */
static void first_size_replaced(void)
{
	struct td_daemon d;

	unlink(nvme);
	cc_start(&d, args);
	ms_write(d.sock, 2, 0);
	t_assert_eq(res->published, NB);
	ms_write(d.sock, 1, 0);
	t_assert_eq(res->published, NB);
	cc_stop(&d); /* both saved to their partitions */
	args[3] = "8,2";
	cc_start(&d, args);
	t_assert_eq(
		ms_part_line(
			&d, nvme, 0, 2,
			"its blocks have 262144 bytes, the tier's 524288: formatting it anew"),
		1);
	t_assert_eq(ms_part_line(&d, nvme, 1, 2, "recovered 2 of 15 slots"), 1);
	ms_expect_read(d.sock, 1, 0, 2);
	cc_stop(&d);
	args[3] = "4,2";
	unlink(nvme);
	printf("first size replaced: the other size's partition recovered\n");
}

int main(void)
{
	ms_res_init();
	cc_nvme_path(nvme, sizeof(nvme), "multi-size-nvme");
	if (!t_nvme_usable(nvme))
		t_skip("no O_DIRECT io_uring I/O in %s", nvme);
	unlink(nvme);
	fresh_and_save();
	restart_recovers_both();
	restart_after_drop();
	other_order();
	one_size_and_back();
	unlink(nvme);
	write_failures_per_size();
	join_late();
	drop_one_partition();
	drop_keeps_pinned_per_size();
	partition_zero_late();
	first_size_replaced();
	return 0;
}
