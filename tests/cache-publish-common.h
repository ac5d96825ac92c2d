/* SPDX-License-Identifier: MIT */
/*
 * What the tests of a publish that promotes a block (cache-publish-*)
 * share: a client that publishes blocks from pages of its own, a new
 * process that opens them and says which tier each came from, the
 * misses, the wait for an open to be pending, and the check that nothing
 * leaks once every client is gone.  A block's bytes are cc_fill()'s for
 * its content tag, so every open checks them.
 */
#ifndef KVMM_TESTS_CACHE_PUBLISH_COMMON_H
#define KVMM_TESTS_CACHE_PUBLISH_COMMON_H

#include "tests/cache-common.h"

#define CP_MAX_BLOCKS 4 /* the most a read or publish here takes */

/* TIER_STATS over a connection of its own. */
static inline void cp_stats(const char *sock, struct kvmm_tier_stats_reply *ts)
{
	struct cc c;

	cc_connect(&c, sock);
	cc_tier_stats(&c, ts);
	cc_disconnect(&c);
}

/*
 * On c, connected: a region and a sequence of n blocks with content tag
 * on pages of its own, published as h[0..n).  Returns the sequence; its
 * page ids go to ids, the reply to *rep.
 */
static inline uint32_t cp_publish_own(struct cc *c, const uint64_t *h,
				      uint32_t n, uint64_t tag, uint32_t *ids,
				      struct kvmm_block_publish_reply *rep)
{
	uint32_t seq;

	cc_region(c);
	seq = cc_seq_open(c);
	cc_extend(c, seq, n * CC_TPB, ids);
	cc_fill(c, ids, n, tag);
	t_ok(cc_publish(c, seq, 0, h, n, rep));
	return seq;
}

/*
 * A new process opens h[0..n): all n from tier `from` (0 GPU, 1 host,
 * 2 NVMe), on the pages want (NULL: any), holding content tag.  who
 * names the open in a failure.
 */
static inline void cp_read(const char *sock, const uint64_t *h, uint32_t n,
			   uint64_t tag, int from, const uint32_t *want,
			   const char *who)
{
	pid_t p;

	t_assert(n <= CP_MAX_BLOCKS && from >= 0 && from <= 2);
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[CP_MAX_BLOCKS * CC_PPB], got[3];
		struct cc c;

		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, n, &rep, ids);
		got[0] = rep.from_gpu;
		got[1] = rep.from_host;
		got[2] = rep.from_nvme;
		if (rep.nr_blocks != n || got[from] != n)
			t_fail("%s: %u blocks: gpu %u host %u nvme %u", who,
			       rep.nr_blocks, got[0], got[1], got[2]);
		if (want)
			t_assert_eq(cc_overlap(ids, n * CC_PPB, want,
					       n * CC_PPB),
				    n * CC_PPB);
		cc_check(&c, ids, n, tag);
		cc_seq_close(&c, rep.seq_id, ids, n * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* h[0] is a miss for a new client. */
static inline void cp_expect_miss(const char *sock, const uint64_t *h)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CC_PPB];
	struct cc c;

	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, h, 1, &rep, ids);
	t_assert_eq(rep.nr_blocks, 0);
	cc_seq_close(&c, rep.seq_id, ids, 0);
	cc_disconnect(&c);
}

/* Wait (10 s) until kvmmd has one PREFIX_OPEN pending; what names it. */
static inline void cp_wait_pending(const char *sock, const char *what)
{
	struct kvmm_tier_stats_reply ts;
	struct cc c;
	int i;

	cc_connect(&c, sock);
	for (i = 0; i < 1000; i++) {
		cc_tier_stats(&c, &ts);
		if (ts.prefix_opens_pending == 1)
			break;
		usleep(10000);
	}
	cc_disconnect(&c);
	if (i == 1000)
		t_fail("%s never became pending", what);
}

/* Once every client is gone: no sequence, nothing mapped, the pool holds
 * the cached GPU blocks' pages (ts, settled) and no more. */
static inline void cp_expect_no_leak(struct td_daemon *d,
				     const struct kvmm_tier_stats_reply *ts)
{
	struct kvmm_status_reply st;

	for (int i = 0; i < 1000; i++) {
		t_ok(td_status(d, &st));
		if (st.sessions <= 1 && !st.sequences)
			break;
		usleep(10000);
	}
	t_assert_eq(st.sequences, 0);
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.pages_allocated, ts->tiers[0].used_blocks * CC_PPB);
	t_assert_eq(st.demotions_queued, 0);
}

#endif
