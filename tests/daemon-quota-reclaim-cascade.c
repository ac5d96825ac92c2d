// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * A uid's quota reclaim moves its own GPU blocks down without pushing
 * another uid's blocks out of the tiers below.  kvmmd: shared scope, lru,
 * 8 GPU blocks, a host tier of 4, no NVMe, uid W's quota 2M (8 blocks):
 *
 *  - B's 4 blocks fill the host tier, W's 8 fill the GPU and its quota.
 *    W extends 1 block: one of its blocks leaves the GPU, and with the
 *    host full of B's it is dropped.  The review's reproducer: it went to
 *    the host and B's least recent block was dropped in its place.
 *  - The host holds B's 2 blocks and W's own 2 (chain R): W's victim
 *    goes to the host, and the host's room comes from R, not from B.
 *
 * Needs root (processes of other uids).
 */
#include "tests/quota-reclaim-common.h"

#define UID_W 63611
#define UID_B 63612
#define NB 8 /* W's quota's worth of blocks */

static const char *const args[] = { "--socket-mode",
				    "0666",
				    "--cache-scope",
				    "shared",
				    "--cache-policy",
				    "lru",
				    "--cache-gpu-blocks",
				    "8",
				    "--host-mem",
				    "1536K",
				    "--quota",
				    "63611=2M",
				    NULL };

/* The host tier's blocks and drops, and the blocks moved for quotas. */
static void expect_host(const struct td_daemon *d, uint64_t host,
			uint64_t drops, uint64_t quota_reclaims)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[1].used_blocks, host);
	t_assert_eq(ts.tiers[1].drops, drops);
	t_assert_eq(ts.quota_reclaims, quota_reclaims);
}

/* Tenant id's blocks on the GPU and the host, and its dropped ones. */
static void expect_tenant(const struct td_daemon *d, uint32_t id, uint64_t gpu,
			  uint64_t host, uint64_t dropped)
{
	struct kvmm_tenants_reply *r = cu_tenants(d->sock);
	const struct kvmm_tenant_info *t = cu_tenant(r, id);

	if (t->cached_blocks[0] != gpu || t->cached_blocks[1] != host ||
	    t->dropped_blocks != dropped)
		t_fail("tenant %u: gpu %llu host %llu dropped %llu; expected %llu %llu %llu",
		       id, (unsigned long long)t->cached_blocks[0],
		       (unsigned long long)t->cached_blocks[1],
		       (unsigned long long)t->dropped_blocks,
		       (unsigned long long)gpu, (unsigned long long)host,
		       (unsigned long long)dropped);
	free(r);
}

int main(void)
{
	uint64_t P[NB], Y[4], R[2];
	struct td_daemon d;

	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	for (int i = 0; i < NB; i++)
		P[i] = 0x7f610000 + i + 1;
	for (int i = 0; i < 4; i++)
		Y[i] = 0x7f620000 + i + 1;
	for (int i = 0; i < 2; i++)
		R[i] = 0x7f630000 + i + 1;

	/* the host all B's: W's victim has no room that is its own */
	cu_start(&d, args);
	cu_publish_as(d.sock, UID_B, UID_B, Y, 4, 2, 4);
	cu_publish_as(d.sock, UID_W, UID_W, P, NB, 1, NB);
	expect_host(&d, 4, 0, 0);
	expect_tenant(&d, UID_B, 0, 4, 0);
	expect_tenant(&d, UID_W, NB, 0, 0);
	qr_extend_one_as(d.sock, UID_W);
	expect_host(&d, 4, 1, 1);
	expect_tenant(&d, UID_B, 0, 4, 0);
	expect_tenant(&d, UID_W, NB - 1, 0, 1);
	cc_stop(&d);

	/* the host half W's own (R, down for W's quota when P came) */
	cu_start(&d, args);
	cu_publish_as(d.sock, UID_W, UID_W, R, 2, 3, 2);
	cu_publish_as(d.sock, UID_B, UID_B, Y, 2, 2, 2);
	cu_publish_as(d.sock, UID_W, UID_W, P, NB, 1, NB);
	expect_host(&d, 4, 0, 2);
	expect_tenant(&d, UID_B, 0, 2, 0);
	expect_tenant(&d, UID_W, NB, 2, 0);
	qr_extend_one_as(d.sock, UID_W);
	expect_host(&d, 4, 1, 3);
	expect_tenant(&d, UID_B, 0, 2, 0);
	expect_tenant(&d, UID_W, NB - 1, 2, 1);
	/* R's least recent block, its first, went, and P's victim stayed
	 * cached: a dropped victim would have left R whole (2 blocks) */
	cu_open_as(d.sock, UID_B, UID_B, R, 2, 0, 3, -1);
	cc_stop(&d);
	return 0;
}
