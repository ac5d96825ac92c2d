// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * A block `kvmmctl cache-drop` drops from NVMe stays dropped across a
 * restart: its slot's header is zeroed on disk before the reply, where an
 * eviction only frees the slot in memory (and the restart's scan would
 * recover it: Documentation/tiers.md), and the drop's mark in the
 * superblock covers every slot written before it
 * (tests/cache-drop-mark-crash.c has the crashes).
 *   - kvmmd (lru, 3 GPU blocks, 6 host, 6 NVMe, nothing saved at the
 *     stop): 5 contents of 3 blocks put contents 0 and 1 on NVMe; a
 *     client pins content 1's first block; `--tier nvme` drops the 5
 *     others and keeps it (the tier holds it); SIGTERM; a new kvmmd on
 *     the same file recovers the kept one alone (its header was written
 *     again above the drop's mark; none before:
 *     tests/cache-drop-kept-nvme.c has the rest);
 *   - the same with the second invalidation failing on purpose
 *     (KVMMD_TEST_MIGRATE_FAIL=nvme-invalidate:2): the reply says 1
 *     failed (kvmmctl warns, kvmmd logs it), and the restart recovers
 *     none: the mark covers the block whose header stayed;
 *   - TIER_STATS counts them (ABI 1.15): 5 invalidation jobs and 5
 *     headers zeroed, then 6 jobs, 5 zeroed and 1 failure (a later drop
 *     of GPU blocks alone adds none), no slot a tier refused to free;
 *     kvmmctl status, status --json and metrics print the same.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3

static const struct cc_contents contents = { .base = 0xd9000,
					     .tag0 = 70,
					     .nb = NB };

static void start(struct td_daemon *d, const char *nvme)
{
	struct nca_args a;

	cc_start(d, nca_args(&a, nvme, 3, 0));
}

/*
 * TIER_STATS's NVMe invalidation counters (ABI 1.15) read jobs,
 * invalidated and failed, and no slot a tier refused to free; kvmmctl
 * status (text and --json) and metrics say the same.
 */
static void expect_invalidations(const char *sock, uint64_t jobs, uint64_t done,
				 uint64_t failed)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(sock, &ts);
	t_assert_eq(ts.size, sizeof(ts));
	t_assert_eq(ts.nvme_invalidate_jobs, jobs);
	t_assert_eq(ts.nvme_invalidated_blocks, done);
	t_assert_eq(ts.nvme_invalidate_failures, failed);
	t_assert_eq(ts.lower_free_refused, 0);
	cu_kvmmctl_has(sock, "--json status",
		       "\"lower_free_refused\":0,\"nvme_invalidate_jobs\":%llu,"
		       "\"nvme_invalidated_blocks\":%llu,"
		       "\"nvme_invalidate_failures\":%llu,",
		       (unsigned long long)jobs, (unsigned long long)done,
		       (unsigned long long)failed);
	cu_kvmmctl_has(
		sock, "status",
		"             %llu dropped NVMe blocks invalidated on disk (%llu jobs), %llu not (a restart may find them again)\n",
		(unsigned long long)done, (unsigned long long)jobs,
		(unsigned long long)failed);
	cu_kvmmctl_has(sock, "metrics",
		       "\nkvmm_cache_nvme_invalidate_jobs_total %llu\n",
		       (unsigned long long)jobs);
	cu_kvmmctl_has(sock, "metrics",
		       "\nkvmm_cache_nvme_invalidated_blocks_total %llu\n",
		       (unsigned long long)done);
	cu_kvmmctl_has(sock, "metrics",
		       "\nkvmm_cache_nvme_invalidate_failures_total %llu\n",
		       (unsigned long long)failed);
	cu_kvmmctl_has(sock, "metrics",
		       "\nkvmm_cache_lower_free_refused_total 0\n");
}

static void dropped_stay_dropped(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts po;
	struct kvmm_conn *pin;
	struct td_daemon d;
	uint64_t h[NB];

	start(&d, nvme);
	cd_fill_to_nvme(d.sock, &contents);
	pin = cc_connect_lib(d.sock, "pinner");
	cc_content_hashes(&contents, 1, h);
	t_ok(cc_pin(pin, h[0], 0, 0, 0, &po));
	r = cd_kvmmctl(d.sock, "--tier nvme");
	cd_expect(&r, 0, 0, 2 * NB - 1, 0, 0, 1);
	t_assert_eq(r.kept_pinned, 1);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	/* one job per dropped block, each header zeroed */
	expect_invalidations(d.sock, 2 * NB - 1, 2 * NB - 1, 0);
	/* kept, in this run */
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 1);
	kvmm_disconnect(pin);
	cc_stop(&d);

	start(&d, nvme);
	t_assert_eq(cd_recovered(d.sock), 1);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 1, 0, 0, 1);
	cc_stop(&d);
	printf("5 NVMe blocks dropped, the pinned one kept; it alone recovered\n");
}

static void failed_invalidation(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply r;
	static char log[1 << 16], out[4096];
	struct td_daemon d;
	uint32_t found = 0, from[3];

	setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-invalidate:2", 1);
	start(&d, nvme);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	cd_fill_to_nvme(d.sock, &contents);
	t_assert_eq(td_kvmmctl(d.sock, "cache-drop --tier nvme,host", out,
			       sizeof(out)),
		    0);
	printf("%s", out);
	t_assert(strstr(out, "dropped      gpu 0, host 6, nvme 6 blocks\n"));
	t_assert(strstr(
		out,
		"WARNING      1 dropped NVMe blocks or stale copies could not be invalidated on disk"));
	/* 6 jobs: 5 headers zeroed, the one that failed counted */
	expect_invalidations(d.sock, 2 * NB, 2 * NB - 1, 1);
	/* only the GPU's are left; not a drop of NVMe, so the failed
	 * slot (a stale copy now, tests/cache-drop-stale-nvme.c) stays */
	r = cd_kvmmctl(d.sock, "--tier gpu");
	cd_expect(&r, NB, 0, 0, 0, 0, 0);
	t_assert_eq(r.nvme_stale_invalidated, 0);
	expect_invalidations(d.sock, 2 * NB, 2 * NB - 1, 1);
	t_ok(td_stop_log(&d, log, sizeof(log)));
	if (!strstr(log, "header not invalidated (Input/output error)"))
		t_fail("no warning about the failed invalidation in:\n%s", log);

	start(&d, nvme);
	t_assert_eq(cd_recovered(d.sock), 0); /* the mark covers it */
	for (int k = 0; k < 2; k++)
		found += cd_open(d.sock, &contents, k, from);
	t_assert_eq(found, 0);
	cc_stop(&d);
	printf("a failed invalidation is reported, and that block does not come back\n");
}

int main(void)
{
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-drop-restart");
	t_nvme_require(nvme);
	dropped_stay_dropped(nvme);
	unlink(nvme);
	failed_invalidation(nvme);
	unlink(nvme);
	return 0;
}
