// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A session's block tables hold at most KD_SEQ_SLOTS_MIN (2^20) entries
 * together here (twice the pool's 1024 pages is less): prefix opens that
 * share one cached 64-block prefix into sequence after sequence get
 * -ENOBUFS once the next table would pass it (exactly 2^20 / 64 = 16384
 * open), and so does an extend that would grow a table, changing
 * nothing; closing one sequence gives its entries back.  Without the
 * bound a session could make kvmmd allocate block tables without limit
 * (its own blocks never come near: the pool bounds them).
 */
#include <errno.h>
#include <string.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define NB 64
#define BUDGET (1u << 20)

static uint64_t hashes[NB];

static void region(struct cc *c, uint32_t max_seqs)
{
	struct kvmm_region_create rc = { .size = sizeof(rc),
					 .layers = CC_L,
					 .kv_heads = 2,
					 .head_dim = 64,
					 .dtype_bytes = 2,
					 .max_seqs = max_seqs,
					 .max_tokens = NB * CC_TPB };
	struct kvmm_region_create_reply rep;

	t_ok(cc_call(c, KVMM_CMD_REGION_CREATE, &rc, sizeof(rc), &rep,
		     sizeof(rep), NULL, NULL));
	t_assert_eq(rep.pages_per_block, CC_PPB);
	c->region = rep.region_id;
}

/* A process publishes NB blocks under hashes[] and goes. */
static void publish(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t pages[NB * CC_PPB];
		struct kvmm_block_publish_reply rep;
		struct cc c;
		uint32_t seq;

		cc_connect(&c, sock);
		region(&c, 1);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, NB * CC_TPB, pages);
		t_ok(cc_publish(&c, seq, 0, hashes, NB, &rep));
		t_assert_eq(rep.published, NB);
		cc_seq_close(&c, seq, pages, NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* A prefix open of hashes[]: its status; *seq the sequence it opened. */
static int prefix_open(struct cc *c, uint32_t *seq)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	static int fds[CC_MAX_PAGES];
	unsigned int nfds;
	int err;

	cc_prefix_send(c, hashes, NB);
	err = cc_recv(c, buf, sizeof(buf), fds, &nfds);
	if (err)
		return err;
	t_assert_eq(rep->nr_blocks, NB);
	cc_map(c, rep->page_ids, NB * CC_PPB, fds, nfds);
	*seq = rep->seq_id;
	return 0;
}

static void stats(struct cc *c, struct kvmm_stats_reply *sr)
{
	t_ok(cc_call(c, KVMM_CMD_STATS, NULL, 0, sr, sizeof(*sr), NULL, NULL));
}

int main(void)
{
	struct kvmm_seq_extend ex = { .size = sizeof(ex) };
	struct kvmm_stats_reply sr;
	uint32_t seq, first = 0, fresh, region_a;
	struct td_daemon d;
	struct cc c;
	int err = 0;
	uint32_t n;

	for (uint32_t i = 0; i < NB; i++)
		hashes[i] = 0x7ab1e000 + i;
	cc_start(&d, NULL);
	publish(d.sock);

	cc_connect(&c, d.sock);
	region(&c, 65535);
	region_a = c.region;
	for (n = 0; n < BUDGET / NB + 1; n++) {
		err = prefix_open(&c, &seq);
		if (err)
			break;
		if (!n)
			first = seq;
	}
	printf("%u prefix opens of %u blocks, then %d\n", n, NB, err);
	t_assert_eq(err, -ENOBUFS);
	t_assert_eq(n, BUDGET / NB);
	stats(&c, &sr);
	t_assert_eq(sr.sequences, BUDGET / NB);

	/* an empty sequence costs no entry; its first extend would */
	region(&c, 1);
	fresh = cc_seq_open(&c);
	ex.region_id = c.region;
	ex.seq_id = fresh;
	ex.new_len = 1;
	t_assert_eq(cc_call(&c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), NULL, 0,
			    NULL, NULL),
		    -ENOBUFS);
	stats(&c, &sr);
	t_assert_eq(sr.pages_owned, (uint64_t)BUDGET * CC_PPB);

	/* one sequence closed: its 64 entries come back */
	c.region = region_a;
	t_ok(cc_call(&c, KVMM_CMD_SEQ_CLOSE,
		     &(struct kvmm_region_ref){
			     .size = sizeof(struct kvmm_region_ref),
			     .region_id = region_a,
			     .seq_id = first },
		     sizeof(struct kvmm_region_ref), NULL, 0, NULL, NULL));
	t_ok(prefix_open(&c, &seq));
	t_assert_eq(prefix_open(&c, &seq), -ENOBUFS);

	cc_disconnect(&c);
	cc_stop(&d);
	return 0;
}
