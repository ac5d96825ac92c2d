// SPDX-License-Identifier: MIT
/*
 * timeout: 240
 * A `kvmmctl cache-drop` that includes the NVMe tier stays done across a
 * crash: its mark is on disk before the reply (the tier's superblock:
 * every slot written before it is dropped, of one tenant with --uid),
 * whatever becomes of the per-slot header invalidations
 * (Documentation/tiers.md, "Drop marks").  kvmmd as
 * tests/lib/nvme_cache_args.h sets it up (3 GPU blocks, 6 host, 6 NVMe;
 * contents 0 and 1 of 3 blocks end on NVMe):
 *   - crash: the invalidations held back (KVMMD_TEST_NVME_INVALIDATE_DELAY_MS),
 *     the drop's reply not come, the mark in the superblock; SIGKILL; a new
 *     kvmmd on the file recovers none of the 6 (main without the mark: 6);
 *   - every invalidation failing (KVMMD_TEST_MIGRATE_FAIL=nvme-invalidate:1+),
 *     no second drop, a clean restart: none recovered; the mark failing
 *     (nvme-mark:1) with the invalidations done: the reply counts 1
 *     failure, and none comes back either;
 *   - `--uid A`, crash, restart: B's 3 blocks come back (from NVMe, for
 *     B, byte-identical), A's do not (needs root: clients of other uids;
 *     that part is skipped otherwise);
 *   - blocks written after a drop survive a restart, and after the next
 *     one too: the drop zeroed every header, so the restart found no
 *     generation on disk, and the writes must still number above the mark;
 *   - an old file (headers without a tenant, a superblock without marks,
 *     as kvmmd wrote before the marks) restarts warm, all 6 blocks; a
 *     --uid drop then covers its blocks (their tenant unknown): a restart
 *     recovers none.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "kvmm/kvmmd/crc32c.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3
#define NSLOTS 7
#define UID_A 61321
#define UID_B 61322
#define UID_C 61323

static const struct cc_contents contents = { .base = 0xd7000,
					     .tag0 = 40,
					     .nb = NB };
/* written after the drop */
static const struct cc_contents later = { .base = 0xd8000,
					  .tag0 = 90,
					  .nb = NB };

static void start(struct td_daemon *d, const char *nvme, unsigned int flags)
{
	struct nca_args a;

	cc_start(d, nca_args(&a, nvme, 3, flags));
}

/* The file's superblock: its drop marks. */
static struct tier_nvme_peek peek(const char *nvme)
{
	struct tier_nvme_peek p;

	t_ok(tier_nvme_peek(nvme, &p));
	return p;
}

/* A process that sends the drop and must not get its reply: kvmmd is
 * killed first (exit 0); a reply is exit 1. */
static pid_t drop_unanswered(const char *sock, uint32_t tiers, uint32_t flags,
			     uint32_t tenant)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_admin_cache_drop a = { .size = sizeof(a),
						   .tiers = tiers,
						   .flags = flags,
						   .tenant = tenant };
		struct kvmm_admin_cache_drop_reply r;

		_exit(cd_raw(sock, &a, sizeof(a), &r) ? 0 : 1);
	}
	return p;
}

/* Wait (10 s at most) for the file to hold a drop mark: of every block,
 * or tenants of their own. */
static void wait_mark(const char *nvme, bool all, uint32_t tenants)
{
	for (int i = 0; i < 1000; i++) {
		struct tier_nvme_peek p = peek(nvme);

		if (all ? p.drop_all != 0 : p.tenant_marks == tenants)
			return;
		usleep(10000);
	}
	t_fail("no drop mark in %s's superblock", nvme);
}

/* SIGKILL kvmmd (a crash): nothing it had queued reaches the disk. */
static void crash(struct td_daemon *d, pid_t dropper)
{
	td_kill(d);
	t_assert_eq(cc_wait_child(dropper), 0); /* never answered */
	td_stop(d);
}

static void crash_before_invalidations(const char *nvme)
{
	struct td_daemon d;
	pid_t p;

	setenv("KVMMD_TEST_NVME_INVALIDATE_DELAY_MS", "60000", 1);
	start(&d, nvme, 0);
	unsetenv("KVMMD_TEST_NVME_INVALIDATE_DELAY_MS");
	cd_fill_to_nvme(d.sock, &contents);
	t_assert_eq(peek(nvme).drop_all, 0);
	p = drop_unanswered(d.sock, KVMM_CACHE_DROP_NVME, 0, 0);
	wait_mark(nvme, true, 0);
	crash(&d, p);

	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(&d);
	printf("a crash before the drop's invalidations: no dropped block back\n");
}

static void failed_invalidations(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply r;
	struct td_daemon d;

	setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-invalidate:1+", 1);
	start(&d, nvme, 0);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	cd_fill_to_nvme(d.sock, &contents);
	r = cd_kvmmctl(d.sock, "--tier nvme");
	cd_expect(&r, 0, 0, 2 * NB, 0, 0, 0);
	t_assert_eq(r.nvme_invalidate_failures, 2 * NB);
	cc_stop(&d);
	t_assert(peek(nvme).drop_all != 0);

	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(&d);
	unlink(nvme);

	/* the mark failing: counted; the headers are what keeps them out */
	setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-mark:1", 1);
	start(&d, nvme, 0);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	cd_fill_to_nvme(d.sock, &contents);
	r = cd_kvmmctl(d.sock, "--tier nvme");
	cd_expect(&r, 0, 0, 2 * NB, 0, 0, 0);
	t_assert_eq(r.nvme_invalidate_failures, 1);
	cc_stop(&d);
	t_assert_eq(peek(nvme).drop_all, 0);
	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), 0);
	cc_stop(&d);
	printf("failed invalidations, no second drop: none back; a failed mark is counted\n");
}

static void uid_crash(const char *nvme)
{
	static const uint64_t ha[NB] = { 0xd7a0001, 0xd7a0002, 0xd7a0003 };
	static const uint64_t hb[NB] = { 0xd7b0001, 0xd7b0002, 0xd7b0003 };
	struct td_daemon d;
	pid_t p;

	if (geteuid() != 0) {
		printf("--uid part skipped: needs root (clients of other uids)\n");
		return;
	}
	setenv("KVMMD_TEST_NVME_INVALIDATE_DELAY_MS", "60000", 1);
	start(&d, nvme, NCA_ANY_UID);
	unsetenv("KVMMD_TEST_NVME_INVALIDATE_DELAY_MS");
	t_ok(chmod(d.dir, 0711));
	t_ok(td_kvmmctl_share(&d));
	/* A's and B's go down to NVMe under C's three contents (LRU) */
	cu_publish_two_down(d.sock, UID_A, ha, UID_B, hb, UID_C, 0xd7c0000, NB);
	p = drop_unanswered(d.sock, 0, KVMM_CACHE_DROP_F_TENANT, UID_A);
	wait_mark(nvme, false, 1);
	t_assert_eq(peek(nvme).drop_all, 0);
	crash(&d, p);

	start(&d, nvme, NCA_ANY_UID);
	t_ok(chmod(d.dir, 0711));
	t_assert_eq(cd_recovered(d.sock), NB); /* B's */
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, 2);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, 0, 1, -1);
	cc_stop(&d);
	printf("--uid A, crash: B's blocks back from NVMe, A's not\n");
}

static void writes_after_drop(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply r;
	uint64_t mark;
	struct td_daemon d;

	start(&d, nvme, 0);
	cd_fill_to_nvme(d.sock, &contents);
	r = cd_kvmmctl(d.sock, "");
	cd_expect(&r, NB, 2 * NB, 2 * NB, 0, 0, 0);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	mark = peek(nvme).drop_all;
	t_assert(mark > 2 * NB);
	/* in the same run: written after the mark */
	cd_fill_to_nvme(d.sock, &later);
	cc_stop(&d);
	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	cd_open_expect(d.sock, &later, 0, NB, 0, 0, NB);
	cd_open_expect(d.sock, &later, 1, NB, 0, 0, NB);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);

	/* every header zeroed: this restart finds no generation on disk,
	 * yet its writes go above the mark */
	r = cd_kvmmctl(d.sock, "");
	t_assert_eq(r.nvme_invalidate_failures, 0);
	cc_stop(&d);
	t_assert(peek(nvme).drop_all > mark);
	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_fill_to_nvme(d.sock, &contents);
	cc_stop(&d);
	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	cd_open_expect(d.sock, &contents, 0, NB, 0, 0, NB);
	cd_open_expect(d.sock, &contents, 1, NB, 0, 0, NB);
	cc_stop(&d);
	printf("blocks written after a drop survive two restarts\n");
}

/* Rewrite the file's slot headers as kvmmd wrote them before the tenant:
 * zeros there, the header CRC over them.  How many it rewrote. */
static int make_old(const char *nvme)
{
	struct tier_nvme_slot_header h;
	int n = 0, fd = open(nvme, O_RDWR | O_CLOEXEC);

	t_assert(fd >= 0);
	for (int i = 0; i < NSLOTS; i++) {
		off_t off = (off_t)NT_SLOT_OFFSET(i, NCA_BLOCK_BYTES);

		t_assert_eq(pread(fd, &h, sizeof(h), off), (ssize_t)sizeof(h));
		if (h.magic != TIER_NVME_SLOT_MAGIC)
			continue;
		t_assert(h.flags & TIER_NVME_HDR_TENANT);
		h.tenant = 0;
		h.flags = 0;
		h.header_crc = 0;
		h.header_crc = tier_crc32c(0, &h, sizeof(h));
		t_assert_eq(pwrite(fd, &h, sizeof(h), off), (ssize_t)sizeof(h));
		n++;
	}
	t_ok(fsync(fd));
	close(fd);
	return n;
}

static void old_file(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply r;
	struct td_daemon d;
	struct tier_nvme_peek p;

	start(&d, nvme, 0);
	cd_fill_to_nvme(d.sock, &contents);
	cc_stop(&d);
	/* no drop: the superblock is as before the marks (zeros there) */
	p = peek(nvme);
	t_assert_eq(p.drop_all, 0);
	t_assert_eq(p.tenant_marks, 0);
	t_assert_eq(make_old(nvme), 2 * NB);

	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	cd_open_expect(d.sock, &contents, 0, NB, 0, 0, NB);
	cd_open_expect(d.sock, &contents, 1, NB, 0, 0, NB);
	/* a tenant's drop: nothing of its in this run (the recovered are
	 * nobody's), but on disk a tenant-less header is every tenant's */
	r = cd_kvmmctl(d.sock, "--tier nvme --uid 12345");
	cd_expect(&r, 0, 0, 0, 0, 0, 0);
	cc_stop(&d);
	t_assert_eq(peek(nvme).tenant_marks, 1);
	start(&d, nvme, 0);
	t_assert_eq(cd_recovered(d.sock), 0);
	cc_stop(&d);
	printf("an old file restarts warm; a tenant's mark covers its blocks\n");
}

int main(void)
{
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-drop-mark");
	t_nvme_require(nvme);
	crash_before_invalidations(nvme);
	unlink(nvme);
	failed_invalidations(nvme);
	unlink(nvme);
	uid_crash(nvme);
	unlink(nvme);
	writes_after_drop(nvme);
	unlink(nvme);
	old_file(nvme);
	unlink(nvme);
	return 0;
}
