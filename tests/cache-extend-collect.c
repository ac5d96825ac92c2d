// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * The wire side of a parked extend collected later (ABI 1.17,
 * KVMM_SEQ_EXTEND_COLLECT and SEQ_COLLECT), on a real kvmmd whose pool (8
 * blocks) is full of cached blocks and whose demotion copies each wait
 * DELAY_MS, with a raw client:
 *   1. An extend by 3 blocks with the flag is answered at once: status 0,
 *      KVMM_EXTEND_REPLY_PENDING, no blocks, no fds, the length as it was.
 *      While it is parked (cmds_parked_now 1) the session is read: a
 *      socket NOP answers, SEQ_COLLECT is -EAGAIN, SEQ_TRUNCATE,
 *      SEQ_CLOSE, another extend of the sequence, BLOCK_PUBLISH of it and
 *      REGION_DESTROY are -EBUSY, SEQ_COLLECT of another sequence is
 *      -ENOENT and one past max_seqs -EINVAL, and the flag on
 *      a SEQ_TRUNCATE is -EINVAL.  Once the copies are done, SEQ_COLLECT
 *      answers the extend's reply: blocks 0-2, 12 page ids with 12 fds,
 *      length 3 blocks, and the pages hold what is written to them.  A
 *      second SEQ_COLLECT is -ENOENT, and the sequence is the client's
 *      again (truncate, close).
 *   2. Copies slower than the park's bound (5 s): the collect answers
 *      -ENOMEM after about 5 s, as a held extend would have, and the
 *      sequence is the client's again.
 */
#include <stdio.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 4
#define DELAY_MS 600

static uint64_t hash_of(int content, int b)
{
	return 0xec00000ull * (content + 1) + b + 1;
}

/* kvmmd with a pool of 8 blocks, all cached (contents 0 and 1). */
static void start(struct td_daemon *d, int delay_ms)
{
	const char *args[] = { "--gpu-mem", "2M",	  "--cache-gpu-blocks",
			       "8",	    "--host-mem", "2M",
			       NULL };
	struct kvmm_tier_stats_reply ts;

	cc_start_with_delay(d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", delay_ms);
	cc_publish_contents(d->sock, 2, NB, hash_of, 700);
	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB);
}

/* SEQ_EXTEND of seq to len with flags; the reply into rep (its fds
 * closed).  Returns the status. */
static int extend_flags(struct cc *c, uint32_t seq, uint32_t len,
			uint32_t flags, struct kvmm_seq_extend_reply *rep)
{
	struct kvmm_seq_extend ex = { .size = sizeof(ex),
				      .region_id = c->region,
				      .seq_id = seq,
				      .new_len = len,
				      .flags = flags };

	memset(rep, 0, sizeof(*rep));
	return cc_call(c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), rep,
		       sizeof(*rep), NULL, NULL);
}

static int collect(struct cc *c, uint32_t seq, void *buf, size_t cap, int *fds,
		   unsigned int *nfds)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref),
				       .region_id = c->region,
				       .seq_id = seq };

	return cc_call(c, KVMM_CMD_SEQ_COLLECT, &ref, sizeof(ref), buf, cap,
		       fds, nfds);
}

static int seq_cmd(struct cc *c, uint16_t cmd, uint32_t seq)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref),
				       .region_id = c->region,
				       .seq_id = seq };

	return cc_call(c, cmd, &ref, sizeof(ref), NULL, 0, NULL, NULL);
}

/* SEQ_COLLECT until it is no longer -EAGAIN (10 s at most). */
static int collect_wait(struct cc *c, uint32_t seq, void *buf, size_t cap,
			int *fds, unsigned int *nfds)
{
	for (int i = 0; i < 1000; i++) {
		int r = collect(c, seq, buf, cap, fds, nfds);

		if (r != -EAGAIN)
			return r;
		usleep(10000);
	}
	t_fail("SEQ_COLLECT still -EAGAIN after 10 s");
	return -EAGAIN;
}

static void collected_later(void)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	struct kvmm_seq_extend_reply *rep = (void *)buf, pend;
	struct kvmm_seq_extend ex = { .size = sizeof(ex) };
	struct kvmm_block_publish_reply pr;
	struct kvmm_status_reply st;
	uint32_t seq, other, ids[3 * CC_PPB];
	uint64_t h = 0x77;
	unsigned int nfds = 0;
	struct td_daemon d;
	struct cc c;

	start(&d, DELAY_MS);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	other = cc_seq_open(&c);
	t_ok(extend_flags(&c, seq, 3 * CC_TPB, KVMM_SEQ_EXTEND_COLLECT, &pend));
	t_assert_eq(pend.flags, KVMM_EXTEND_REPLY_PENDING);
	t_assert_eq(pend.size, sizeof(pend));
	t_assert_eq(pend.nr_blocks, 0);
	t_assert_eq(pend.nr_fds, 0);
	t_assert_eq(pend.len, 0);
	t_assert_eq(pend.pages_per_block, CC_PPB);
	/* parked, and the session is read meanwhile */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked_now, 1);
	t_ok(cc_call(&c, KVMM_CMD_NOP, NULL, 0, NULL, 0, NULL, NULL));
	t_assert_eq(collect(&c, seq, buf, sizeof(buf), NULL, NULL), -EAGAIN);
	ex.region_id = c.region;
	ex.seq_id = seq;
	t_assert_eq(cc_call(&c, KVMM_CMD_SEQ_TRUNCATE, &ex, sizeof(ex), NULL, 0,
			    NULL, NULL),
		    -EBUSY);
	t_assert_eq(seq_cmd(&c, KVMM_CMD_SEQ_CLOSE, seq), -EBUSY);
	t_assert_eq(extend_flags(&c, seq, CC_TPB, 0, &pend), -EBUSY);
	t_assert_eq(cc_publish(&c, seq, 0, &h, 1, &pr), -EBUSY);
	t_assert_eq(seq_cmd(&c, KVMM_CMD_REGION_DESTROY, 0), -EBUSY);
	t_assert_eq(collect(&c, other, buf, sizeof(buf), NULL, NULL), -ENOENT);
	t_assert_eq(collect(&c, 999, buf, sizeof(buf), NULL, NULL), -EINVAL);
	ex.seq_id = other;
	ex.flags = KVMM_SEQ_EXTEND_COLLECT;
	t_assert_eq(cc_call(&c, KVMM_CMD_SEQ_TRUNCATE, &ex, sizeof(ex), NULL, 0,
			    NULL, NULL),
		    -EINVAL);
	/* the copies end: the reply */
	t_ok(collect_wait(&c, seq, buf, sizeof(buf), fds, &nfds));
	t_assert_eq(rep->flags, 0);
	t_assert_eq(rep->first_block, 0);
	t_assert_eq(rep->nr_blocks, 3);
	t_assert_eq(rep->pages_per_block, CC_PPB);
	t_assert_eq(rep->len, 3 * CC_TPB);
	t_assert_eq(rep->nr_fds, 3 * CC_PPB);
	t_assert_eq(nfds, 3 * CC_PPB);
	cc_map(&c, rep->page_ids, 3 * CC_PPB, fds, nfds);
	for (uint32_t i = 0; i < 3 * CC_PPB; i++) {
		t_assert(!(rep->page_ids[i] & KVMM_PAGE_HELD));
		ids[i] = rep->page_ids[i];
	}
	cc_fill(&c, ids, 3, 900);
	cc_check(&c, ids, 3, 900);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 1);
	t_assert_eq(st.cmds_parked_now, 0);
	t_assert_eq(collect(&c, seq, buf, sizeof(buf), NULL, NULL), -ENOENT);
	/* the client's again: truncate (nothing past it), close */
	ex.seq_id = seq;
	ex.flags = 0;
	ex.new_len = 3 * CC_TPB;
	t_ok(cc_call(&c, KVMM_CMD_SEQ_TRUNCATE, &ex, sizeof(ex), NULL, 0, NULL,
		     NULL));
	cc_seq_close(&c, seq, ids, 3 * CC_PPB);
	cc_disconnect(&c);
	cc_stop(&d);
}

static void collected_error(void)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_seq_extend_reply pend;
	struct td_daemon d;
	uint64_t t0, dt;
	uint32_t seq;
	struct cc c;

	start(&d, 7000);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	t0 = cc_now_ms();
	t_ok(extend_flags(&c, seq, 3 * CC_TPB, KVMM_SEQ_EXTEND_COLLECT, &pend));
	t_assert_eq(pend.flags, KVMM_EXTEND_REPLY_PENDING);
	t_assert_eq(collect_wait(&c, seq, buf, sizeof(buf), NULL, NULL),
		    -ENOMEM);
	dt = cc_now_ms() - t0;
	if (dt < 4500 || dt > 6900)
		t_fail("the parked extend failed after %llu ms, not about 5 s",
		       (unsigned long long)dt);
	t_ok(seq_cmd(&c, KVMM_CMD_SEQ_CLOSE, seq));
	cc_disconnect(&c);
	cc_stop(&d);
}

int main(void)
{
	collected_later();
	collected_error();
	return 0;
}
