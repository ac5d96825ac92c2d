// SPDX-License-Identifier: MIT
/*
 * NVMe tier drop marks (tier_nvme_mark_drop(), tier_nvme_mark.c), on a
 * tier opened in this process, no kvmmd:
 *   - blocks of tenants 1 and 2 and of no known tenant (a header as files
 *     before the marks had: zeros there, rewritten here) are written; a
 *     mark of tenant 1 at the generation now: the reopen recovers
 *     tenant 2's only (tenant 1's and the tenant-less one are counted in
 *     drop_marked_slots); peek says 1 tenant mark, no mark of all;
 *   - written after the mark, a block of tenant 1 survives the next
 *     reopen; a mark of every block then leaves nothing, and the
 *     generation goes on above it (a write after that reopen survives
 *     another one, though no header on disk had a generation left);
 *   - TIER_NVME_TENANT_MARKS tenants with marks, and one more: the mark
 *     of every block rises to the lowest of theirs, and the table holds
 *     the rest; a mark lower than what is there changes nothing.
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

static struct tier_nvme *open_tier(const char *path, bool reformat)
{
	return nt_open_slots(path, NSLOTS, PAYLOAD, 0, reformat);
}

/* Write hash for tenant (tests/lib/nvme_tier.h): its slot. */
static uint32_t put(struct tier_nvme *t, uint64_t hash, uint32_t tenant)
{
	return nt_put(t, hash, tenant, buf, PAYLOAD);
}

static void tenants(const char *path)
{
	struct tier_nvme *t = open_tier(path, true);
	struct tier_nvme_peek p;
	uint32_t old;

	put(t, 0x101, 1);
	put(t, 0x102, 1);
	put(t, 0x201, 2);
	old = put(t, 0x301, 2);
	t_ok(tier_nvme_mark_drop(t, false, 1, tier_nvme_drop_generation(t)));
	tier_nvme_close(t);
	nt_make_old(path, old,
		    PAYLOAD); /* its tenant unknown: every tenant's mark's */
	t_ok(tier_nvme_peek(path, &p));
	t_assert_eq(p.drop_all, 0);
	t_assert_eq(p.tenant_marks, 1);

	t = open_tier(path, false);
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	t_assert_eq(nt_stats(t).drop_marked_slots, 3);
	t_assert(nt_has(t, 0x201));
	t_assert(!nt_has(t, 0x101) && !nt_has(t, 0x102) && !nt_has(t, 0x301));
	put(t, 0x103, 1); /* after the mark */
	tier_nvme_close(t);

	t = open_tier(path, false);
	t_assert_eq(nt_stats(t).recovered_slots, 2);
	t_assert(nt_has(t, 0x103) && nt_has(t, 0x201));
	t_ok(tier_nvme_mark_drop(t, true, 0, tier_nvme_drop_generation(t)));
	tier_nvme_close(t);

	/* nothing left, no generation on disk to go on from */
	t = open_tier(path, false);
	t_assert_eq(nt_stats(t).recovered_slots, 0);
	/* the 5 headers written, less the one 0x103 wrote over: a header
	 * below a mark stays until its slot is written again */
	t_assert_eq(nt_stats(t).drop_marked_slots, 4);
	t_ok(tier_nvme_peek(path, &p));
	t_assert(tier_nvme_drop_generation(t) >= p.drop_all);
	t_assert_eq(p.tenant_marks, 0); /* under the mark of all */
	put(t, 0x104, 1);
	tier_nvme_close(t);
	t = open_tier(path, false);
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	t_assert(nt_has(t, 0x104));
	tier_nvme_close(t);
}

static void overflow(const char *path)
{
	struct tier_nvme *t = open_tier(path, true);
	struct tier_nvme_peek p;
	uint64_t g0;

	/* a write between marks: each tenant's mark one higher */
	g0 = tier_nvme_drop_generation(t);
	for (uint32_t i = 0; i < TIER_NVME_TENANT_MARKS; i++) {
		t_ok(tier_nvme_mark_drop(t, false, 1000 + i, g0 + i));
		(void)tier_nvme_next_generation(t);
	}
	t_ok(tier_nvme_peek(path, &p));
	t_assert_eq(p.drop_all, 0);
	t_assert_eq(p.tenant_marks, TIER_NVME_TENANT_MARKS);
	/* lower than tenant 1000's own: nothing changes */
	t_ok(tier_nvme_mark_drop(t, false, 1000, g0 - 1));
	t_ok(tier_nvme_peek(path, &p));
	t_assert_eq(p.tenant_marks, TIER_NVME_TENANT_MARKS);
	/* one more tenant: all below the lowest mark (g0, 1000's) go, and
	 * 1000's entry with them */
	t_ok(tier_nvme_mark_drop(t, false, 5000, g0 + TIER_NVME_TENANT_MARKS));
	t_ok(tier_nvme_peek(path, &p));
	t_assert_eq(p.drop_all, g0);
	t_assert_eq(p.tenant_marks, TIER_NVME_TENANT_MARKS);
	tier_nvme_close(t);
	/* the table reads back whole */
	t = open_tier(path, false);
	t_assert(tier_nvme_drop_generation(t) >= g0 + TIER_NVME_TENANT_MARKS);
	tier_nvme_close(t);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char path[256];

	snprintf(path, sizeof(path), "%s/kvmm-tier-drop-mark-%d",
		 dir ? dir : "/var/tmp", (int)getpid());
	buf = t_page_alloc(PAYLOAD);
	tenants(path);
	unlink(path);
	overflow(path);
	unlink(path);
	free(buf);
	printf("drop marks: by tenant, tenant-less headers, all, overflow\n");
	return 0;
}
