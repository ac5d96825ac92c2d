// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * A drop of every tier with two block sizes cached (--cache-block-pages
 * 4,2, an NVMe partition each) whose drop mark is written in one size's
 * partition and fails in the other's: KVMMD_TEST_MIGRATE_FAIL=
 * nvme-mark:1@2 fails the first mark job of the 2-page size's engine
 * alone (without @PAGES an entry fails the jobs of every size's engine,
 * so this partial drop could not be made).  Each case starts on a new
 * file with 4 blocks of each size on NVMe (saved by a stop, recovered
 * cold by the start that has the knob):
 *   1. the header invalidations failing too (nvme-invalidate:1+, every
 *      size's): the reply counts the 8 NVMe blocks dropped (4 a size)
 *      and 9 headers or marks not written, each size's TIER_STATS its
 *      own (4, and 5 with the mark); the log says "below the drop marks
 *      of 1 of 2 partitions" and has one "NVMe drop mark ... in the
 *      partition of blocks of 2 pages not written" (until 7 December
 *      the line named the generation alone, which each partition
 *      numbers on its own); kvmmd SIGKILLed after the reply: the restart recovers
 *      none of the 4-page size's (its mark: 4 left out) and the 2-page
 *      size's 4 (no mark, their headers still valid: a drop whose
 *      writes failed, tiers.md "Drop marks"), read back from NVMe
 *      byte-identical;
 *   2. the same with the 4-page size's mark failing (@4) and a clean
 *      stop: the other way round, partition 0 recovered, partition 1
 *      left out under its mark;
 *   3. the mark failing alone (@2), the headers written, a clean stop:
 *      one not written in the reply, and the restart recovers nothing
 *      (a failed mark counts one, "the header writes still run": they
 *      keep the 2-page size's blocks out, the mark the 4-page size's).
 * Fails with the qualifier ignored: both marks fail, the log says no
 * mark at all and case 1's restart recovers the 4-page size's 4 too.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT io_uring).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cache-multi-size-common.h"
#include "tests/lib/nvme_probe.h"

#define SLOTS_4 7u /* (2 MiB - 4 KiB) / (256 + 4 KiB) */
#define SLOTS_2 15u /* (2 MiB - 4 KiB) / (128 + 4 KiB) */
#define ON_NVME (2 * NB) /* each size's blocks on NVMe: contents 0, 1 */

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

/*
 * A new file with contents 0 and 1 of each size on it (a stop saves what
 * the GPU and host tiers hold), then kvmmd started on it with knob in
 * KVMMD_TEST_MIGRATE_FAIL: each size's ON_NVME blocks recovered, cold.
 */
static void start_with_nvme_blocks(struct td_daemon *d, const char *knob)
{
	struct kvmm_tier_stats_reply a, b;
	char line[256];

	unlink(nvme);
	cc_start(d, args);
	ms_publish_both(d->sock);
	cc_stop(d);

	setenv("KVMMD_TEST_MIGRATE_FAIL", knob, 1);
	cc_start(d, args);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	ms_size_stats(d->sock, 4, &a);
	ms_size_stats(d->sock, 2, &b);
	t_assert_eq(a.recovered_blocks, ON_NVME);
	t_assert_eq(b.recovered_blocks, ON_NVME);
	t_assert_eq(a.tiers[2].used_blocks, ON_NVME);
	t_assert_eq(b.tiers[2].used_blocks, ON_NVME);
	/* each size's engine says how many of the entries are its */
	snprintf(
		line, sizeof(line),
		"cache: KVMMD_TEST_MIGRATE_FAIL=%s: migrations fail on purpose (tests only) in blocks of ",
		knob);
	t_assert_eq(ms_log_count(d, line), 2);
}

/*
 * ADMIN_CACHE_DROP of every tier: each size's ON_NVME blocks dropped,
 * failures headers or marks not written (the whole drop's), and each
 * size's TIER_STATS count of them, fail4 and fail2; the mark of the
 * partition of blocks of `unmarked` pages not written, its WARN line
 * naming that size.
 */
static void drop_all(struct td_daemon *d, uint32_t unmarked, uint64_t failures,
		     uint64_t fail4, uint64_t fail2)
{
	char line[160];

	struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply s4, s2;

	t_ok(cd_raw(d->sock, &a, sizeof(a), &r));
	t_assert_eq(r.dropped[0] + r.dropped[1], 0);
	t_assert_eq(r.dropped[2], 2 * ON_NVME);
	t_assert_eq(r.kept[0] + r.kept[1] + r.kept[2], 0);
	t_assert_eq(r.nr_sizes, 2);
	t_assert_eq(r.sizes[0].block_pages, 4);
	t_assert_eq(r.sizes[0].dropped[2], ON_NVME);
	t_assert_eq(r.sizes[1].block_pages, 2);
	t_assert_eq(r.sizes[1].dropped[2], ON_NVME);
	t_assert_eq(r.nvme_stale_invalidated, 0);
	t_assert_eq(r.nvme_restamped + r.nvme_restamp_failures +
			    r.nvme_restamp_gone,
		    0);
	if (r.nvme_invalidate_failures != failures)
		t_fail("the drop's reply: %llu headers or marks not written, expected %llu",
		       (unsigned long long)r.nvme_invalidate_failures,
		       (unsigned long long)failures);
	ms_size_stats(d->sock, 4, &s4);
	ms_size_stats(d->sock, 2, &s2);
	t_assert_eq(s4.nvme_invalidate_failures, fail4);
	t_assert_eq(s2.nvme_invalidate_failures, fail2);
	/* one mark of two on disk, and the one not written said */
	t_assert_eq(
		ms_log_count(
			d,
			"; NVMe slots below the drop marks of 1 of 2 partitions dropped on disk"),
		1);
	t_assert_eq(ms_log_count(d, "below each partition's drop mark"), 0);
	t_assert_eq(ms_log_count(d, "NVMe drop mark (generation "), 1);
	snprintf(
		line, sizeof(line),
		") in the partition of blocks of %u pages not written (Input/output error)",
		unmarked);
	t_assert_eq(ms_log_count(d, line), 1);
}

/*
 * kvmmd on the file again: n4 and n2 blocks recovered (each size's all
 * or none), the rest left out under their partition's mark (marked4,
 * marked2); what came back is read back from NVMe byte-identical, what
 * did not is a miss.
 */
static void restart_expect(uint32_t n4, uint32_t n2, uint32_t marked4,
			   uint32_t marked2)
{
	struct kvmm_tier_stats_reply a, b;
	struct td_daemon d;
	char what[160];

	cc_start(&d, args);
	snprintf(
		what, sizeof(what),
		"recovered %u of %u slots (0 damaged headers; %u dropped by an operator's drop mark, left out)",
		n4, SLOTS_4, marked4);
	t_assert_eq(ms_part_line(&d, nvme, 0, 2, what), 1);
	snprintf(
		what, sizeof(what),
		"recovered %u of %u slots (0 damaged headers; %u dropped by an operator's drop mark, left out)",
		n2, SLOTS_2, marked2);
	t_assert_eq(ms_part_line(&d, nvme, 1, 2, what), 1);
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.recovered_blocks, n4);
	t_assert_eq(b.recovered_blocks, n2);
	for (uint32_t layers = 1; layers <= 2; layers++) {
		uint32_t n = layers == 2 ? n4 : n2;

		for (int k = 0; k < 2; k++) {
			if (n) {
				ms_expect_read(d.sock, layers, k, 2);
				continue;
			}
			ms_read(d.sock, layers, layers, k);
			t_assert_eq(res->found, 0);
		}
	}
	cc_stop(&d);
}

static void marks_and_headers_fail(void)
{
	struct td_daemon d;

	start_with_nvme_blocks(&d, "nvme-mark:1@2,nvme-invalidate:1+");
	t_assert_eq(
		ms_log_count(
			&d,
			"migrations fail on purpose (tests only) in blocks of 4 pages: 1 of its 2 entries"),
		1);
	t_assert_eq(
		ms_log_count(
			&d,
			"migrations fail on purpose (tests only) in blocks of 2 pages: 2 of its 2 entries"),
		1);
	/* 8 headers and the 2-page size's mark not written */
	drop_all(&d, 2, 2 * ON_NVME + 1, ON_NVME, ON_NVME + 1);
	/* SIGKILL: nothing of a stop (no save, no flush) reaches the
	 * disk, only what the answered drop made durable */
	td_kill(&d);
	td_stop(&d);
	restart_expect(0, ON_NVME, ON_NVME, 0);
	printf("the 2-page size's mark and every header failing, SIGKILL: the 4-page size's %d left out under its mark, the 2-page size's %d back from NVMe\n",
	       ON_NVME, ON_NVME);

	start_with_nvme_blocks(&d, "nvme-invalidate:1+,nvme-mark:1@4");
	drop_all(&d, 4, 2 * ON_NVME + 1, ON_NVME + 1, ON_NVME);
	cc_stop(&d);
	restart_expect(ON_NVME, 0, 0, ON_NVME);
	printf("the 4-page size's mark failing, a clean stop: partition 0's %d back, partition 1's left out\n",
	       ON_NVME);
}

static void mark_fails_alone(void)
{
	struct td_daemon d;

	start_with_nvme_blocks(&d, "nvme-mark:1@2");
	drop_all(&d, 2, 1, 0, 1);
	cc_stop(&d);
	/* the zeroed headers are no drop mark's: nothing left out either */
	restart_expect(0, 0, 0, 0);
	printf("the 2-page size's mark failing alone: its headers zeroed, nothing back\n");
}

int main(void)
{
	ms_res_init();
	cc_nvme_path(nvme, sizeof(nvme), "multi-size-mark-partial");
	if (!t_nvme_usable(nvme))
		t_skip("no O_DIRECT io_uring I/O in %s", nvme);
	marks_and_headers_fail();
	mark_fails_alone();
	unlink(nvme);
	return 0;
}
