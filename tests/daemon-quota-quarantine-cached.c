// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A quarantined page counts once against its uid's quota, also when it
 * is a cached block's.  With --quota UID=1M (16 pages, 4 blocks of 4) and
 * a GPU cache of 2 blocks, a process maps 2 blocks, publishes them and
 * drops its connection without BYE while it lives on: its 8 pages are
 * quarantined, and they are the cached blocks' pages, charged once.  A
 * new session of the uid gets its 2 other blocks (it got -EDQUOT: the
 * quarantine charged the 8 pages a second time; found by a review) and
 * no third.  It then publishes its own 2 blocks, which evict the first
 * process's from the cache: the charge for those pages passes to the
 * quarantined process, so the uid still has no room for one more block.
 * Once the process exits, its 8 pages come back: 2 more blocks fit, a
 * third is -EDQUOT.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

int main(void)
{
	static uint32_t ids[CC_MAX_PAGES];
	const uint64_t mine[2] = { 0x9100001, 0x9100002 };
	const uint64_t theirs[2] = { 0x9200001, 0x9200002 };
	struct kvmm_block_publish_reply rep;
	char quota[64];
	const char *args[] = {
		"--quota", quota, "--gpu-mem", "8M", "--cache-gpu-blocks",
		"2",	   NULL
	};
	int ready[2], go[2];
	struct td_daemon d;
	struct cc c;
	uint32_t seq;
	char b = 0;
	pid_t p;

	snprintf(quota, sizeof(quota), "%u=1M", (unsigned)getuid());
	cc_start(&d, args);
	t_ok(pipe(ready));
	t_ok(pipe(go));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		/* 2 blocks, published (cached), then a hang-up without BYE;
		 * a parent that fails ends its read of go */
		close(go[1]);
		cc_connect(&c, d.sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, 2 * CC_TPB, ids);
		cc_fill(&c, ids, 2, 1);
		t_ok(cc_publish(&c, seq, 0, theirs, 2, &rep));
		t_assert_eq(rep.published, 2);
		close(c.sock);
		t_assert_eq(write(ready[1], &b, 1), 1);
		t_assert_eq(read(go[0], &b, 1), 1);
		_exit(0);
	}
	t_assert_eq(read(ready[0], &b, 1), 1);
	cc_wait_quarantined(&d, 2 * CC_PPB);

	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, 2 * CC_TPB, ids); /* was -EDQUOT */
	t_assert_eq(cc_try_extend(&c, seq, 3 * CC_TPB, ids), -EDQUOT);

	/* ours evict theirs: their pages' charge passes to the process */
	cc_fill(&c, ids, 2, 2);
	t_ok(cc_publish(&c, seq, 0, mine, 2, &rep));
	t_assert_eq(rep.published, 2);
	{
		struct kvmm_tier_stats_reply ts;

		cc_settled_stats(d.sock,
				 &ts); /* theirs dropped: no host tier */
		t_assert_eq(ts.tiers[0].used_blocks, 2);
		t_assert_eq(ts.tiers[0].drops, 2);
	}
	t_assert_eq(cc_try_extend(&c, seq, 3 * CC_TPB, ids), -EDQUOT);

	/* the process exits: its pages and their charge go */
	t_assert_eq(write(go[1], &b, 1), 1);
	t_assert_eq(cc_wait_child(p), 0);
	cc_wait_quarantined(&d, 0);
	cc_extend(&c, seq, 4 * CC_TPB, ids);
	t_assert_eq(cc_try_extend(&c, seq, 5 * CC_TPB, ids), -EDQUOT);
	cc_disconnect(&c);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
