// SPDX-License-Identifier: MIT
/*
 * timeout: 150
 * `kvmmctl cache-drop` also invalidates the stale NVMe copies of what it
 * drops: slots freed in memory only (a restore to the GPU, an eviction
 * from NVMe), whose header on disk still names the block, which a
 * restart would recover (Documentation/admin.md, "Dropping cached
 * blocks").  kvmmd as in tests/cache-drop-nvme-restart.c (lru, 3 GPU
 * blocks, 6 host, 6 NVMe, nothing saved at the stop), 5 contents of 3
 * blocks, contents 0 and 1 on NVMe:
 *   - restored: `--tier gpu`, content 0 opened (its 3 blocks restored
 *     from NVMe to the GPU), `cache-drop`: the reply counts 3 stale
 *     copies invalidated; a new kvmmd on the same file recovers none,
 *     content 0 misses;
 *   - warm restart (what the stale copies are kept for): the same with
 *     no drop after the open: the new kvmmd recovers content 0's 3 from
 *     their old slots beside content 1's, and serves content 0 from NVMe;
 *   - evicted: `kvmmctl tenant-limit UID nvme:1` evicts 5 of the 6 NVMe
 *     blocks (slots freed by the policy, not written again), `cache-drop
 *     --tier nvme` drops the last and invalidates the 5: nothing comes
 *     back;
 *   - `--uid` (root: clients of two uids; the rest runs without): A's
 *     and B's 3 blocks restored to the GPU from NVMe; `--uid A` drops
 *     A's and invalidates A's 3 stale copies, not B's: the restart
 *     recovers B's 3, which B finds on NVMe, and none of A's.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3
#define UID_A 61321
#define UID_B 61322

static const struct cc_contents contents = { .base = 0xe1000,
					     .tag0 = 90,
					     .nb = NB };

static void start(struct td_daemon *d, const char *nvme, unsigned int gpu)
{
	struct nca_args a;

	cu_start(d, nca_args(&a, nvme, gpu, NCA_ANY_UID));
}

/* Content 0 back on the GPU from NVMe, its old slots free in memory. */
static void restore_content0(const char *sock)
{
	struct kvmm_admin_cache_drop_reply r;

	r = cd_kvmmctl(sock, "--tier gpu"); /* content 4: room on the GPU */
	cd_expect(&r, NB, 0, 0, 0, 0, 0);
	t_assert_eq(r.nvme_stale_invalidated, 0);
	cd_open_expect(sock, &contents, 0, NB, 0, 0, NB);
}

static void restored(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;

	start(&d, nvme, 3);
	cd_fill_to_nvme(d.sock, &contents);
	restore_content0(d.sock);
	r = cd_kvmmctl(d.sock, "");
	cd_expect(&r, NB, 2 * NB, NB, 0, 0, 0);
	t_assert_eq(r.nvme_stale_invalidated, NB);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	/* content 1's 3 headers and content 0's 3 stale ones */
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.nvme_invalidate_jobs, 2 * NB);
	t_assert_eq(ts.nvme_invalidated_blocks, 2 * NB);
	t_assert_eq(ts.nvme_invalidate_failures, 0);
	cc_stop(&d);

	start(&d, nvme, 3);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(&d);
	printf("restored to the GPU, then dropped: its stale NVMe copies do not come back\n");
}

static void warm_restart(const char *nvme)
{
	struct td_daemon d;

	start(&d, nvme, 3);
	cd_fill_to_nvme(d.sock, &contents);
	restore_content0(d.sock);
	cc_stop(&d);

	start(&d, nvme, 3);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	cd_open_expect(d.sock, &contents, 0, NB, 0, 0, NB);
	cc_stop(&d);
	printf("no drop: a restart still finds the blocks restored before the stop\n");
}

static void evicted(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	char cmd[64], out[4096];

	start(&d, nvme, 3);
	cd_fill_to_nvme(d.sock, &contents);
	snprintf(cmd, sizeof(cmd), "tenant-limit %u nvme:1",
		 (unsigned)getuid());
	t_assert_eq(td_kvmmctl(d.sock, cmd, out, sizeof(out)), 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 1);
	t_assert_eq(ts.tiers[2].drops, 2 * NB - 1);
	r = cd_kvmmctl(d.sock, "--tier nvme");
	cd_expect(&r, 0, 0, 1, 0, 0, 0);
	t_assert_eq(r.nvme_stale_invalidated, 2 * NB - 1);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	cc_stop(&d);

	start(&d, nvme, 3);
	t_assert_eq(cd_recovered(d.sock), 0);
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(&d);
	printf("evicted from NVMe, then dropped: the stale copies do not come back\n");
}

static void by_uid(const char *nvme)
{
	uint64_t ha[NB], hb[NB];
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	char cmd[64];

	for (int b = 0; b < NB; b++) {
		ha[b] = 0xe2a0001 + b;
		hb[b] = 0xe2b0001 + b;
	}
	/* 6 GPU blocks: A's and B's both fit back */
	start(&d, nvme, 6);
	cu_publish_as(d.sock, UID_A, UID_A, ha, NB, 1, NB);
	cu_publish_as(d.sock, UID_B, UID_B, hb, NB, 2, NB);
	for (int k = 0; k < 4; k++)
		cc_write_content(d.sock, &contents, k);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[1].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, 2 * NB);
	r = cd_kvmmctl(d.sock, "--tier gpu");
	cd_expect(&r, 2 * NB, 0, 0, 0, 0, 0);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, NB, 1, 2);
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, 2);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, 0);

	snprintf(cmd, sizeof(cmd), "--uid %d", UID_A);
	r = cd_kvmmctl(d.sock, cmd);
	cd_expect(&r, NB, 0, 0, 0, 0, 0);
	t_assert_eq(r.nvme_stale_invalidated, NB);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	cc_stop(&d);

	start(&d, nvme, 6);
	t_assert_eq(cd_recovered(d.sock), NB);
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, 2);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, 0, 1, -1);
	cc_stop(&d);
	printf("--uid A: A's stale copies invalidated, B's recovered\n");
}

int main(void)
{
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-drop-stale");
	t_nvme_require(nvme);
	restored(nvme);
	unlink(nvme);
	warm_restart(nvme);
	unlink(nvme);
	evicted(nvme);
	unlink(nvme);
	if (geteuid() == 0) {
		by_uid(nvme);
		unlink(nvme);
	} else {
		printf("--uid part skipped: needs root (clients of other uids)\n");
	}
	return 0;
}
