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

static uint64_t hash_of(int content, int b)
{
	return 0x300000ull * (content + 1) + b + 1;
}

static void write_content(const char *sock, int k)
{
	uint64_t h[NB];

	for (int b = 0; b < NB; b++)
		h[b] = hash_of(k, b);
	t_assert_eq(cc_publish_content(sock, h, NB, 500 + k, NULL), 0);
}

static void read_content(const char *sock, int k, uint32_t gpu, uint32_t host)
{
	pid_t p = fork();

	if (p == 0) {
		struct cc c;
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[NB * CC_PPB];
		uint64_t h[NB];

		for (int b = 0; b < NB; b++)
			h[b] = hash_of(k, b);
		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, NB, &rep, ids);
		if (rep.nr_blocks != NB || rep.from_gpu != gpu ||
		    rep.from_host != host)
			t_fail("content %d: %u blocks (gpu %u host %u nvme %u), expected gpu %u host %u",
			       k, rep.nr_blocks, rep.from_gpu, rep.from_host,
			       rep.from_nvme, gpu, host);
		cc_check(&c, ids, NB, 500 + k);
		cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* Extend a new sequence to nb blocks: 0 or -errno. */
static int try_extend(struct cc *c, uint32_t seq, uint32_t nb)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	struct kvmm_seq_extend ex = { .size = sizeof(ex),
				      .region_id = c->region,
				      .seq_id = seq,
				      .new_len = nb * CC_TPB };
	unsigned int nfds = 0;
	int r;

	r = cc_call(c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), buf, sizeof(buf),
		    fds, &nfds);
	for (unsigned int i = 0; i < nfds; i++)
		close(fds[i]);
	return r;
}

int main(void)
{
	const char *args[] = { "--gpu-mem", "2M",	  "--cache-gpu-blocks",
			       "8",	    "--host-mem", "2M",
			       NULL };
	struct td_daemon d;
	struct kvmm_tier_stats_reply ts;
	struct cc c;
	uint32_t seq, seq2;
	int r;

	r = td_start(&d, args);
	if (r)
		t_fail("kvmmd did not start: %d", r);
	write_content(d.sock, 0);
	write_content(d.sock, 1);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB); /* the whole pool */
	t_assert_eq(ts.pressure_reclaims, 0);

	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	t_ok(try_extend(&c, seq, 3));
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.pressure_reclaims, 3);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB - 3);
	t_assert_eq(ts.tiers[1].demotions_in, 3);
	t_assert_eq(ts.tiers[1].used_blocks, 3);

	/* 5 cached + 3 in use: the cached ones go for another 5, but then
	 * nothing is left that no sequence uses */
	seq2 = cc_seq_open(&c);
	t_ok(try_extend(&c, seq2, 5));
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.pressure_reclaims, 8);
	t_assert_eq(ts.tiers[0].used_blocks, 0);
	t_assert_eq(try_extend(&c, seq2, 6), -ENOMEM); /* pool full */
	cc_call(&c, KVMM_CMD_SEQ_CLOSE,
		&(struct kvmm_region_ref){
			.size = sizeof(struct kvmm_region_ref),
			.region_id = c.region,
			.seq_id = seq2 },
		sizeof(struct kvmm_region_ref), NULL, 0, NULL, NULL);
	cc_call(&c, KVMM_CMD_SEQ_CLOSE,
		&(struct kvmm_region_ref){
			.size = sizeof(struct kvmm_region_ref),
			.region_id = c.region,
			.seq_id = seq },
		sizeof(struct kvmm_region_ref), NULL, 0, NULL, NULL);
	cc_disconnect(&c);

	/* host (6 slots for the policy) holds content 1 and content 0's
	 * last 2 blocks; its first 2, the least recently used, were pushed
	 * out (no NVMe tier: dropped) */
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(ts.tiers[1].drops, 2);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	read_content(d.sock, 1, 0, NB); /* byte-identical from host */

	r = td_stop(&d);
	if (r)
		td_dump_log(&d);
	t_assert_eq(r, 0);

	/* no host tier: the victims are dropped, the extend still works */
	const char *args_gpu[] = { "--gpu-mem", "2M", "--cache-gpu-blocks", "8",
				   NULL };

	r = td_start(&d, args_gpu);
	if (r)
		t_fail("kvmmd did not start: %d", r);
	write_content(d.sock, 0);
	write_content(d.sock, 1);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	t_ok(try_extend(&c, seq, 2));
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.pressure_reclaims, 2);
	t_assert_eq(ts.tiers[0].drops, 2);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB - 2);
	cc_disconnect(&c);
	read_content(d.sock, 1, NB, 0); /* untouched, shared from the GPU */
	r = td_stop(&d);
	if (r)
		td_dump_log(&d);
	t_assert_eq(r, 0);

	/* a restore into a full pool: room is made the same way, never
	 * from the prefix's own GPU blocks */
	r = td_start(&d, args);
	if (r)
		t_fail("kvmmd did not start: %d", r);
	write_content(d.sock, 0);
	write_content(d.sock, 1);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	t_ok(try_extend(&c, seq, 3)); /* content 0's blocks 0-2 to host */
	cc_call(&c, KVMM_CMD_SEQ_CLOSE,
		&(struct kvmm_region_ref){
			.size = sizeof(struct kvmm_region_ref),
			.region_id = c.region,
			.seq_id = seq },
		sizeof(struct kvmm_region_ref), NULL, 0, NULL, NULL);
	cc_disconnect(&c);
	write_content(d.sock, 2); /* 3 free blocks, 4 needed: 0's block 3 */
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.pressure_reclaims, 4);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB); /* pool full again */
	t_assert_eq(ts.tiers[1].used_blocks, NB);
	/* content 0 from host needs 4 blocks: content 1 (LRU) makes room */
	read_content(d.sock, 0, 0, NB);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.pressure_reclaims, 8);
	t_assert_eq(ts.tiers[1].promotions_out, NB);
	/* host: content 0 was pinned there during the reclaim, so the
	 * cascade dropped content 1's two least recently used blocks */
	t_assert_eq(ts.tiers[1].drops, 2);
	/* content 2 on the GPU, asked with content 2: pinned, not taken */
	read_content(d.sock, 2, NB, 0);
	r = td_stop(&d);
	if (r)
		td_dump_log(&d);
	t_assert_eq(r, 0);
	printf("gpu reclaim ok\n");
	return 0;
}
