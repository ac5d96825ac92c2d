// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A quota reclaim with the host tier full pins the other uids' host
 * blocks for its policy call and unpins each of them once after it.  A
 * host block whose copy down still runs keeps its GPU pages, so it is on
 * both lists the reclaim walks to unpin (kd_cache.gpu and the lower-tier
 * chain): it was unpinned twice, and a client's BLOCK_PIN on it went
 * with the second unpin.  The next host pressure evicted the pinned
 * block and the client's BLOCK_UNPIN got -ENOENT.
 *
 * kvmmd (shared scope, lru, 8 GPU blocks, a host tier of 4 blocks, every
 * copy down slowed to 1.5 s), uid B (no quota) and uid W (quota 2M, 8
 * blocks):
 *   - B publishes Y (4 blocks), W publishes P (8 blocks): Y goes to the
 *     host tier, its copies running;
 *   - root pins Y[3] (on the host tier);
 *   - W extends one block: its quota reclaim finds the host tier full of
 *     B's blocks, pins them and moves one of P down, which the host tier
 *     drops (quota_reclaims 1); B keeps its 4 host blocks;
 *   - root publishes 8 new blocks: P goes down, the host tier drops
 *     what is not pinned: B keeps Y[3] (host 1, dropped 3; before: host
 *     0, dropped 4) and the unpin of Y[3] is 0 (before: -ENOENT).
 * Needs root (processes of other uids).
 */
#include "tests/quota-reclaim-common.h"

#define UID_W 63611
#define UID_B 63612
#define NB QR_NB

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

static uint64_t P[NB], Y[4], Z[NB];

/* uid B's host blocks and blocks dropped so far. */
static void expect_b(const struct td_daemon *d, uint64_t host, uint64_t dropped)
{
	struct kvmm_tenants_reply *r = cu_tenants(d->sock);
	const struct kvmm_tenant_info *t = cu_tenant(r, UID_B);

	printf("tenant B: host %llu, dropped %llu\n",
	       (unsigned long long)t->cached_blocks[1],
	       (unsigned long long)t->dropped_blocks);
	t_assert_eq(t->cached_blocks[1], host);
	t_assert_eq(t->dropped_blocks, dropped);
	free(r);
}

int main(void)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts o;
	struct kvmm_conn *pc;
	struct td_daemon d;
	struct cc s;

	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	for (int i = 0; i < NB; i++) {
		P[i] = 0x7f610000 + i + 1;
		Z[i] = 0x7f640000 + i + 1;
	}
	for (int i = 0; i < 4; i++)
		Y[i] = 0x7f620000 + i + 1;
	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", "1500", 1);
	cu_start(&d, args);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");

	cu_publish_as(d.sock, UID_B, UID_B, Y, 4, 2, 4);
	/* W's 8 blocks push B's 4 down: their copies run for 1.5 s */
	cu_publish_as(d.sock, UID_W, UID_W, P, NB, 1, NB);
	pc = cc_connect_lib(d.sock, "pinner");
	t_assert_eq(cc_pin(pc, Y[3], 0, 0, 0, &o), 0);
	t_assert_eq(o.tier, 1);
	/* the reclaim must find Y's copies still running, or Y[3] is only on
	 * the lower-tier list and this tests nothing (W's extend then waits
	 * for the copy of the block it moved down, queued behind Y's) */
	cc_connect(&s, d.sock);
	cc_tier_stats(&s, &ts);
	cc_disconnect(&s);
	if (ts.migrations_in_flight != 4)
		t_fail("Y's copies are not all running (%llu in flight): a loaded machine?",
		       (unsigned long long)ts.migrations_in_flight);
	qr_extend_one_as(d.sock, UID_W);
	/* the host tier was full of B's pinned blocks: one of P went down */
	qr_expect_tiers(&d, NB - 1, 4, 1);
	expect_b(&d, 4, 0);

	/* host pressure: 8 new blocks (root, no quota) push the GPU blocks
	 * into the full host tier; Y[3] is pinned and stays */
	t_assert_eq(cc_publish_content(d.sock, Z, NB, 300, NULL), 0);
	expect_b(&d, 1, 3);
	t_assert_eq(kvmm_block_unpin(pc, Y[3]), 0);
	kvmm_disconnect(pc);
	cc_stop(&d);
	printf("ok: Y[3] kept its pin through W's quota reclaim\n");
	return 0;
}
