/* SPDX-License-Identifier: MIT */
/*
 * What the block-table budget tests share (cache-seq-table-budget: one
 * session's bound, daemon-table-uid-budget: one uid's): a region of
 * max_seqs sequences of nb blocks, a process that publishes nb blocks and
 * goes, and prefix opens of them that map what they get.
 */
#ifndef KVMM_TESTS_SEQ_TABLE_COMMON_H
#define KVMM_TESTS_SEQ_TABLE_COMMON_H

#include "tests/cache-common.h"

static void st_region(struct cc *c, uint32_t max_seqs, uint32_t nb)
{
	cc_region_sized(c, CC_L, max_seqs, nb);
}

/* A process publishes nb blocks under hashes[] and goes. */
static void st_publish(const char *sock, const uint64_t *hashes, uint32_t nb)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t pages[CC_MAX_PAGES];
		struct kvmm_block_publish_reply rep;
		struct cc c;
		uint32_t seq;

		t_assert(nb * CC_PPB <= CC_MAX_PAGES);
		cc_connect(&c, sock);
		st_region(&c, 1, nb);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, nb * CC_TPB, pages);
		t_ok(cc_publish(&c, seq, 0, hashes, nb, &rep));
		t_assert_eq(rep.published, nb);
		cc_seq_close(&c, seq, pages, nb * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* A prefix open of hashes[] (nb, all cached): its status; *seq the
 * sequence it opened. */
static int st_prefix_open(struct cc *c, const uint64_t *hashes, uint32_t nb,
			  uint32_t *seq)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	static int fds[CC_MAX_PAGES];
	unsigned int nfds;
	int err;

	cc_prefix_send(c, hashes, nb);
	err = cc_recv(c, buf, sizeof(buf), fds, &nfds);
	if (err)
		return err;
	t_assert_eq(rep->nr_blocks, nb);
	cc_map(c, rep->page_ids, nb * CC_PPB, fds, nfds);
	*seq = rep->seq_id;
	return 0;
}

#endif
