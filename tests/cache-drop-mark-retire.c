// SPDX-License-Identifier: MIT
/*
 * timeout: 240
 * A drop mark retires at the start whose scan finds no header below it
 * left on disk, so that tenants' old marks do not fill the superblock's
 * table for good (Documentation/tiers.md, "Drop marks").  kvmmd as
 * tests/lib/nvme_cache_args.h sets it up (3 GPU blocks, 6 host, 6 NVMe;
 * contents 0 and 1 of 3 blocks end on NVMe):
 *   - `cache-drop --tier nvme --uid` of the test's uid with every
 *     invalidation failing: its mark in the superblock, the 6 headers
 *     still on disk; the next run's zeroing fails too
 *     (KVMMD_TEST_MIGRATE_FAIL=nvme-invalidate:1+): the mark stays; the
 *     next one's is held back (KVMMD_TEST_NVME_INVALIDATE_DELAY_MS) and
 *     cut short by a SIGKILL: it stays; the next one zeroes the 6, and is
 *     SIGKILLed after (before any retirement): it stays; the next start
 *     finds no header below it: `1 drop marks retired`, none in the
 *     superblock, and none of the 6 comes back;
 *   - TIER_NVME_TENANT_MARKS tenants' `--uid` drops over no block of
 *     theirs: the restart recovers the 6 and retires the 128 marks; two
 *     more tenants' drops then take entries of their own, and the next
 *     restart recovers the 6 again, served from NVMe (main: the first of
 *     the two raised the mark of every block to the lowest of the 128,
 *     above the 6, and the restart recovered none).
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3
#define TENANT0 71000 /* the tenants with no block, their marks alone */

static const struct cc_contents contents = { .base = 0xda000,
					     .tag0 = 70,
					     .nb = NB };

/* kvmmd on nvme; env, when not NULL, set for it alone ("NAME=VALUE"). */
static void start(struct td_daemon *d, const char *nvme, const char *env)
{
	char name[64];
	const char *eq = env ? strchr(env, '=') : NULL;
	struct nca_args a;

	if (eq) {
		snprintf(name, sizeof(name), "%.*s", (int)(eq - env), env);
		setenv(name, eq + 1, 1);
	}
	cc_start(d, nca_args(&a, nvme, 3, 0));
	if (eq)
		unsetenv(name);
}

static struct tier_nvme_peek peek(const char *nvme)
{
	struct tier_nvme_peek p;

	t_ok(tier_nvme_peek(nvme, &p));
	return p;
}

/* ADMIN_CACHE_DROP of tenant's blocks, every tier: its mark. */
static void drop_tenant(const char *sock, uint32_t tenant)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a),
					   .flags = KVMM_CACHE_DROP_F_TENANT,
					   .tenant = tenant };
	struct kvmm_admin_cache_drop_reply r;

	t_ok(cd_raw(sock, &a, sizeof(a), &r));
	t_assert_eq(r.dropped[2], 0);
	t_assert_eq(r.nvme_invalidate_failures, 0);
}

static void retire_after_zeroing(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply r;
	struct td_daemon d;
	char args[64];

	start(&d, nvme, "KVMMD_TEST_MIGRATE_FAIL=nvme-invalidate:1+");
	cd_fill_to_nvme(d.sock, &contents);
	snprintf(args, sizeof(args), "--tier nvme --uid %u",
		 (unsigned)getuid());
	r = cd_kvmmctl(d.sock, args);
	cd_expect(&r, 0, 0, 2 * NB, 0, 0, 0);
	t_assert_eq(r.nvme_invalidate_failures, 2 * NB);
	cc_stop(&d);
	t_assert_eq(nca_headers(nvme), 2 * NB);
	t_assert_eq(peek(nvme).tenant_marks, 1);

	/* the zeroing fails: the mark stays */
	start(&d, nvme, "KVMMD_TEST_MIGRATE_FAIL=nvme-invalidate:1+");
	td_log_has(&d, "6 dropped by an operator's drop mark", true);
	td_log_has(&d, "drop marks retired", false);
	td_wait_log(&d, "0 NVMe slot headers below a drop mark zeroed, 6 not",
		    20000);
	cc_stop(&d);
	t_assert_eq(nca_headers(nvme), 2 * NB);
	t_assert_eq(peek(nvme).tenant_marks, 1);

	/* the zeroing cut short by a crash: it stays */
	start(&d, nvme, "KVMMD_TEST_NVME_INVALIDATE_DELAY_MS=60000");
	td_log_has(&d, "6 dropped by an operator's drop mark", true);
	td_kill(&d); /* a crash: nothing it had queued reaches the disk */
	td_stop(&d);
	t_assert_eq(nca_headers(nvme), 2 * NB);
	t_assert_eq(peek(nvme).tenant_marks, 1);

	/* zeroed, then a crash before the next start: it stays */
	start(&d, nvme, NULL);
	td_log_has(&d, "6 dropped by an operator's drop mark", true);
	td_log_has(&d, "drop marks retired", false);
	td_wait_log(&d, "6 NVMe slot headers below a drop mark zeroed, 0 not",
		    20000);
	td_kill(&d); /* a crash: nothing it had queued reaches the disk */
	td_stop(&d);
	t_assert_eq(nca_headers(nvme), 0);
	t_assert_eq(peek(nvme).tenant_marks, 1);

	start(&d, nvme, NULL);
	td_log_has(
		&d,
		"1 drop marks retired: no header below them left on disk (0 kept)",
		true);
	td_log_has(&d, "0 dropped by an operator's drop mark", true);
	t_assert_eq(peek(nvme).tenant_marks, 0);
	t_assert_eq(peek(nvme).drop_all, 0);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(&d);

	/* and after that: still none */
	start(&d, nvme, NULL);
	td_log_has(&d, "drop marks retired", false);
	t_assert_eq(cd_recovered(d.sock), 0);
	cc_stop(&d);
	printf("a failed, a cut short, a crashed-after zeroing keep the mark; the start after the zeroing retires it, nothing back\n");
}

static void table_of_old_marks(const char *nvme)
{
	struct td_daemon d;
	char line[128];

	start(&d, nvme, NULL);
	cd_fill_to_nvme(d.sock, &contents);
	for (uint32_t i = 0; i < TIER_NVME_TENANT_MARKS; i++)
		drop_tenant(d.sock, TENANT0 + i);
	t_assert_eq(peek(nvme).tenant_marks, TIER_NVME_TENANT_MARKS);
	t_assert_eq(peek(nvme).drop_all, 0);
	cc_stop(&d);

	start(&d, nvme, NULL);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	snprintf(
		line, sizeof(line),
		"%d drop marks retired: no header below them left on disk (0 kept)",
		TIER_NVME_TENANT_MARKS);
	td_log_has(&d, line, true);
	t_assert_eq(peek(nvme).tenant_marks, 0);
	/* the 129th and 130th tenants */
	drop_tenant(d.sock, TENANT0 + TIER_NVME_TENANT_MARKS);
	drop_tenant(d.sock, TENANT0 + TIER_NVME_TENANT_MARKS + 1);
	t_assert_eq(peek(nvme).tenant_marks, 2);
	t_assert_eq(peek(nvme).drop_all, 0);
	cc_stop(&d);

	start(&d, nvme, NULL);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	td_log_has(&d, "0 dropped by an operator's drop mark", true);
	cd_open_expect(d.sock, &contents, 0, NB, 0, 0, NB);
	cd_open_expect(d.sock, &contents, 1, NB, 0, 0, NB);
	cc_stop(&d);
	printf("%d tenants' old marks retired at the restart: two more drop none of the other tenants' blocks\n",
	       TIER_NVME_TENANT_MARKS);
}

int main(void)
{
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-drop-mark-retire");
	t_nvme_require(nvme);
	retire_after_zeroing(nvme);
	unlink(nvme);
	table_of_old_marks(nvme);
	unlink(nvme);
	return 0;
}
