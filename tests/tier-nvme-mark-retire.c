// SPDX-License-Identifier: MIT
/*
 * NVMe tier drop marks retire (tier_nvme_mark.c, nvme_marks_retire()) at
 * a start whose scan finds no valid header below them, on a tier opened
 * in this process, no kvmmd:
 *   - tenant 1's 2 blocks under its mark, tenant 3's mark over nothing:
 *     the reopen retires 3's alone (`1 drop marks retired`) and leaves
 *     out 1's 2; their zeroing given up (claimed, then unclaimed, as a
 *     failed job does): the next reopen finds them again and 1's mark
 *     stays; zeroed: the one after retires it, the superblock has no mark
 *     left, tenant 2's block is recovered throughout, and the generation
 *     goes on above the retired mark (a block written then survives);
 *   - a tenant-less header (a file of before the tenants) keeps every
 *     tenant's mark above it, until it is zeroed;
 *   - the mark of every block: kept while a header below it is on disk,
 *     lowered to 0 once none is;
 *   - TIER_NVME_TENANT_MARKS tenants' marks over no block of theirs: the
 *     reopen retires them all, and two more tenants' marks then take
 *     entries of their own: tenant 7's block, older than every mark,
 *     survives (with the table still full, the one-more rule raised the
 *     mark of every block above it and dropped it).
 */
#include "kvmm/kvmmd/crc32c.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define NSLOTS 8

static unsigned char *buf;
static char log_buf[16384];

static struct tier_nvme *open_fresh(const char *path)
{
	return nt_open_slots(path, NSLOTS, PAYLOAD, 0, true);
}

/* Reopen path, its log lines in log_buf. */
static struct tier_nvme *reopen(const char *path)
{
	return nt_reopen_logged(path, NSLOTS, PAYLOAD, log_buf, sizeof(log_buf),
				NULL);
}

static uint32_t put(struct tier_nvme *t, uint64_t hash, uint32_t tenant)
{
	return nt_put(t, hash, tenant, buf, PAYLOAD);
}

static struct tier_nvme_peek peek(const char *path)
{
	struct tier_nvme_peek p;

	t_ok(tier_nvme_peek(path, &p));
	return p;
}

static void mark(struct tier_nvme *t, bool all, uint32_t tenant)
{
	t_ok(tier_nvme_mark_drop(t, all, tenant, tier_nvme_drop_generation(t)));
}

static void tenants(const char *path)
{
	struct tier_nvme *t = open_fresh(path);
	uint64_t g;

	put(t, 0x101, 1);
	put(t, 0x102, 1);
	put(t, 0x201, 2);
	g = tier_nvme_drop_generation(t);
	mark(t, false, 1);
	mark(t, false, 3); /* no block of 3's */
	tier_nvme_close(t);
	t_assert_eq(peek(path).tenant_marks, 2);

	/* 3's covers nothing: gone; 1's 2 headers are still there */
	t = reopen(path);
	nt_log_has(
		log_buf,
		"1 drop marks retired: no header below them left on disk (1 kept)",
		true);
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	t_assert_eq(nt_stats(t).drop_marked_slots, 2);
	t_assert(nt_has(t, 0x201) && !nt_has(t, 0x101) && !nt_has(t, 0x102));
	t_assert_eq(peek(path).tenant_marks, 1);
	nt_clear_marked(t, 2, false); /* a zeroing that failed */
	tier_nvme_close(t);

	t = reopen(path);
	nt_log_has(log_buf, "drop marks retired", false);
	t_assert_eq(nt_stats(t).drop_marked_slots, 2);
	t_assert(!nt_has(t, 0x101) && !nt_has(t, 0x102));
	t_assert_eq(peek(path).tenant_marks, 1);
	nt_clear_marked(t, 2, true);
	tier_nvme_close(t);
	t_assert_eq(peek(path).tenant_marks, 1); /* until the next start */

	t = reopen(path);
	nt_log_has(
		log_buf,
		"1 drop marks retired: no header below them left on disk (0 kept)",
		true);
	t_assert_eq(nt_stats(t).drop_marked_slots, 0);
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	t_assert(nt_has(t, 0x201) && !nt_has(t, 0x101) && !nt_has(t, 0x102));
	t_assert_eq(peek(path).tenant_marks, 0);
	t_assert_eq(peek(path).drop_all, 0);
	/* nothing on disk goes back below the retired mark */
	t_assert(tier_nvme_drop_generation(t) >= g);
	put(t, 0x103, 1);
	tier_nvme_close(t);

	t = reopen(path);
	nt_log_has(log_buf, "drop marks retired", false);
	t_assert_eq(nt_stats(t).recovered_slots, 2);
	t_assert(nt_has(t, 0x103) && nt_has(t, 0x201) && !nt_has(t, 0x101));
	tier_nvme_close(t);
}

static void tenantless(const char *path)
{
	struct tier_nvme *t = open_fresh(path);
	uint32_t old;

	old = put(t, 0x401, 4);
	put(t, 0x402, 4);
	tier_nvme_close(t);
	nt_make_old(path, old,
		    PAYLOAD); /* whose, not known: every tenant's mark's */

	t = reopen(path);
	t_assert_eq(nt_stats(t).recovered_slots, 2);
	mark(t, false, 5); /* no block of 5's, but the tenant-less one */
	tier_nvme_close(t);

	t = reopen(path);
	nt_log_has(log_buf, "drop marks retired", false);
	t_assert_eq(nt_stats(t).drop_marked_slots, 1);
	t_assert(!nt_has(t, 0x401) && nt_has(t, 0x402));
	t_assert_eq(peek(path).tenant_marks, 1);
	nt_clear_marked(t, 1, true);
	tier_nvme_close(t);

	t = reopen(path);
	nt_log_has(log_buf, "1 drop marks retired", true);
	t_assert_eq(peek(path).tenant_marks, 0);
	t_assert(!nt_has(t, 0x401) && nt_has(t, 0x402));
	tier_nvme_close(t);
}

static void every_block(const char *path)
{
	struct tier_nvme *t = open_fresh(path);

	put(t, 0x501, 5);
	put(t, 0x601, 6);
	mark(t, true, 0);
	tier_nvme_close(t);
	t_assert(peek(path).drop_all != 0);

	t = reopen(path);
	nt_log_has(log_buf, "drop marks retired", false);
	t_assert_eq(nt_stats(t).drop_marked_slots, 2);
	t_assert(peek(path).drop_all != 0);
	/* above it: a table entry over nothing */
	(void)tier_nvme_next_generation(t);
	mark(t, false, 8);
	nt_clear_marked(t, 2, true);
	tier_nvme_close(t);
	t_assert_eq(peek(path).tenant_marks, 1);

	t = reopen(path);
	nt_log_has(
		log_buf,
		"2 drop marks retired: no header below them left on disk (0 kept)",
		true);
	t_assert_eq(nt_stats(t).recovered_slots, 0);
	t_assert_eq(nt_stats(t).drop_marked_slots, 0);
	t_assert_eq(peek(path).drop_all, 0);
	t_assert_eq(peek(path).tenant_marks, 0);
	put(t, 0x502, 5);
	tier_nvme_close(t);
	t = reopen(path);
	t_assert(nt_has(t, 0x502));
	tier_nvme_close(t);
}

static void overflow(const char *path)
{
	struct tier_nvme *t = open_fresh(path);
	char line[128];

	put(t, 0x701, 7); /* below every mark to come */
	for (uint32_t i = 0; i < TIER_NVME_TENANT_MARKS; i++)
		mark(t, false, 1000 + i);
	tier_nvme_close(t);
	t_assert_eq(peek(path).tenant_marks, TIER_NVME_TENANT_MARKS);

	t = reopen(path);
	snprintf(
		line, sizeof(line),
		"%d drop marks retired: no header below them left on disk (0 kept)",
		TIER_NVME_TENANT_MARKS);
	nt_log_has(log_buf, line, true);
	t_assert(nt_has(t, 0x701));
	t_assert_eq(peek(path).tenant_marks, 0);
	/* the 129th and 130th tenants: room for both */
	mark(t, false, 5000);
	mark(t, false, 5001);
	t_assert_eq(peek(path).tenant_marks, 2);
	t_assert_eq(peek(path).drop_all, 0);
	tier_nvme_close(t);

	t = reopen(path);
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	t_assert_eq(nt_stats(t).drop_marked_slots, 0);
	t_assert(nt_has(t, 0x701));
	tier_nvme_close(t);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char path[256];

	snprintf(path, sizeof(path), "%s/kvmm-tier-mark-retire-%d",
		 dir ? dir : "/var/tmp", (int)getpid());
	buf = t_page_alloc(PAYLOAD);
	tenants(path);
	unlink(path);
	tenantless(path);
	unlink(path);
	every_block(path);
	unlink(path);
	overflow(path);
	unlink(path);
	free(buf);
	printf("drop marks retire at the start that finds nothing below them: by tenant, tenant-less headers, all, a table of old marks\n");
	return 0;
}
