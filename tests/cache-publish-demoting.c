// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * A publish of content whose cached block is still being copied down to
 * the host tier promotes it, as it does once the copy has ended: a real
 * kvmmd (lru, 2 cached GPU blocks, a host tier) whose demotion jobs each
 * wait DELAY_MS, and real client processes.  In each case block A is
 * published and closed, then B and C (one sequence) push A down; while
 * A's copy runs (the host tier's bytes_in still 0) a client publishes A
 * from pages of its own:
 *   - the reply says published 1, promoted 1, duplicates 0; once the
 *     copies ended A is on the GPU with those very pages (a new process's
 *     prefix open shares them: same page ids, same bytes, no restore),
 *     C stays on the GPU and B, A's victim, went to the host tier; the
 *     counters are exact (demotions_in 2, promotions_by_publish 1, two
 *     copies' bytes_in, no drop, no duplicate) and nothing leaks (the
 *     pool holds the 2 GPU blocks' pages, the host tier B's slot only);
 *     the publisher closed and went away before A's copy ended;
 *   - an open of A that waited for its copy (BUSY) shares the published
 *     pages too, without a restore; a second publish of A, the copy still
 *     running, is a duplicate;
 *   - the copy fails (KVMMD_TEST_MIGRATE_FAIL=gpu-host:1): A stays on the
 *     GPU all the same, counted in migrations_failed, nothing dropped;
 *   - the promoted block is dropped by an operator (ADMIN_CACHE_DROP of
 *     the GPU tier) before its old copy ended: that copy's host slot and
 *     pages still go back when it ends;
 *   - a copy that waits in line for a host slot (all but one held by
 *     KVMMD_TEST_HOST_SLOTS_HELD, the free one taken by another copy) is
 *     called off by the publish: its pages go back at once, the
 *     published ones are the GPU copy.
 * kvmmd stops cleanly after each.  Before 6 December the publish was a
 * duplicate while the copy ran (promoted 0, duplicates 1) and A stayed in
 * the host tier, so the next open reloaded it.
 */
#include "tests/cache-drop-common.h"
#include "tests/cache-publish-common.h"

#define DELAY_MS 600
#define TA 61
#define TBC 62

static const uint64_t ha[1] = { 0xde0a0001ull };
static const uint64_t hbc[2] = { 0xde0b0001ull, 0xde0b0002ull };

/* kvmmd with slow demotions, and the test knob knob=value (NULL: none). */
static void start(struct td_daemon *d, const char *knob, const char *value)
{
	const char *args[] = { "--gpu-mem",  "2M", "--cache-gpu-blocks", "2",
			       "--host-mem", "2M", "--cache-policy",	 "lru",
			       NULL };

	if (knob)
		setenv(knob, value, 1);
	cc_start_with_delay(d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", DELAY_MS);
	if (knob)
		unsetenv(knob);
}

/* A published and idle, then B and C: A is the LRU victim, its copy to
 * the host tier runs (DELAY_MS). */
static void push_a_down(const char *sock)
{
	struct kvmm_tier_stats_reply ts;

	t_assert_eq(cc_publish_content(sock, ha, 1, TA, NULL), 0);
	t_assert_eq(cc_publish_content(sock, hbc, 2, TBC, NULL), 0);
	cp_stats(sock, &ts);
	t_assert_eq(ts.migrations_in_flight, 1);
	t_assert_eq(ts.tiers[1].demotions_in, 1);
	t_assert_eq(ts.tiers[1].bytes_in, 0); /* A's copy has not ended */
}

/*
 * A client publishes A from a sequence of its own while A's copy still
 * runs, then closes and disconnects; the reply goes to *rep, its page ids
 * to ids.
 */
static void publish_a(const char *sock, struct kvmm_block_publish_reply *rep,
		      uint32_t *ids)
{
	struct kvmm_tier_stats_reply ts;
	struct cc c;
	uint32_t seq;

	cc_connect(&c, sock);
	seq = cp_publish_own(&c, ha, 1, TA, ids, rep);
	cc_tier_stats(&c, &ts);
	/* the old copy still runs: the publish did not wait for it */
	t_assert_eq(ts.tiers[1].bytes_in, 0);
	t_assert(ts.migrations_in_flight >= 1);
	printf("publish during A's copy: published %u promoted %u duplicates %u not cached %u\n",
	       rep->published, rep->promoted, rep->duplicates, rep->not_cached);
	cc_seq_close(&c, seq, ids, CC_PPB);
	cc_disconnect(&c);
}

/* A second client publishes A, still during the old copy: a duplicate of
 * the GPU copy the first one's publish made. */
static void publish_a_again(const char *sock)
{
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[CC_PPB];
	struct cc c;
	uint32_t seq;

	cc_connect(&c, sock);
	seq = cp_publish_own(&c, ha, 1, TA, ids, &rep);
	t_assert_eq(rep.duplicates, 1);
	t_assert_eq(rep.published + rep.promoted + rep.not_cached, 0);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.tiers[1].bytes_in, 0);
	cc_seq_close(&c, seq, ids, CC_PPB);
	cc_disconnect(&c);
}

static void expect_promoted(const struct kvmm_block_publish_reply *rep)
{
	t_assert_eq(rep->published, 1);
	t_assert_eq(rep->promoted, 1);
	t_assert_eq(rep->duplicates, 0);
	t_assert_eq(rep->not_cached, 0);
}

/* A new process opens A: from the GPU, on pages want, content TA. */
static void read_a_gpu(const char *sock, const uint32_t *want)
{
	cp_read(sock, ha, 1, TA, 0, want, "open of A");
}

/* The tiers once the copies ended: A and C on the GPU, B in host memory
 * (A's victim), two copies down, one promotion, nothing lost. */
static void expect_settled(struct td_daemon *d, uint64_t failed, uint64_t dups,
			   struct kvmm_tier_stats_reply *ts)
{
	cc_settled_stats(d->sock, ts);
	printf("settled: gpu %llu host %llu used; host demotions_in %llu bytes_in %llu promotions_by_publish %llu promotions_out %llu; failed %llu\n",
	       (unsigned long long)ts->tiers[0].used_blocks,
	       (unsigned long long)ts->tiers[1].used_blocks,
	       (unsigned long long)ts->tiers[1].demotions_in,
	       (unsigned long long)ts->tiers[1].bytes_in,
	       (unsigned long long)ts->tiers[1].promotions_by_publish,
	       (unsigned long long)ts->tiers[1].promotions_out,
	       (unsigned long long)ts->migrations_failed);
	t_assert_eq(ts->tiers[0].used_blocks, 2);
	t_assert_eq(ts->tiers[1].used_blocks, 1); /* B's slot, not A's */
	t_assert_eq(ts->tiers[1].demotions_in, 2);
	t_assert_eq(ts->tiers[1].promotions_by_publish, 1);
	t_assert_eq(ts->tiers[1].promotions_out, 0);
	t_assert_eq(ts->tiers[1].bytes_in,
		    (2 - failed) * (uint64_t)CC_PPB * CC_PAGE);
	t_assert_eq(ts->migrations_failed, failed);
	t_assert_eq(ts->tiers[0].drops + ts->tiers[1].drops, 0);
	t_assert_eq(ts->publishes, 4 + dups);
	t_assert_eq(ts->duplicates, dups);
	t_assert_eq(ts->not_cached, 0);
	cp_expect_no_leak(d, ts);
}

static void promoted_during_copy(void)
{
	struct kvmm_block_publish_reply rep;
	struct kvmm_prefix_open_reply po;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[CC_PPB], rids[CC_PPB];
	struct td_daemon d;
	struct cc r;

	start(&d, NULL, NULL);
	push_a_down(d.sock);
	/* an open of A now waits for the copy (BUSY) */
	cc_connect(&r, d.sock);
	cc_region(&r);
	cc_prefix_send(&r, ha, 1);
	cp_wait_pending(d.sock, "the open of A");
	publish_a(d.sock, &rep, ids);
	expect_promoted(&rep);
	publish_a_again(d.sock);
	cc_prefix_recv(&r, &po, rids);
	t_assert_eq(po.nr_blocks, 1);
	t_assert_eq(po.from_gpu, 1);
	t_assert_eq(cc_overlap(rids, CC_PPB, ids, CC_PPB), CC_PPB);
	cc_check(&r, rids, 1, TA);
	cc_seq_close(&r, po.seq_id, rids, CC_PPB);
	cc_disconnect(&r);
	expect_settled(&d, 0, 1, &ts);
	read_a_gpu(d.sock, ids);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].promotions_out, 0); /* no reload */
	t_assert_eq(ts.tiers[0].hits, 2);
	cc_stop(&d);
}

static void copy_fails(void)
{
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[CC_PPB];
	struct td_daemon d;

	start(&d, "KVMMD_TEST_MIGRATE_FAIL", "gpu-host:1");
	push_a_down(d.sock);
	publish_a(d.sock, &rep, ids);
	expect_promoted(&rep);
	expect_settled(&d, 1, 0, &ts);
	read_a_gpu(d.sock, ids);
	cc_stop(&d);
}

static void dropped_during_copy(void)
{
	struct kvmm_admin_cache_drop_reply dr;
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[CC_PPB];
	struct td_daemon d;

	start(&d, NULL, NULL);
	push_a_down(d.sock);
	publish_a(d.sock, &rep, ids);
	expect_promoted(&rep);
	dr = cd_kvmmctl(d.sock, "--tier gpu"); /* A and C, idle */
	cd_expect(&dr, 2, 0, 0, 0, 0, 0);
	cp_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].bytes_in, 0); /* A's old copy still runs */
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 0);
	t_assert_eq(ts.tiers[1].used_blocks, 1); /* B */
	t_assert_eq(ts.tiers[1].bytes_in, 2 * (uint64_t)CC_PPB * CC_PAGE);
	t_assert_eq(ts.migrations_failed, 0);
	cp_expect_no_leak(&d, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 0);
	cp_expect_miss(d.sock, ha); /* gone, as dropped */
	cc_stop(&d);
}

/*
 * One host slot free (the other 7 held): A1's copy takes it, A2's waits
 * in line for one.  A2 is published meanwhile: promoted, its queued copy
 * called off.  Its victim B1 waits in line in turn, and is dropped when
 * A1's copy ends and no slot will come (as any demotion then is).
 */
static void promoted_while_queued(void)
{
	static const uint64_t ha1[1] = { 0xde0c0001ull };
	static const uint64_t hb[2] = { 0xde0d0001ull, 0xde0d0002ull };
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	uint32_t ids[CC_PPB];
	struct td_daemon d;
	struct cc c;
	uint32_t seq;

	start(&d, "KVMMD_TEST_HOST_SLOTS_HELD", "7");
	t_assert_eq(cc_publish_content(d.sock, ha1, 1, TA + 1, NULL), 0);
	t_assert_eq(cc_publish_content(d.sock, ha, 1, TA, NULL), 0);
	t_assert_eq(cc_publish_content(d.sock, hb, 2, TBC, NULL), 0);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.demotions_queued, 1); /* A's copy waits for a slot */
	cc_connect(&c, d.sock);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.tiers[1].capacity_blocks, 8);
	t_assert_eq(ts.migrations_in_flight, 1); /* A1's */
	seq = cp_publish_own(&c, ha, 1, TA, ids, &rep);
	expect_promoted(&rep);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.tiers[1].bytes_in, 0); /* A1's copy still runs */
	cc_seq_close(&c, seq, ids, CC_PPB);
	cc_disconnect(&c);
	cc_settled_stats(d.sock, &ts);
	printf("queued: gpu %llu host %llu used; host demotions_in %llu drops %llu bytes_in %llu promotions_by_publish %llu\n",
	       (unsigned long long)ts.tiers[0].used_blocks,
	       (unsigned long long)ts.tiers[1].used_blocks,
	       (unsigned long long)ts.tiers[1].demotions_in,
	       (unsigned long long)ts.tiers[1].drops,
	       (unsigned long long)ts.tiers[1].bytes_in,
	       (unsigned long long)ts.tiers[1].promotions_by_publish);
	t_assert_eq(ts.tiers[0].used_blocks, 2); /* A, B2 */
	t_assert_eq(ts.tiers[1].used_blocks, 7 + 1); /* held, A1 */
	t_assert_eq(ts.tiers[1].demotions_in, 3); /* A1, A, B1 */
	t_assert_eq(ts.tiers[1].drops, 1); /* B1: no slot came */
	t_assert_eq(ts.tiers[1].bytes_in, (uint64_t)CC_PPB * CC_PAGE);
	t_assert_eq(ts.tiers[1].promotions_by_publish, 1);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(ts.duplicates, 0);
	cp_expect_no_leak(&d, &ts);
	read_a_gpu(d.sock, ids);
	cc_stop(&d);
}

int main(void)
{
	promoted_during_copy();
	copy_fails();
	dropped_during_copy();
	promoted_while_queued();
	printf("ok: a publish during its block's copy down promotes it\n");
	return 0;
}
