// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * The block-table budget is one uid's, not one session's: under
 * --max-table-entries-per-uid 1024, prefix opens that share one cached
 * 64-block prefix into sequence after sequence fit 16 times in session A;
 * a second session B of the same uid then gets -ENOBUFS for its first
 * (a budget per session let each of a client's sessions grow its tables
 * to 2^20 entries, 8 MiB: 16 sessions made kvmmd grow by 129 MiB).  A
 * sequence A closes gives B room for one open; A's end gives B room for
 * 15 more.  As root, a process of another uid has a budget of its own
 * meanwhile (16 opens).
 */
#include <errno.h>
#include <string.h>

#include "tests/cache-uids.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define NB 64
#define BUDGET 1024
#define OTHER_UID 62311

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

/* Prefix opens until one fails: how many worked (the failure must be
 * -ENOBUFS); the first one's sequence in *first. */
static uint32_t open_until_full(struct cc *c, uint32_t *first)
{
	uint32_t n, seq;
	int err = 0;

	for (n = 0; n <= BUDGET / NB; n++) {
		err = prefix_open(c, &seq);
		if (err)
			break;
		if (!n && first)
			*first = seq;
	}
	t_assert_eq(err, -ENOBUFS);
	return n;
}

static void wait_sessions(const struct td_daemon *d, uint64_t n)
{
	struct kvmm_status_reply st;

	for (int i = 0; i < 5000; i++) {
		t_ok(td_status(d, &st));
		if (st.sessions == n)
			return;
		usleep(1000);
	}
	t_fail("kvmmd has %llu sessions, expected %llu",
	       (unsigned long long)st.sessions, (unsigned long long)n);
}

/* As root: a process of another uid fits a whole budget of its own. */
static void other_uid(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct cc c;

		cu_become(OTHER_UID, OTHER_UID);
		cc_connect(&c, sock);
		region(&c, 64);
		t_assert_eq(open_until_full(&c, NULL), BUDGET / NB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

int main(void)
{
	const char *args[] = { "--max-table-entries-per-uid", "1024",
			       "--socket-mode", "0666", NULL };
	uint32_t seq, first = 0;
	struct td_daemon d;
	struct cc a, b;

	for (uint32_t i = 0; i < NB; i++)
		hashes[i] = 0x7ab2e000 + i;
	cu_start(&d, args);
	publish(d.sock);

	cc_connect(&a, d.sock);
	region(&a, 64);
	t_assert_eq(open_until_full(&a, &first), BUDGET / NB);

	/* the same uid's second session shares the budget */
	cc_connect(&b, d.sock);
	region(&b, 64);
	t_assert_eq(prefix_open(&b, &seq), -ENOBUFS);

	if (geteuid() == 0)
		other_uid(d.sock);
	else
		printf("not root: another uid's budget not checked\n");

	/* what A gives back, B gets */
	t_ok(cc_call(&a, KVMM_CMD_SEQ_CLOSE,
		     &(struct kvmm_region_ref){
			     .size = sizeof(struct kvmm_region_ref),
			     .region_id = a.region,
			     .seq_id = first },
		     sizeof(struct kvmm_region_ref), NULL, 0, NULL, NULL));
	t_ok(prefix_open(&b, &seq));
	t_assert_eq(prefix_open(&b, &seq), -ENOBUFS);
	cc_disconnect(&a);
	wait_sessions(&d, 2); /* A's end seen: B and the status's own */
	t_assert_eq(open_until_full(&b, NULL), BUDGET / NB - 1);

	cc_disconnect(&b);
	wait_sessions(&d, 1);
	cc_stop(&d);
	printf("ok: %d entries per uid, shared by its sessions\n", BUDGET);
	return 0;
}
