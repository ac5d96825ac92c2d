// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A pinned block restored while the GPU tier has no room stays cached (and
 * pinned) where it was.  A real kvmmd (lru, 3 cached GPU blocks, a host
 * tier) and real client processes:
 *   - content B (3 blocks) is published, then content A: B goes down to
 *     the host tier;
 *   - a holder opens A as a prefix and keeps it open: every cached GPU
 *     block is in use, so the GPU tier can admit nothing;
 *   - B's block 0 is pinned (plain) and block 1 pinned with a TTL of a
 *     minute, both found in the host tier;
 *   - a reader opens B: 3 blocks reloaded from the host tier, byte-
 *     identical.  Once the restores settled, B is still cached in the host
 *     tier: blocks 0 and 1 stayed there, block 2 (unpinned: its own
 *     victim) was copied back down as before (1 more demotion), nothing
 *     is dropped; the plain pin is still there (unpin: 0), and a second
 *     reader finds B whole again.
 * Before the fix the restore of a pinned block moved it up in the policy
 * with its lower copy already freed, found no victim on the GPU (the
 * block itself was pinned) and dropped it, pins and all (unpin -ENOENT,
 * 2 drops).  Found by tests/daemon-fuzz.c.
 */
#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 3

/* content 0 is B, content 1 is A */
static const struct cc_contents contents = { .base = 0x7e5000,
					     .tag0 = 40,
					     .nb = NB };

int main(void)
{
	const char *args[] = { "--cache-gpu-blocks",
			       "3",
			       "--host-mem",
			       "2M",
			       "--cache-policy",
			       "lru",
			       "--pin-quota",
			       "4",
			       NULL };
	struct kvmm_prefix_open_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[NB * CC_PPB];
	struct kvmm_pin_opts o;
	struct kvmm_conn *pinner;
	uint64_t hb[NB], ha[NB];
	struct td_daemon d;
	struct cc holder;

	cc_start(&d, args);
	cc_content_hashes(&contents, 0, hb);
	cc_content_hashes(&contents, 1, ha);
	cc_write_content(d.sock, &contents, 0);
	cc_write_content(d.sock, &contents, 1);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, NB);

	cc_connect(&holder, d.sock);
	cc_region(&holder);
	cc_prefix(&holder, ha, NB, &rep, ids);
	t_assert_eq(rep.from_gpu, NB);

	pinner = cc_connect_lib(d.sock, "pinner");
	t_ok(cc_pin(pinner, hb[0], 0, 0, 0, &o));
	t_assert_eq(o.tier, 1);
	t_ok(cc_pin(pinner, hb[1], KVMM_PIN_F_TTL, 60ull * 1000000000, 0, &o));
	t_assert_eq(o.tier, 1);

	cc_read_content(d.sock, &contents, 0, NB, 1);
	cc_settled_stats(d.sock, &ts);
	cc_print_gpu_host("after the reload", &ts);
	t_assert_eq(ts.tiers[1].promotions_out, NB);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops, 0);
	t_assert_eq(ts.tiers[1].used_blocks, NB);
	t_assert_eq(ts.tiers[1].demotions_in, NB + 1);
	t_ok(kvmm_block_unpin(pinner, hb[0]));
	cc_read_content(d.sock, &contents, 0, NB, 1);

	kvmm_disconnect(pinner);
	cc_seq_close(&holder, rep.seq_id, ids, NB * CC_PPB);
	cc_disconnect(&holder);
	cc_stop(&d);
	printf("restore of pinned blocks ok\n");
	return T_PASS;
}
