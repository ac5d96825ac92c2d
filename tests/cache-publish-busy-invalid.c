// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * A malformed BLOCK_PUBLISH is -EINVAL even over a block still loading.
 * A real kvmmd (--restore-mode reload) whose restores each wait DELAY_MS
 * has content 0's 8 blocks on its NVMe tier; an early prefix open of them
 * replies while they load.  Then, over block 7 (loading): a publish with
 * hash 0, one with flags set, one with a reserved word set, one of 0
 * blocks and one whose size field disagrees with its length are each
 * -EINVAL, one with a nonzero byte past the struct it knows -E2BIG; a
 * good one is -EBUSY (so the block was still loading through all of
 * them).  They used to be -EBUSY: the busy check came first, and told a
 * client whose request could never work to try it again.
 */
#include "tests/cache-restore-common.h"

#define DELAY_MS 1000
#define NCONTENT 4
#define NVME_SLOTS 60
#define EARLY (KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_EARLY)

/* BLOCK_PUBLISH of block 7 of seq with hash, its struct changed by edit
 * (may be NULL); pad bytes (zero unless one is set) after the struct. */
static int publish(struct cc *c, uint32_t seq, uint64_t hash,
		   void (*edit)(struct kvmm_block_publish *bp, char *pad))
{
	char buf[sizeof(struct kvmm_block_publish) + 8 + 8];
	struct kvmm_block_publish_reply rep;
	struct kvmm_block_publish bp = { .size = sizeof(bp),
					 .region_id = c->region,
					 .seq_id = seq,
					 .first_block = CR_NB - 1,
					 .nr_blocks = 1,
					 .parent_hash = cr_hash(0, CR_NB - 2) };
	char pad[8] = { 0 };
	size_t len = 0;

	if (edit)
		edit(&bp, pad);
	memcpy(buf, &bp, sizeof(bp));
	len = sizeof(bp);
	if (bp.size > sizeof(bp)) {
		memcpy(buf + len, pad, bp.size - sizeof(bp));
		len = bp.size;
	}
	memcpy(buf + len, &hash, 8);
	return cc_call(c, KVMM_CMD_BLOCK_PUBLISH, buf, len + 8, &rep,
		       sizeof(rep), NULL, NULL);
}

static void set_flags(struct kvmm_block_publish *bp, char *pad)
{
	bp->flags = 1;
}

static void set_reserved(struct kvmm_block_publish *bp, char *pad)
{
	bp->reserved[1] = 1;
}

static void no_blocks(struct kvmm_block_publish *bp, char *pad)
{
	bp->nr_blocks = 0; /* the hash sent is then one too many */
}

static void size_short(struct kvmm_block_publish *bp, char *pad)
{
	bp->size = sizeof(*bp) - 8;
}

static void unknown_byte(struct kvmm_block_publish *bp, char *pad)
{
	bp->size = sizeof(*bp) + 8; /* a newer client's struct */
	pad[3] = 1;
}

int main(void)
{
	struct kvmm_seq_wait_ready_reply wr;
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CR_NB * CC_PPB];
	uint8_t acts[CR_NB];
	uint64_t h[CR_NB], good = cr_hash(0, CR_NB - 1);
	struct cr_env env;
	struct cc c;

	cr_start_args(&env, NVME_SLOTS, DELAY_MS, "--restore-mode", "reload");
	for (int k = 0; k < NCONTENT; k++)
		cr_write_content(env.d.sock, k);
	cc_connect(&c, env.d.sock);
	cc_region(&c);
	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(0, b);
	cc_prefix_send_flags(&c, h, CR_NB, EARLY);
	{
		static char buf[KVMM_MSG_MAX];
		static int fds[CC_MAX_PAGES];
		struct kvmm_prefix_open_reply *r = (void *)buf;
		unsigned int nfds;
		uint32_t npages;

		t_ok(cc_recv(&c, buf, sizeof(buf), fds, &nfds));
		rep = *r;
		npages = r->nr_blocks * r->pages_per_block;
		t_assert_eq(r->nr_blocks, CR_NB);
		cc_map(&c, r->page_ids, npages, fds, nfds);
		for (uint32_t i = 0; i < npages; i++)
			ids[i] = r->page_ids[i] & ~KVMM_PAGE_HELD;
		memcpy(acts, r->page_ids + npages, r->nr_blocks);
	}
	t_assert_eq(acts[CR_NB - 1], KVMM_BLOCK_RELOADED_NVME);

	t_assert_eq(publish(&c, rep.seq_id, 0, NULL), -EINVAL);
	t_assert_eq(publish(&c, rep.seq_id, good, set_flags), -EINVAL);
	t_assert_eq(publish(&c, rep.seq_id, good, set_reserved), -EINVAL);
	t_assert_eq(publish(&c, rep.seq_id, good, no_blocks), -EINVAL);
	t_assert_eq(publish(&c, rep.seq_id, good, size_short), -EINVAL);
	t_assert_eq(publish(&c, rep.seq_id, good, unknown_byte), -E2BIG);
	/* still loading through all of the above */
	t_assert_eq(publish(&c, rep.seq_id, good, NULL), -EBUSY);

	/* once loaded, the good one is a duplicate of the cached block */
	{
		char buf[sizeof(wr) + 64 * 4];
		struct kvmm_seq_wait_ready w = { .size = sizeof(w),
						 .region_id = c.region,
						 .seq_id = rep.seq_id,
						 .upto_block = CR_NB };

		t_ok(cc_call(&c, KVMM_CMD_SEQ_WAIT_READY, &w, sizeof(w), buf,
			     sizeof(buf), NULL, NULL));
		memcpy(&wr, buf, sizeof(wr));
	}
	t_assert_eq(wr.nr_failed, 0);
	t_assert_eq(publish(&c, rep.seq_id, good, NULL), 0);
	cc_seq_close(&c, rep.seq_id, ids, CR_NB * CC_PPB);
	cc_disconnect(&c);
	cr_stop(&env);
	printf("ok\n");
	return 0;
}
