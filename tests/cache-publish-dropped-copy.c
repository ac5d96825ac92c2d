// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A publish of a block the cache dropped while its demotion copy to the
 * host tier still runs caches it, as it does once the copy has ended: a
 * real kvmmd (lru, 2 cached GPU blocks, a host tier of 3 slots, 1 for the
 * policy, no NVMe) whose demotion jobs each wait DELAY_MS, and real client
 * processes.
 *   - content A (blocks A0, A1) fills the GPU tier; content B's publish
 *     demotes A0 and then A1 to the host tier, which holds one block: A0
 *     is dropped while its copy runs (one host drop, copies in flight);
 *   - another process publishes A0 again, well within DELAY_MS: the block
 *     is published, not "not cached", and an open of A0 right after shares
 *     those very pages from the GPU, without waiting for the copy;
 *   - once the copies ended (the dropped entry freed with its job), A0 is
 *     still on the GPU on the same pages, byte-identical; nothing failed
 *     or was refused, and kvmmd stops cleanly.
 * Before, that publish was "not cached" until the copy had ended, so what
 * the cache held depended on how soon a copy worker ran: tinylm's counters
 * in tinylm-prefix-early differed now and then on a loaded machine.
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define DELAY_MS 1000
#define TAG_A 310
#define TAG_B 311

static const uint64_t ha[2] = { 0xd0a0001ull, 0xd0a0002ull };
static const uint64_t hb[2] = { 0xd0b0001ull, 0xd0b0002ull };

/* An open of A0 alone: one block shared from the GPU, on pages want,
 * holding A0's bytes. */
static void open_a0(const char *sock, const uint32_t *want)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CC_PPB];
	struct cc c;

	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, ha, 1, &rep, ids);
	t_assert_eq(rep.nr_blocks, 1);
	t_assert_eq(rep.from_gpu, 1);
	t_assert_eq(cc_overlap(ids, CC_PPB, want, CC_PPB), CC_PPB);
	cc_check(&c, ids, 1, TAG_A);
	cc_seq_close(&c, rep.seq_id, ids, CC_PPB);
	cc_disconnect(&c);
}

int main(void)
{
	/* blocks of 4 pages of 64 KiB: 3 host slots, 1 for the policy */
	const char *args[] = { "--cache-gpu-blocks",
			       "2",
			       "--cache-policy",
			       "lru",
			       "--host-mem",
			       "768K",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	uint32_t ids[CC_PPB];
	uint64_t t0, ms;
	struct cc c;

	cc_start_with_delay(&d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", DELAY_MS);
	t_assert_eq(cc_publish_content(d.sock, ha, 2, TAG_A, NULL), 0);
	t_assert_eq(cc_publish_content(d.sock, hb, 2, TAG_B, NULL), 0);
	t0 = cc_now_ms();
	cc_connect(&c, d.sock);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.tiers[1].drops, 1); /* A0, its copy running */
	t_assert(ts.migrations_in_flight >= 2);

	/* A0 again, from fresh pages (the publisher asserts "published") */
	t_assert_eq(cc_publish_content(d.sock, ha, 1, TAG_A, ids), 0);
	open_a0(d.sock, ids);
	ms = cc_now_ms() - t0;
	cc_tier_stats(&c, &ts);
	cc_disconnect(&c);
	if (ms >= DELAY_MS / 2)
		t_fail("the publish and the open took %llu ms: the copies (%d ms) may have ended",
		       (unsigned long long)ms, DELAY_MS);
	t_assert(ts.migrations_in_flight >= 1);
	t_assert_eq(ts.not_cached, 0);

	cc_settled_stats(d.sock, &ts);
	open_a0(d.sock, ids);
	t_assert_eq(ts.not_cached, 0);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(ts.tiers[0].used_blocks, 2); /* A0 and B1 */
	cc_stop(&d);
	printf("publish of a block dropped during its copy: cached, open in %llu ms\n",
	       (unsigned long long)ms);
	return 0;
}
