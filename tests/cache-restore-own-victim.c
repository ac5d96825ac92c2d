// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * Under the prefix rule (asym), a block restored while the GPU tier has
 * no room is its own victim there even when its children are cached
 * below with it: it goes up and straight back down, and the policy sees
 * the use.  A real kvmmd (asym, 3 cached GPU blocks, a host tier) and
 * real client processes:
 *   - content B (3 blocks) is published, then content A: B goes down to
 *     the host tier;
 *   - a holder opens A as a prefix and keeps it open: every cached GPU
 *     block is in use, so the GPU tier can admit nothing;
 *   - a reader opens B: 3 blocks reloaded from the host tier, byte-
 *     identical.  Once the restores settled, B is cached in the host
 *     tier again: each of its 3 blocks went up and was copied back down
 *     (3 more demotions into the host tier), nothing dropped; a second
 *     reader finds B whole.
 * Before the fix kvmmd kept a restored block below, without telling the
 * policy, whenever the GPU could not take it and the block was not
 * evictable where it was (pol_cache_evictable() in the host tier): B's
 * blocks 0 and 1 have children in the host tier, so they are not leaves
 * there, though on the GPU they are, and only block 2 went up and back
 * down (1 more demotion).  The policy, asked the same in its own access,
 * takes them all; kvmm-replay --model-daemon models that, and the two
 * replays parted where a request was longer than the GPU tier
 * (tests/replay-daemon.sh, asym at 40 GPU + 100 host).
 */
#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 3

/* content 0 is B, content 1 is A */
static const struct cc_contents contents = { .base = 0x7e6000,
					     .tag0 = 50,
					     .nb = NB };

int main(void)
{
	const char *args[] = { "--cache-gpu-blocks", "3",    "--host-mem", "2M",
			       "--cache-policy",     "asym", NULL };
	struct kvmm_prefix_open_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[NB * CC_PPB];
	uint64_t ha[NB];
	struct td_daemon d;
	struct cc holder;

	cc_start(&d, args);
	cc_content_hashes(&contents, 1, ha);
	cc_write_content(d.sock, &contents, 0);
	cc_write_content(d.sock, &contents, 1);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, NB);
	t_assert_eq(ts.tiers[1].demotions_in, NB);

	cc_connect(&holder, d.sock);
	cc_region(&holder);
	cc_prefix(&holder, ha, NB, &rep, ids);
	t_assert_eq(rep.from_gpu, NB);

	cc_read_content(d.sock, &contents, 0, NB, 1);
	cc_settled_stats(d.sock, &ts);
	cc_print_gpu_host("after the reload", &ts);
	t_assert_eq(ts.tiers[1].promotions_out, NB);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops, 0);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, NB);
	/* each of B's blocks up and back down, not only its leaf */
	t_assert_eq(ts.tiers[1].demotions_in, NB + NB);
	cc_read_content(d.sock, &contents, 0, NB, 1);

	cc_seq_close(&holder, rep.seq_id, ids, NB * CC_PPB);
	cc_disconnect(&holder);
	cc_stop(&d);
	printf("restored blocks with children below are their own victims ok\n");
	return T_PASS;
}
