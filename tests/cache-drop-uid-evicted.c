// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * Blocks the policy evicts from NVMe stay on the tier's record of stale
 * copies as their own tenant's, and their headers name it, so that
 * `kvmmctl cache-drop --uid A` claims exactly A's (Documentation/tiers.md,
 * "Stale copies", "Drop marks").  The policy reports a move while its
 * block is in no tier, so asking the policy for the block's tenant in its
 * move handler named nobody: the eviction's stale copy and the host ->
 * NVMe write's header were nobody's, `--uid A` claimed none of A's, and
 * its mark left A's headers alone (or took B's).
 *
 * kvmmd as in tests/cache-drop-stale-nvme.c (lru, 3 GPU blocks, 6 host,
 * 6 NVMe, nothing saved at the stop).  Clients of uids A and B publish 3
 * blocks each; 3 contents of root's push them down to NVMe (6 there);
 * `tenant-limit A nvme:1` and `tenant-limit B nvme:1` evict 2 of each
 * (slots freed in memory, headers left).  `--uid A`: A's last NVMe block
 * dropped, `nvme_stale_invalidated` 2, A's 2 stale copies and not B's.
 * A new kvmmd on the file recovers B's 3 (the one cached and the 2 stale
 * copies), which B opens from NVMe byte-identical, and none of A's.
 * Needs root (clients of other uids); skips (77) otherwise, and where
 * the NVMe tier cannot run (no O_DIRECT there).
 */
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3
#define UID_A 61331
#define UID_B 61332

static const struct cc_contents contents = { .base = 0xe3000,
					     .tag0 = 70,
					     .nb = NB };

static void start(struct td_daemon *d, const char *nvme)
{
	struct nca_args a;

	cu_start(d, nca_args(&a, nvme, 3, NCA_ANY_UID));
}

static void limit(const char *sock, unsigned int uid)
{
	char cmd[64], out[4096];

	snprintf(cmd, sizeof(cmd), "tenant-limit %u nvme:1", uid);
	t_assert_eq(td_kvmmctl(sock, cmd, out, sizeof(out)), 0);
}

int main(void)
{
	uint64_t ha[NB], hb[NB];
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	char nvme[256], cmd[64];

	if (geteuid() != 0)
		t_skip("needs root (clients of two other uids)");
	cc_nvme_path(nvme, sizeof(nvme), "cache-drop-uid-evicted");
	t_nvme_require(nvme);
	for (int b = 0; b < NB; b++) {
		ha[b] = 0xe3a0001 + b;
		hb[b] = 0xe3b0001 + b;
	}

	start(&d, nvme);
	cu_publish_as(d.sock, UID_A, UID_A, ha, NB, 1, NB);
	cu_publish_as(d.sock, UID_B, UID_B, hb, NB, 2, NB);
	for (int k = 0; k < 3; k++)
		cc_write_content(d.sock, &contents, k);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, 2 * NB); /* A's and B's */

	/* the policy evicts 2 of each from NVMe: stale copies, written by
	 * nobody since */
	limit(d.sock, UID_A);
	limit(d.sock, UID_B);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 2);
	t_assert_eq(ts.tiers[2].drops, 4);
	t_assert_eq(ts.nvme_invalidate_jobs, 0);

	snprintf(cmd, sizeof(cmd), "--uid %d", UID_A);
	r = cd_kvmmctl(d.sock, cmd);
	cd_expect(&r, 0, 0, 1, 0, 0, 0);
	/* A's 2 evicted copies, not B's (0 when they were nobody's) */
	t_assert_eq(r.nvme_stale_invalidated, 2);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.nvme_invalidated_blocks, 3);
	t_assert_eq(ts.tiers[2].used_blocks, 1);
	cc_stop(&d);

	start(&d, nvme);
	/* B's 3: its last block and its 2 stale copies (5 when A's were
	 * nobody's and not zeroed: no mark of A's covered them) */
	t_assert_eq(cd_recovered(d.sock), NB);
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, 2);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, 0, 1, -1);
	cc_stop(&d);
	unlink(nvme);
	printf("--uid A after evictions from NVMe: A's 2 stale copies invalidated, B's 3 recovered\n");
	return 0;
}
