// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * PREFIX_OPEN with KVMM_PREFIX_OPEN_SEGMENTS (ABI 1.6): blocks cached
 * after a hole are reused, the hole comes back as RECOMPUTE on fresh
 * pages.  A real kvmmd (--cache-policy lru, a GPU tier of 4 blocks, a
 * host tier of 1, --restore-mode reload) and real client processes:
 *   - a writer publishes a 4-block prefix A; A0 is used again, then two
 *     other blocks are published: A1 (least recently used) goes down to
 *     the host tier, then A2 follows it and A1 is dropped (the host tier
 *     holds one block).  A0 and A3 are on the GPU, A1 in no tier, A2 in
 *     host memory;
 *   - without the flag (with and without actions) the open stops at the
 *     hole: 1 block;
 *   - SEGMENTS without ACTIONS, or an unknown bit, is -EINVAL;
 *   - with it: 4 blocks, GPU / RECOMPUTE / RELOADED_HOST / GPU, the reply
 *     counts exact (2 shared, 1 reloaded, 1 to recompute), blocks 0, 2
 *     and 3 byte-identical, block 1 on pages of its own; the client
 *     writes block 1's bytes and publishes it: published 1, and the next
 *     open finds all four blocks on the GPU, byte-identical;
 *   - a pool short of pages (demotions slowed down by the test knob): the
 *     open parks until its victim's copy is done, then comes back with
 *     the hole to recompute and the blocks after it shared;
 *   - a session at its quota: the holes make no room (quota_holes());
 *   - TIER_STATS (ABI 1.7) counts each open's holes and the blocks shared
 *     or reloaded after them: 1 and 2, also when the open parked; none
 *     for the open at the quota.
 */
#include <sys/wait.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 4
#define TAG 57
#define DELAY 300

static const uint64_t ha[NB] = { 0x5e60001ull, 0x5e60002ull, 0x5e60003ull,
				 0x5e60004ull };
static const uint64_t hx = 0x5e6aaa1ull, hy = 0x5e6aaa2ull, hz = 0x5e6aaa3ull;

/* Block b of content tag (cc_fill()'s pattern for block b) on ids. */
static void fill_block(struct cc *c, const uint32_t *ids, uint32_t b,
		       uint64_t tag)
{
	for (uint32_t p = 0; p < CC_PPB; p++)
		for (uint32_t o = 0; o < CC_PAGE; o++)
			c->map[ids[b * CC_PPB + p]][o] = cc_pat(tag, b, p, o);
}

static bool block_ok(struct cc *c, const uint32_t *ids, uint32_t b,
		     uint64_t tag)
{
	for (uint32_t p = 0; p < CC_PPB; p++)
		for (uint32_t o = 0; o < CC_PAGE; o++)
			if (c->map[ids[b * CC_PPB + p]][o] !=
			    cc_pat(tag, b, p, o))
				return false;
	return true;
}

/* Send a PREFIX_OPEN of h[0..n) with flags. */
static void open_send(struct cc *c, const uint64_t *h, uint32_t n,
		      uint32_t flags)
{
	char req[sizeof(struct kvmm_prefix_open) + NB * 8];
	struct kvmm_prefix_open po = { .size = sizeof(po),
				       .region_id = c->region,
				       .nr_hashes = n,
				       .flags = flags };

	t_assert(n <= NB);
	memcpy(req, &po, sizeof(po));
	memcpy(req + sizeof(po), h, n * 8);
	cc_send(c, KVMM_CMD_PREFIX_OPEN, req, sizeof(po) + n * 8);
}

/* Its reply (the status returned): the header in *out, page ids mapped
 * into ids, the actions (with KVMM_PREFIX_OPEN_ACTIONS) into acts. */
static int open_recv(struct cc *c, uint32_t flags,
		     struct kvmm_prefix_open_reply *out, uint32_t *ids,
		     uint8_t *acts)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	unsigned int nfds;
	uint32_t np;
	int err;

	err = cc_recv(c, buf, sizeof(buf), fds, &nfds);
	if (err)
		return err;
	*out = *rep;
	np = rep->nr_blocks * rep->pages_per_block;
	t_assert_eq(rep->pages_per_block, CC_PPB);
	t_assert_eq(rep->nr_fds, nfds);
	t_assert_eq(rep->size, sizeof(*rep) + np * 4 +
				       (flags & KVMM_PREFIX_OPEN_ACTIONS ?
						(rep->nr_blocks + 3) & ~3u :
						0));
	t_assert_eq(rep->len, rep->nr_blocks * CC_TPB);
	cc_map(c, rep->page_ids, np, fds, nfds);
	for (uint32_t i = 0; i < np; i++)
		ids[i] = rep->page_ids[i] & ~KVMM_PAGE_HELD;
	if (flags & KVMM_PREFIX_OPEN_ACTIONS)
		memcpy(acts, &rep->page_ids[np], rep->nr_blocks);
	return 0;
}

static int open_flags(struct cc *c, const uint64_t *h, uint32_t n,
		      uint32_t flags, struct kvmm_prefix_open_reply *out,
		      uint32_t *ids, uint8_t *acts)
{
	open_send(c, h, n, flags);
	return open_recv(c, flags, out, ids, acts);
}

/* A writer of one block h, content tag, parent 0 (another prefix). */
static void publish_other(const char *sock, uint64_t h, uint64_t tag)
{
	t_assert_eq(cc_publish_content(sock, &h, 1, tag, NULL), 0);
}

/* A client that opens ha[0..1) and closes it: A0 used again. */
static void touch_a0(const char *sock)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CC_PPB];
	struct cc c;

	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, ha, 1, &rep, ids);
	t_assert_eq(rep.nr_blocks, 1);
	cc_seq_close(&c, rep.seq_id, ids, CC_PPB);
	cc_disconnect(&c);
}

static void settled(const char *sock, struct kvmm_tier_stats_reply *ts)
{
	cc_settled_stats(sock, ts);
	printf("tiers: gpu %llu host %llu used\n",
	       (unsigned long long)ts->tiers[0].used_blocks,
	       (unsigned long long)ts->tiers[1].used_blocks);
}

static void holes(void)
{
	const char *args[] = { "--gpu-mem",
			       "2M",
			       "--cache-gpu-blocks",
			       "4",
			       "--host-mem",
			       "1M",
			       "--restore-mode",
			       "reload",
			       "--cache-policy",
			       "lru",
			       NULL };
	struct kvmm_prefix_open_reply rep;
	struct kvmm_block_publish_reply pr;
	struct kvmm_tier_stats_reply ts, ts0;
	uint32_t ids[NB * CC_PPB];
	uint8_t acts[NB + 4];
	struct td_daemon d;
	struct cc c;

	cc_start(&d, args);
	t_assert_eq(cc_publish_content(d.sock, ha, NB, TAG, NULL), 0);
	touch_a0(d.sock); /* lru: A1 A2 A3 A0 */
	publish_other(d.sock, hx, 1); /* A1 down to host */
	settled(d.sock, &ts);
	publish_other(d.sock, hy, 2); /* A2 down, A1 dropped */
	settled(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 4); /* A0 A3 X Y */
	t_assert_eq(ts.tiers[1].used_blocks, 1); /* A2 */
	t_assert_eq(ts.migrations_failed, 0);

	cc_connect(&c, d.sock);
	cc_region(&c);
	/* without the flag the prefix stops at the hole */
	t_ok(open_flags(&c, ha, NB, 0, &rep, ids, acts));
	t_assert_eq(rep.nr_blocks, 1);
	t_assert_eq(rep.from_gpu, 1);
	t_assert(block_ok(&c, ids, 0, TAG));
	cc_seq_close(&c, rep.seq_id, ids, CC_PPB);
	t_ok(open_flags(&c, ha, NB, KVMM_PREFIX_OPEN_ACTIONS, &rep, ids, acts));
	t_assert_eq(rep.nr_blocks, 1);
	t_assert_eq(rep.nr_recompute, 0);
	t_assert_eq(acts[0], KVMM_BLOCK_GPU_SHARED);
	cc_seq_close(&c, rep.seq_id, ids, CC_PPB);

	/* bad flags open nothing */
	t_assert_eq(open_flags(&c, ha, NB, KVMM_PREFIX_OPEN_SEGMENTS, &rep, ids,
			       acts),
		    -EINVAL);
	t_assert_eq(open_flags(&c, ha, NB, KVMM_PREFIX_OPEN_ACTIONS | 0x10,
			       &rep, ids, acts),
		    -EINVAL);

	/* with it: the blocks after the hole too */
	cc_tier_stats(&c, &ts0);
	t_ok(open_flags(&c, ha, NB,
			KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_SEGMENTS,
			&rep, ids, acts));
	printf("segments: %u blocks: gpu %u host %u nvme %u recompute %u; actions %s %s %s %s\n",
	       rep.nr_blocks, rep.from_gpu, rep.from_host, rep.from_nvme,
	       rep.nr_recompute, kvmm_block_action_string(acts[0]),
	       kvmm_block_action_string(acts[1]),
	       kvmm_block_action_string(acts[2]),
	       kvmm_block_action_string(acts[3]));
	t_assert_eq(rep.nr_blocks, NB);
	t_assert_eq(rep.from_gpu, 2);
	t_assert_eq(rep.from_host, 1);
	t_assert_eq(rep.from_nvme, 0);
	t_assert_eq(rep.nr_recompute, 1);
	t_assert_eq(acts[0], KVMM_BLOCK_GPU_SHARED);
	t_assert_eq(acts[1], KVMM_BLOCK_RECOMPUTE);
	t_assert_eq(acts[2], KVMM_BLOCK_RELOADED_HOST);
	t_assert_eq(acts[3], KVMM_BLOCK_GPU_SHARED);
	t_assert(block_ok(&c, ids, 0, TAG));
	t_assert(block_ok(&c, ids, 2, TAG));
	t_assert(block_ok(&c, ids, 3, TAG));
	/* the hole's pages are its own */
	t_assert_eq(cc_overlap(ids + CC_PPB, CC_PPB, ids, CC_PPB), 0);
	t_assert_eq(cc_overlap(ids + CC_PPB, CC_PPB, ids + 2 * CC_PPB,
			       2 * CC_PPB),
		    0);
	cc_tier_stats(&c, &ts);
	/* hits: the 3 blocks found; the hole is a miss, not a hit */
	t_assert_eq(ts.prefix_blocks_hit - ts0.prefix_blocks_hit, 3);
	t_assert_eq(ts.tiers[0].hits - ts0.tiers[0].hits, 2);
	t_assert_eq(ts.tiers[1].hits - ts0.tiers[1].hits, 1);
	t_assert_eq(ts.misses - ts0.misses, 1);
	/* ABI 1.7: the hole, and A2 (reloaded) and A3 (shared) after it */
	t_assert_eq(ts.prefix_holes - ts0.prefix_holes, 1);
	t_assert_eq(ts.prefix_blocks_after_hole - ts0.prefix_blocks_after_hole,
		    2);
	t_assert_eq(ts.plan_recomputes_host + ts.plan_recomputes_nvme, 0);

	/* the client recomputes the hole (the same bytes) and publishes */
	fill_block(&c, ids, 1, TAG);
	t_ok(cc_publish(&c, rep.seq_id, 1, ha + 1, 1, &pr));
	printf("hole published: published %u promoted %u duplicates %u\n",
	       pr.published, pr.promoted, pr.duplicates);
	t_assert_eq(pr.published, 1);
	t_assert_eq(pr.promoted, 0);
	t_assert_eq(pr.duplicates, 0);
	cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);

	/* the next open finds them all on the GPU */
	t_ok(open_flags(&c, ha, NB, KVMM_PREFIX_OPEN_ACTIONS, &rep, ids, acts));
	printf("after publish: %u blocks: gpu %u host %u recompute %u\n",
	       rep.nr_blocks, rep.from_gpu, rep.from_host, rep.nr_recompute);
	t_assert_eq(rep.nr_blocks, NB);
	t_assert_eq(rep.from_gpu, NB);
	t_assert_eq(rep.nr_recompute, 0);
	cc_check(&c, ids, NB, TAG);
	cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
	cc_disconnect(&c);
	cc_stop(&d);
}

/* A process holding a sequence of nb blocks until it reads a byte. */
static pid_t holder(const char *sock, uint32_t nb, int ready_fd, int hold_fd)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		uint32_t ids[8 * CC_PPB];
		struct cc c;
		uint32_t seq;
		char b = 1;

		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, nb * CC_TPB, ids);
		t_assert_eq(write(ready_fd, &b, 1), 1);
		t_assert_eq(read(hold_fd, &b, 1), 1);
		cc_seq_close(&c, seq, ids, nb * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	return p;
}

static void parked(void)
{
	const char *args[] = { "--gpu-mem",
			       "2M",
			       "--cache-gpu-blocks",
			       "4",
			       "--host-mem",
			       "2M",
			       "--restore-mode",
			       "reload",
			       "--cache-policy",
			       "lru",
			       NULL };
	struct kvmm_prefix_open_reply rep;
	struct kvmm_status_reply st0, st;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[NB * CC_PPB];
	uint8_t acts[NB + 4];
	struct td_daemon d;
	int ready[2], hold[2];
	struct cc c, w;
	uint32_t seq;
	char b = 1;
	pid_t p;

	cc_start_with_delay(&d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", DELAY);
	/* A0, A2 and A3 cached, A1 never was; then Z: 4 GPU blocks */
	cc_connect(&w, d.sock);
	cc_region(&w);
	seq = cc_seq_open(&w);
	cc_extend(&w, seq, NB * CC_TPB, ids);
	cc_fill(&w, ids, NB, TAG);
	t_ok(cc_publish(&w, seq, 0, ha, 1,
			&(struct kvmm_block_publish_reply){ 0 }));
	t_ok(cc_publish(&w, seq, 2, ha + 2, 2,
			&(struct kvmm_block_publish_reply){ 0 }));
	cc_seq_close(&w, seq, ids, NB * CC_PPB);
	cc_disconnect(&w);
	publish_other(d.sock, hz, 3);
	settled(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 4);

	/* the rest of the pool (8 blocks) held by a sequence */
	t_ok(pipe(ready));
	t_ok(pipe(hold));
	p = holder(d.sock, 4, ready[1], hold[0]);
	t_assert_eq(read(ready[0], &b, 1), 1);

	cc_connect(&c, d.sock);
	cc_region(&c);
	t_ok(td_status(&d, &st0));
	/* the hole needs a block of pages: Z is demoted for it, slowly */
	open_send(&c, ha, NB,
		  KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_SEGMENTS);
	cc_wait_parked(&d, 1);
	t_ok(open_recv(&c, KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_SEGMENTS,
		       &rep, ids, acts));
	t_ok(td_status(&d, &st));
	printf("parked open: %u blocks: gpu %u host %u recompute %u; parked %llu\n",
	       rep.nr_blocks, rep.from_gpu, rep.from_host, rep.nr_recompute,
	       (unsigned long long)(st.cmds_parked - st0.cmds_parked));
	t_assert_eq(st.cmds_parked - st0.cmds_parked, 1);
	t_assert_eq(rep.nr_blocks, NB);
	t_assert_eq(rep.from_gpu, 3);
	t_assert_eq(rep.nr_recompute, 1);
	t_assert_eq(acts[1], KVMM_BLOCK_RECOMPUTE);
	t_assert(block_ok(&c, ids, 0, TAG));
	t_assert(block_ok(&c, ids, 2, TAG));
	t_assert(block_ok(&c, ids, 3, TAG));
	/* the parked open counts its hole and A2, A3 after it once */
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.prefix_holes, 1);
	t_assert_eq(ts.prefix_blocks_after_hole, 2);
	t_assert_eq(write(hold[1], &b, 1), 1);
	t_assert_eq(cc_wait_child(p), 0);

	/* the hole published: a second open finds all four */
	fill_block(&c, ids, 1, TAG);
	t_ok(cc_publish(&c, rep.seq_id, 1, ha + 1, 1,
			&(struct kvmm_block_publish_reply){ 0 }));
	cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
	cc_prefix(&c, ha, NB, &rep, ids);
	t_assert_eq(rep.nr_blocks, NB);
	cc_check(&c, ids, NB, TAG);
	cc_seq_close(&c, rep.seq_id, ids, NB * CC_PPB);
	cc_disconnect(&c);
	close(ready[0]);
	close(ready[1]);
	close(hold[0]);
	close(hold[1]);
	cc_stop(&d);
}

/*
 * A session at its quota: the holes of a segmented open make room only
 * from its own uid's idle cached blocks.  --quota UID=1M and a pool of 1M
 * (4 blocks of 4 pages, the GPU tier's 4 blocks): a writer publishes
 * A0..A3, which stay charged to its uid while cached, so the uid's quota
 * is used up and the pool is full.  An open of [X, Y, A3] (X and Y never
 * cached: two holes before a cached block) by the same uid gets pages for
 * the holes from the uid's own blocks: A3 (in the prefix) stays, the
 * least recently used of the others, A0 and A1, go (no host tier:
 * dropped; quota_reclaims 2), as its extend would have them go
 * (admin.md, "Quotas").  The holes count only as far as the quota has
 * room once those went, never pushing other uids' blocks out of the GPU
 * (made-up hashes in front of one cached block would otherwise;
 * tests/daemon-quota-reclaim-reader.c checks that no other uid's block
 * goes).  Before quota reclaim the open ended before the first hole.
 */
static void quota_holes(void)
{
	char quota[64];
	const char *args[] = { "--gpu-mem",
			       "1M",
			       "--cache-gpu-blocks",
			       "4",
			       "--cache-policy",
			       "lru",
			       "--quota",
			       quota,
			       NULL };
	const uint64_t h[3] = { hx, hy, ha[3] };
	struct kvmm_prefix_open_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[NB * CC_PPB];
	uint8_t acts[NB + 4];
	struct td_daemon d;
	struct cc c, w;
	uint32_t seq;

	snprintf(quota, sizeof(quota), "%u=1M", (unsigned)getuid());
	t_ok(td_start(&d, args));
	cc_connect(&w, d.sock);
	cc_region(&w);
	seq = cc_seq_open(&w);
	cc_extend(&w, seq, NB * CC_TPB, ids);
	cc_fill(&w, ids, NB, TAG);
	t_ok(cc_publish(&w, seq, 0, ha, NB,
			&(struct kvmm_block_publish_reply){ 0 }));
	cc_seq_close(&w, seq, ids, NB * CC_PPB);
	cc_disconnect(&w);
	settled(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB);

	cc_connect(&c, d.sock);
	cc_region(&c);
	t_ok(open_flags(&c, h, 3,
			KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_SEGMENTS,
			&rep, ids, acts));
	printf("open at the quota: %u blocks\n", rep.nr_blocks);
	t_assert_eq(rep.nr_blocks, 3);
	t_assert_eq(acts[0], KVMM_BLOCK_RECOMPUTE);
	t_assert_eq(acts[1], KVMM_BLOCK_RECOMPUTE);
	t_assert_eq(acts[2], KVMM_BLOCK_GPU_SHARED);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.prefix_holes, 2);
	t_assert_eq(ts.quota_reclaims, 2);
	cc_seq_close(&c, rep.seq_id, ids, 3 * CC_PPB);
	settled(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB - 2);
	t_assert_eq(ts.tiers[0].drops, 2);
	/* A0 (and A1) went: the prefix of A stops at once */
	cc_prefix(&c, ha, NB, &rep, ids);
	t_assert_eq(rep.nr_blocks, 0);
	cc_seq_close(&c, rep.seq_id, ids, 0);
	cc_disconnect(&c);
	t_assert_eq(td_stop(&d), 0);
}

int main(void)
{
	holes();
	parked();
	quota_holes();
	printf("ok\n");
	return 0;
}
