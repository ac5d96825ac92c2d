// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A block a live sequence holds, chosen as the GPU victim, is copied down
 * to the host tier instead of uncached: a real kvmmd (lru, 8 cached GPU
 * blocks, a host tier, an NVMe file) whose demotion jobs each wait
 * DELAY_MS, and real client processes.
 *   - the holder publishes 9 blocks of content 0 from one sequence and
 *     keeps it open: blocks 0-7 fill the GPU tier, all referenced, so the
 *     policy's victim when it admits block 8 is block 8 itself.  It is
 *     published (not "not cached"), its copy runs (one migration in
 *     flight), the holder's pages stay readable and unchanged, and its
 *     publish of block 8 again is a duplicate;
 *   - another process's prefix open of the 9 blocks (waiting for the copy
 *     to end) shares blocks 0-7 and reloads block 8 from the host tier:
 *     all 9 byte-identical;
 *   - content 1, published the same way by a holder that closes and goes
 *     away while block 8's copy still runs, comes back whole too;
 *   - nothing leaks: once the holders are gone the pool holds exactly the
 *     cached GPU blocks, nothing mapped, no sequence, nothing dropped or
 *     failed, and kvmmd stops cleanly;
 *   - TIER_STATS' held_copies (ABI 1.7) counts each copy of a held block:
 *     1 after the first publish, 5 in the end (the 2 publishes and the
 *     3 opens each held 9 blocks with 8 on the GPU).
 * Before kvmmd copied held blocks, block 8 was uncached (published 8 of 9,
 * not cached 1) and the opens stopped at 8 blocks.
 */
#include "tests/cache-restore-common.h"

#define DELAY_MS 150
#define NB 9

static void hashes(int k, uint64_t *h)
{
	for (int b = 0; b < NB; b++)
		h[b] = cr_hash(k, b);
}

/* A process opens content k's NB blocks as a prefix and checks them. */
static void open_check(const char *sock, int k)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[NB * CC_PPB];
		uint64_t h[NB];
		struct cc c;

		hashes(k, h);
		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, NB, &rep, ids);
		if (rep.nr_blocks != NB)
			t_fail("content %d: prefix open got %u of %d blocks", k,
			       rep.nr_blocks, NB);
		cc_check(&c, ids, NB, 200 + k);
		cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* The holder: content k in NB blocks of one sequence, all published. */
static uint32_t hold(struct cc *c, const char *sock, int k, uint32_t *pages)
{
	struct kvmm_block_publish_reply rep;
	uint64_t h[NB];
	uint32_t seq;

	hashes(k, h);
	cc_connect(c, sock);
	cc_region(c);
	seq = cc_seq_open(c);
	cc_extend(c, seq, NB * CC_TPB, pages);
	cc_fill(c, pages, NB, 200 + k);
	t_ok(cc_publish(c, seq, 0, h, NB, &rep));
	if (rep.published != NB || rep.not_cached)
		t_fail("content %d: published %u of %d, not cached %u", k,
		       rep.published, NB, rep.not_cached);
	return seq;
}

/* The holder process of content 1: publishes, closes at once, exits. */
static void hold_and_go(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		uint32_t pages[NB * CC_PPB];
		struct kvmm_tier_stats_reply ts;
		struct cc c;
		uint32_t seq = hold(&c, sock, 1, pages);

		cc_tier_stats(&c, &ts);
		t_assert(ts.migrations_in_flight >= 1);
		cc_seq_close(&c, seq, pages, NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

int main(void)
{
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	uint32_t pages[NB * CC_PPB];
	struct cr_env env;
	char delay[16];
	struct cc c;
	uint64_t h[NB];
	uint32_t seq;

	snprintf(delay, sizeof(delay), "%d", DELAY_MS);
	setenv("KVMMD_TEST_DEMOTE_DELAY_MS", delay, 1);
	cr_start(&env, 40, 0);
	unsetenv("KVMMD_TEST_DEMOTE_DELAY_MS");

	seq = hold(&c, env.d.sock, 0, pages);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.migrations_in_flight, 1); /* block 8 goes down */
	t_assert_eq(ts.tiers[1].demotions_in, 1);
	t_assert_eq(ts.held_copies, 1); /* that one (ABI 1.7) */
	t_assert_eq(ts.not_cached, 0);
	cc_check(&c, pages, NB, 200);
	hashes(0, h);
	t_ok(cc_publish(&c, seq, NB - 1, h + NB - 1, 1, &rep));
	t_assert_eq(rep.duplicates, 1);
	t_assert_eq(rep.published, 0);

	open_check(env.d.sock, 0);
	cc_settled_stats(env.d.sock, &ts);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(ts.busy_misses, 0);
	t_assert(ts.tiers[1].bytes_in >= CC_PPB * CC_PAGE);
	cc_check(&c, pages, NB, 200); /* the holder's pages: untouched */
	t_ok(td_status(&env.d, &st));
	/* the 8 cached GPU blocks, and block 8's pages: the holder's own */
	t_assert_eq(st.pages_allocated,
		    ts.tiers[0].used_blocks * CC_PPB + CC_PPB);
	cc_seq_close(&c, seq, pages, NB * CC_PPB);
	cc_disconnect(&c);

	/* the holder goes away while block 8's copy runs */
	hold_and_go(env.d.sock);
	open_check(env.d.sock, 1);
	open_check(env.d.sock, 0); /* from the lower tiers now */

	cc_settled_stats(env.d.sock, &ts);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(ts.not_cached, 0);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops + ts.tiers[2].drops,
		    0);
	for (int i = 0; i < 1000; i++) {
		t_ok(td_status(&env.d, &st));
		if (st.sessions <= 1)
			break;
		usleep(10000);
	}
	t_assert_eq(st.sequences, 0);
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.pages_allocated, ts.tiers[0].used_blocks * CC_PPB);
	/* each time a sequence held all 9 blocks with 8 on the GPU, the
	 * ninth was the victim and copied down while held: the 2 publishes
	 * and the 3 opens (whose last restore is admitted held) */
	t_assert_eq(ts.held_copies, 5);
	printf("held block copied down: GPU %llu, host %llu, NVMe %llu blocks, %llu host demotions, %llu held copies\n",
	       (unsigned long long)ts.tiers[0].used_blocks,
	       (unsigned long long)ts.tiers[1].used_blocks,
	       (unsigned long long)ts.tiers[2].used_blocks,
	       (unsigned long long)ts.tiers[1].demotions_in,
	       (unsigned long long)ts.held_copies);
	cr_stop(&env);
	printf("held blocks demoted by copy ok\n");
	return 0;
}
