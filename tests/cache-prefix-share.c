// SPDX-License-Identifier: MIT
/*
 * Zero-copy prefix sharing with a real kvmmd and three client processes.
 * Process A writes three full blocks and a partial tail and publishes the
 * full ones (publishing the tail is refused).  Process B opens a sequence
 * on A's hashes plus one unknown hash: it gets exactly the three blocks,
 * on the same physical pages as A (same page ids, same bytes, and the
 * pool's allocated count does not move), and sees A's later writes to
 * them (one memory, not a copy).  After A closes its sequence and exits,
 * the cache still holds the blocks and process C hits them.  At the end
 * the daemon accounts for exactly the cached pages and stops cleanly.
 */
#include <signal.h>
#include <sys/wait.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/wait.h"

static const uint64_t hashes[4] = { 0x1111, 0x2222, 0x3333, 0x4444 };

int main(void)
{
	struct td_daemon d;
	struct kvmm_status_reply st;
	int a2p[2], p2a[2];
	char ch;
	pid_t a, b, cpid;

	if (td_start(&d, NULL))
		t_fail("kvmmd did not start");
	t_ok(pipe(a2p));
	t_ok(pipe(p2a));

	a = fork();
	if (a == 0) {
		struct cc c;
		struct kvmm_block_publish_reply rep;
		uint32_t ids[4 * CC_PPB];
		uint32_t seq;

		cc_connect(&c, d.sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, 3 * CC_TPB + 10, ids);
		cc_fill(&c, ids, 3, 7);
		/* the partial tail cannot be published */
		t_assert_eq(cc_publish(&c, seq, 3, &hashes[3], 1, &rep),
			    -EINVAL);
		t_ok(cc_publish(&c, seq, 0, hashes, 3, &rep));
		t_assert_eq(rep.published, 3);
		/* again: nothing new */
		t_ok(cc_publish(&c, seq, 0, hashes, 3, &rep));
		t_assert_eq(rep.published, 0);
		t_assert_eq(rep.duplicates, 3);
		t_assert_eq(write(a2p[1], ids, sizeof(ids)), sizeof(ids));
		/* B has opened: write through our mapping of block 1 */
		t_assert_eq(read(p2a[0], &ch, 1), 1);
		c.map[ids[1 * CC_PPB + 2]][100] ^= 0xff;
		t_assert_eq(write(a2p[1], "w", 1), 1);
		t_assert_eq(read(p2a[0], &ch, 1), 1);
		c.map[ids[1 * CC_PPB + 2]][100] ^= 0xff; /* restore */
		cc_seq_close(&c, seq, ids, 4 * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	uint32_t aids[4 * CC_PPB];
	t_assert_eq(read(a2p[0], aids, sizeof(aids)), sizeof(aids));
	t_ok(td_status(&d, &st));
	uint64_t allocated = st.pages_allocated;
	t_assert_eq(allocated, 4 * CC_PPB); /* 3 full blocks + the tail */

	b = fork();
	if (b == 0) {
		struct cc c;
		struct kvmm_prefix_open_reply rep;
		struct kvmm_status_reply s2;
		uint32_t ids[3 * CC_PPB];

		cc_connect(&c, d.sock);
		cc_region(&c);
		cc_prefix(&c, hashes, 4, &rep, ids);
		t_assert_eq(rep.nr_blocks, 3);
		t_assert_eq(rep.from_gpu, 3);
		t_assert_eq(rep.len, 3 * CC_TPB);
		for (int i = 0; i < 3 * CC_PPB; i++)
			t_assert_eq(ids[i], aids[i]);
		cc_check(&c, ids, 3, 7);
		t_ok(td_status(&d, &s2));
		t_assert_eq(s2.pages_allocated, allocated); /* no copy */
		/* A's write shows up here: the same memory */
		unsigned char before = c.map[ids[1 * CC_PPB + 2]][100];
		t_assert_eq(write(p2a[1], "x", 1), 1);
		t_assert_eq(read(a2p[0], &ch, 1), 1);
		t_assert_eq(c.map[ids[1 * CC_PPB + 2]][100],
			    (unsigned char)(before ^ 0xff));
		t_assert_eq(write(p2a[1], "x", 1), 1);
		struct kvmm_tier_stats_reply ts;
		cc_tier_stats(&c, &ts);
		t_assert_eq(ts.tiers[0].hits, 3);
		t_assert_eq(ts.misses, 1);
		t_assert_eq(ts.publishes, 6);
		t_assert_eq(ts.tiers[0].used_blocks, 3);
		cc_seq_close(&c, rep.seq_id, ids, 3 * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(b), 0);
	t_assert_eq(cc_wait_child(a), 0);

	/* A is gone, its tail block freed; the cache keeps the three */
	cpid = fork();
	if (cpid == 0) {
		struct cc c;
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[3 * CC_PPB];

		cc_connect(&c, d.sock);
		cc_region(&c);
		cc_prefix(&c, hashes, 3, &rep, ids);
		t_assert_eq(rep.nr_blocks, 3);
		t_assert_eq(rep.from_gpu, 3);
		cc_check(&c, ids, 3, 7);
		/* a different first hash shares nothing */
		struct kvmm_prefix_open_reply rep2;
		uint64_t other[2] = { 0x9999, 0x2222 };
		uint32_t none[1];
		cc_prefix(&c, other, 2, &rep2, none);
		t_assert_eq(rep2.nr_blocks, 0);
		cc_seq_close(&c, rep.seq_id, ids, 3 * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(cpid), 0);
	t_wait_until(
		20000, t_ok(td_status(&d, &st)),
		st.pages_mapped == 0 && st.sessions == 1,
		"the clients' sessions and mappings not gone (%llu pages mapped, %llu sessions)",
		(unsigned long long)st.pages_mapped,
		(unsigned long long)st.sessions);
	t_assert_eq(st.pages_allocated, 3 * CC_PPB); /* the cached blocks */
	t_assert_eq(st.pages_mapped, 0);
	int rc = td_stop(&d);
	if (rc)
		td_dump_log(&d);
	t_assert_eq(rc, 0);
	printf("prefix sharing ok\n");
	return 0;
}
