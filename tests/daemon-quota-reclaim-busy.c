// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A uid's prefix open that finds a block being demoted restores it once
 * the copy ended with its quota's room made as for any restore: its own
 * idle cached blocks move down first.  The restore of a busy block is
 * tried again from the loop (kc_busy_retry()), which did not run the
 * quota reclaim that the open's walk runs for a block already below
 * (kc_prefix_room()): the restore got -EDQUOT and the block was a busy
 * miss, the open's prefix ending there.
 *
 * kvmmd (shared scope, lru, 16 GPU blocks, a host tier, every copy down
 * slowed to 1 s) and processes of uid W, quota 2M (8 blocks):
 *   - root publishes chain P (8 blocks), W chain Q (its whole quota):
 *     the GPU is full;
 *   - root publishes one block more: P[0], the LRU one, is demoted;
 *   - while its copy runs W opens P: P[0] is busy, P[1-7] are shared.
 *     Once the copy ended, one of Q's blocks goes to the host tier
 *     (quota_reclaims 1) and P[0] is restored: W gets all 8 blocks
 *     byte-identical (before: none, busy_misses 1).
 * Needs root (processes of another uid).
 */
#include "tests/quota-reclaim-common.h"

#define UID_W 63311
#define NB QR_NB

static const char *const args[] = { "--socket-mode",
				    "0666",
				    "--cache-scope",
				    "shared",
				    "--cache-policy",
				    "lru",
				    "--cache-gpu-blocks",
				    "16",
				    "--host-mem",
				    "8M",
				    "--quota",
				    "63311=2M",
				    NULL };

static uint64_t P[NB], Q[NB], X[1];

int main(void)
{
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	struct cc s;

	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	for (int i = 0; i < NB; i++) {
		P[i] = 0x7f530000 + i + 1;
		Q[i] = 0x7f540000 + i + 1;
	}
	X[0] = 0x7f550001;
	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", "1000", 1);
	cu_start(&d, args);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");

	cu_publish_as(d.sock, 0, 0, P, NB, 1, NB);
	cu_publish_as(d.sock, UID_W, UID_W, Q, NB, 2, NB);
	qr_expect_tiers(&d, 2 * NB, 0, 0);
	qr_expect_quota(&d, UID_W, NB * CC_PPB, NB * CC_PPB);
	cu_publish_as(d.sock, 0, 0, X, 1, 3, 1); /* demotes P[0] */
	cc_connect(&s, d.sock);
	cc_tier_stats(&s, &ts);
	cc_disconnect(&s);
	if (ts.migrations_in_flight != 1)
		t_fail("P[0]'s copy is not running (%llu in flight): a loaded machine?",
		       (unsigned long long)ts.migrations_in_flight);
	qr_open_as(d.sock, UID_W, P, NB, NB - 1, 1);
	cc_settled_stats(d.sock, &ts);
	printf("busy misses %llu, quota reclaims %llu, GPU %llu, host %llu\n",
	       (unsigned long long)ts.busy_misses,
	       (unsigned long long)ts.quota_reclaims,
	       (unsigned long long)ts.tiers[0].used_blocks,
	       (unsigned long long)ts.tiers[1].used_blocks);
	t_assert_eq(ts.busy_misses, 0);
	t_assert_eq(ts.quota_reclaims, 1);
	t_assert_eq(ts.tiers[1].promotions_out, 1);
	qr_expect_tiers(&d, 2 * NB, 1, 1);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
