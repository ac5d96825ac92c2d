// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * ABI 1.20 on the wire: a request for blocks ahead answered and
 * acknowledged over the socket, by a raw client B whose ring this test
 * reads by hand, against a real kvmmd (--quota of 16 blocks of 4 pages):
 *   - B (HELLO 1.20) holds 2 sequences of 1 block with 7 more mapped
 *     ahead each (SEQ_EXTEND want_blocks 8): the quota.  A's extend by 1
 *     block parks and B's ring gets one KVMM_RQE_F_GIVE_AHEAD entry with
 *     KVMM_RQE_F_GIVE_ACK, a non-zero cookie and 4 pages asked; B's
 *     truncate naming the cookie in reserved[0] (reserved[1] non-zero:
 *     -EINVAL) serves A's extend; its REVOKE_ACK of the cookie (pad
 *     non-zero: -EINVAL) with reserved[0] = 7 answers 0; lend_blocks 7;
 *   - A's extend to 8 blocks (7 more, 6 free): B is asked again and
 *     acknowledges without giving: A's extend fails -EDQUOT at once
 *     (well under --lend-wait), lend_failures 1, lend_blocks still 7;
 *   - a REVOKE_ACK of no cookie kvmmd knows: -ENOENT as before, -EINVAL
 *     with reserved[0] set; a client of 1.19's truncate with reserved[0]
 *     set is -EINVAL, as it was (tests/lib-mapahead-lend-procs.c runs a
 *     B of 1.19 that is asked: it names and acknowledges nothing).
 */
#include <poll.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/raw_ring.h"

#define RQ 16
#define WAIT_MS 1000

static void raw_connect(struct raw_ring *r, const char *path, uint16_t minor)
{
	raw_ring_connect(r, path, minor, RQ);
	cc_region(&r->c);
}

/* The one entry kvmmd posts within 2 s, taken off the ring. */
static struct kvmm_rqe take_entry(struct raw_ring *r)
{
	const struct kvmm_rqe *e = (const void *)(r->ring + r->off.rq_array);
	uint32_t head = __atomic_load_n(raw_ring_word(r, r->off.rq_head),
					__ATOMIC_RELAXED);
	struct kvmm_rqe x;

	for (int i = 0; i < 2000; i++) {
		uint32_t tail = __atomic_load_n(
			raw_ring_word(r, r->off.rq_tail), __ATOMIC_ACQUIRE);

		if (tail != head) {
			t_assert_eq(tail, head + 1);
			x = e[head & (RQ - 1)];
			__atomic_store_n(raw_ring_word(r, r->off.rq_head), tail,
					 __ATOMIC_RELEASE);
			return x;
		}
		usleep(1000);
	}
	t_fail("no entry in the revocation ring within 2 s");
}

/* SEQ_EXTEND to len with want_blocks (the blocks ahead), not waited for
 * when !wait (A's, answered after B's answer: cc_recv()). */
static int extend(struct cc *c, uint32_t seq, uint32_t len, uint32_t want,
		  bool wait)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	struct kvmm_seq_extend ex = { .size = sizeof(ex),
				      .region_id = c->region,
				      .seq_id = seq,
				      .new_len = len,
				      .want_blocks = want };
	unsigned int nfds = 0;
	int err;

	if (!wait) {
		cc_send(c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex));
		return 0;
	}
	err = cc_call(c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), buf, sizeof(buf),
		      fds, &nfds);
	for (unsigned int i = 0; i < nfds; i++)
		close(fds[i]);
	return err;
}

static int extend_reply(struct cc *c)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	unsigned int nfds = 0;
	int err = cc_recv(c, buf, sizeof(buf), fds, &nfds);

	for (unsigned int i = 0; i < nfds; i++)
		close(fds[i]);
	return err;
}

static int truncate_to(struct cc *c, uint32_t seq, uint32_t len, uint64_t res0,
		       uint64_t res1)
{
	struct kvmm_seq_extend tr = { .size = sizeof(tr),
				      .region_id = c->region,
				      .seq_id = seq,
				      .new_len = len,
				      .reserved = { res0, res1 } };

	return cc_call(c, KVMM_CMD_SEQ_TRUNCATE, &tr, sizeof(tr), NULL, 0, NULL,
		       NULL);
}

static int ack(struct cc *c, uint64_t cookie, uint32_t pad, uint64_t given)
{
	struct kvmm_revoke_ack a = { .size = sizeof(a),
				     .pad = pad,
				     .cookie = cookie,
				     .reserved = { given } };

	return cc_call(c, KVMM_CMD_REVOKE_ACK, &a, sizeof(a), NULL, 0, NULL,
		       NULL);
}

int main(void)
{
	char quota[64];
	const char *args[] = { "--quota", quota, NULL };
	struct kvmm_status_reply st;
	struct td_daemon d;
	struct raw_ring b, old;
	struct cc a;
	struct kvmm_rqe e;
	uint32_t sb[2], sa, so;
	uint64_t t0, ms;

	snprintf(quota, sizeof(quota), "%u=4M", (unsigned)getuid());
	cc_start(&d, args);
	raw_connect(&b, d.sock, KVMM_ABI_MINOR);
	for (int i = 0; i < 2; i++) {
		sb[i] = cc_seq_open(&b.c);
		t_ok(extend(&b.c, sb[i], CC_TPB, 8, true));
	}
	cc_connect(&a, d.sock);
	cc_region(&a);
	sa = cc_seq_open(&a);

	/* answered with 7 blocks: served */
	t0 = cc_now_ms();
	extend(&a, sa, CC_TPB, 0, false);
	e = take_entry(&b);
	t_assert_eq(e.flags, KVMM_RQE_F_GIVE_AHEAD | KVMM_RQE_F_GIVE_ACK);
	t_assert(e.cookie != 0);
	t_assert_eq(e.page_id, CC_PPB);
	t_assert_eq(truncate_to(&b.c, sb[0], CC_TPB, e.cookie, 1), -EINVAL);
	t_ok(truncate_to(&b.c, sb[0], CC_TPB, e.cookie, 0));
	t_ok(extend_reply(&a));
	t_assert_eq(ack(&b.c, e.cookie, 1, 7), -EINVAL);
	t_ok(ack(&b.c, e.cookie, 0, 7));
	ms = cc_now_ms() - t0;
	printf("served from B's answer after %llu ms\n",
	       (unsigned long long)ms);
	t_assert(ms < WAIT_MS / 2);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.lend_requests, 1);
	t_assert_eq(st.lend_blocks, 7);
	t_assert_eq(st.lend_extends, 1);

	/* answered with nothing: -EDQUOT at once */
	t0 = cc_now_ms();
	extend(&a, sa, 8 * CC_TPB, 0, false);
	e = take_entry(&b);
	t_assert_eq(e.flags, KVMM_RQE_F_GIVE_AHEAD | KVMM_RQE_F_GIVE_ACK);
	t_assert_eq(e.page_id, CC_PPB);
	t_ok(ack(&b.c, e.cookie, 0, 0));
	t_assert_eq(extend_reply(&a), -EDQUOT);
	ms = cc_now_ms() - t0;
	printf("failed after B answered with nothing after %llu ms\n",
	       (unsigned long long)ms);
	t_assert(ms < WAIT_MS / 2); /* not the wait: at once */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.lend_requests, 2);
	t_assert_eq(st.lend_blocks, 7);
	t_assert_eq(st.lend_failures, 1);

	/* no such cookie: as before; reserved[0] only with a request's */
	t_assert_eq(ack(&b.c, 0x7777, 0, 0), -ENOENT);
	t_assert_eq(ack(&b.c, 0x7777, 0, 3), -EINVAL);

	/* a client of 1.19: its reserved words stay reserved */
	raw_connect(&old, d.sock, 19);
	so = cc_seq_open(&old.c);
	t_ok(extend(&old.c, so, CC_TPB, 0, true));
	t_assert_eq(truncate_to(&old.c, so, 0, e.cookie, 0), -EINVAL);
	t_ok(truncate_to(&old.c, so, 0, 0, 0));
	t_ok(td_status(&d, &st));
	t_assert_eq(st.lend_blocks, 7);

	cc_disconnect(&old.c);
	cc_disconnect(&a);
	cc_disconnect(&b.c);
	cc_stop(&d);
	return 0;
}
