// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * GPU pool pressure reclaims cached blocks, with a real kvmmd and client
 * processes: a pool of 8 blocks (32 pages of 64 KiB), all of them taken
 * by two published and closed contents of 4 blocks each (the cache may
 * keep 8 on the GPU).  Another client then extends a new sequence to 3
 * blocks: instead of failing, the daemon demotes the 3 least recently
 * used cached blocks (content 0's first three) to host memory and the
 * extend succeeds.  A second sequence of 5 blocks takes the rest (host
 * memory full: its least recently used blocks are dropped); a block a
 * sequence uses is never taken: with every page in open sequences, a
 * further extend still fails.  After the sequences close, a reader gets
 * content 1 back from host memory, byte-identical.  Without a host tier
 * the victims are dropped and the extend succeeds the same way.
 */
#include <sys/wait.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 4

static const struct cc_contents contents = { .base = 0x300000,
					     .tag0 = 500,
					     .nb = NB };

/* A daemon with contents 0 and 1 published: the whole pool. */
static void start_with_two(struct td_daemon *d, const char *const *args)
{
	cc_start(d, args);
	cc_write_content(d->sock, &contents, 0);
	cc_write_content(d->sock, &contents, 1);
}

int main(void)
{
	const char *args[] = { "--gpu-mem",  "2M", "--cache-gpu-blocks", "8",
			       "--host-mem", "2M", "--cache-policy",	 "lru",
			       NULL };
	struct td_daemon d;
	struct kvmm_tier_stats_reply ts;
	struct cc c;
	uint32_t seq, seq2, ids_seq[8 * CC_PPB], ids_seq2[8 * CC_PPB];

	start_with_two(&d, args);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB); /* the whole pool */
	t_assert_eq(ts.pressure_reclaims, 0);

	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	t_ok(cc_try_extend(&c, seq, 3 * CC_TPB, ids_seq));
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.pressure_reclaims, 3);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB - 3);
	t_assert_eq(ts.tiers[1].demotions_in, 3);
	t_assert_eq(ts.tiers[1].used_blocks, 3);

	/* 5 cached + 3 in use: the cached ones go for another 5, but then
	 * nothing is left that no sequence uses */
	seq2 = cc_seq_open(&c);
	t_ok(cc_try_extend(&c, seq2, 5 * CC_TPB, ids_seq2));
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.pressure_reclaims, 8);
	t_assert_eq(ts.tiers[0].used_blocks, 0);
	/* pool full */
	t_assert_eq(cc_try_extend(&c, seq2, 6 * CC_TPB, ids_seq2), -ENOMEM);
	cc_seq_close(&c, seq2, ids_seq2, 5 * CC_PPB);
	cc_seq_close(&c, seq, ids_seq, 3 * CC_PPB);
	cc_disconnect(&c);

	/* host (6 slots for the policy) holds content 1 and content 0's
	 * last 2 blocks; its first 2, the least recently used, were pushed
	 * out (no NVMe tier: dropped) */
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(ts.tiers[1].drops, 2);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	/* byte-identical from host */
	cc_read_content(d.sock, &contents, 1, NB, 1);

	cc_stop(&d);

	/* no host tier: the victims are dropped, the extend still works */
	const char *args_gpu[] = { "--gpu-mem", "2M", "--cache-gpu-blocks", "8",
				   NULL };

	start_with_two(&d, args_gpu);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	t_ok(cc_try_extend(&c, seq, 2 * CC_TPB, ids_seq));
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.pressure_reclaims, 2);
	t_assert_eq(ts.tiers[0].drops, 2);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB - 2);
	cc_disconnect(&c);
	/* untouched, shared from the GPU */
	cc_read_content(d.sock, &contents, 1, NB, 0);
	cc_stop(&d);

	/* a restore into a full pool: room is made the same way, never
	 * from the prefix's own GPU blocks */
	start_with_two(&d, args);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	/* content 0's blocks 0-2 to host */
	t_ok(cc_try_extend(&c, seq, 3 * CC_TPB, ids_seq));
	cc_seq_close(&c, seq, ids_seq, 3 * CC_PPB);
	cc_disconnect(&c);
	/* 3 free blocks, 4 needed: 0's block 3 */
	cc_write_content(d.sock, &contents, 2);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.pressure_reclaims, 4);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB); /* pool full again */
	t_assert_eq(ts.tiers[1].used_blocks, NB);
	/* content 0 from host needs 4 blocks: content 1 (LRU) makes room */
	cc_read_content(d.sock, &contents, 0, NB, 1);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.pressure_reclaims, 8);
	t_assert_eq(ts.tiers[1].promotions_out, NB);
	/* host: content 0 was pinned there during the reclaim, so the
	 * cascade dropped content 1's two least recently used blocks */
	t_assert_eq(ts.tiers[1].drops, 2);
	/* content 2 on the GPU, asked with content 2: pinned, not taken */
	cc_read_content(d.sock, &contents, 2, NB, 0);
	cc_stop(&d);
	printf("gpu reclaim ok\n");
	return 0;
}
