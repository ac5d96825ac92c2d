// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * What a parked COLLECT extend or prefix open (ABI 1.17) leaves behind, on
 * a real kvmmd whose pool (8 blocks, a GPU cache of 4) is full and whose
 * demotion copies each wait DELAY_MS, with a raw client (libkvmm in 3's
 * second half and in 4):
 *   1. A COLLECT extend that got its pages but was never collected: its
 *      client closes its socket without BYE and lives on.  Only the pages
 *      it mapped (its filler's 8) are quarantined; the extend's 12, never
 *      sent, go back to the pool at once.  Before, its run's holds stayed
 *      with the session like those of mapped pages and the 12 were
 *      quarantined (20 pages) until the process exited.
 *   2. The same for a COLLECT prefix open that went on (its restores
 *      done) but was never collected: only the filler's 16 pages stay.
 *   3. A KVMM_PREFIX_OPEN_COLLECT open of 4 blocks in the host tier parks
 *      for its restores' pages, with the uid's block tables (12 entries,
 *      --max-table-entries-per-uid) just room enough; a parked COLLECT
 *      extend of another sequence takes one more entry, so the open run
 *      again fails: PREFIX_COLLECT is -EAGAIN, then -ENOBUFS, and the
 *      sequence its pending reply named is closed (SEQ_CLOSE and a second
 *      PREFIX_COLLECT -ENOENT, the session's and kvmmd's sequence counts
 *      without it); once the extend is collected and its sequence closed
 *      the session holds and owns only its filler's pages, nothing is
 *      parked, and the connection goes on (NOP, an extend of a new
 *      sequence into the entries given back).  (At the park's 5 s bound
 *      a parked open does not fail: it goes on with the blocks it can
 *      restore, a shorter prefix.)  The same through libkvmm:
 *      kvmm_seq_open_prefix() returns -ENOBUFS and libkvmm keeps no
 *      sequence of it either (the filler's and the extend's open, 2 in
 *      kvmmd too).
 *   4. While a COLLECT extend waits (parked, then waiting to be
 *      collected), the ring's SEQ_EXTEND of its sequence moves the length
 *      within the block it has (-ENODATA past it), while a socket
 *      SEQ_TRUNCATE of it is -EBUSY; once the extend has its pages the
 *      length is the extend's (a shorter ring extend leaves it), and the
 *      collect hands blocks 1-4 with their 16 fds.
 */
#include <pthread.h>
#include <stdio.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 4
#define DELAY_MS 600

static uint64_t hash_of(int content, int b)
{
	return 0xc1e0000ull * (content + 1) + b + 1;
}

/*
 * kvmmd with a pool of 8 blocks, a GPU cache of 4: content 0 published,
 * then content 1, which sends content 0 to the host tier (a copy each,
 * delay_ms long, two at a time).  4 blocks of the pool are free then.
 */
static void start(struct td_daemon *d, int delay_ms, const char *tables)
{
	const char *args[] = { "--gpu-mem",
			       "2M",
			       "--cache-gpu-blocks",
			       "4",
			       "--host-mem",
			       "2M",
			       "--cache-policy",
			       "lru",
			       tables ? "--max-table-entries-per-uid" : NULL,
			       tables,
			       NULL };
	struct kvmm_tier_stats_reply ts;

	cc_start_with_delay(d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", delay_ms);
	cc_publish_contents(d->sock, 2, NB, hash_of, 500);
	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, NB);
}

static int seq_cmd(struct cc *c, uint16_t cmd, uint32_t seq)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref),
				       .region_id = c->region,
				       .seq_id = seq };

	return cc_call(c, cmd, &ref, sizeof(ref), NULL, 0, NULL, NULL);
}

static int extend_collect(struct cc *c, uint32_t seq, uint32_t len)
{
	struct kvmm_seq_extend ex = { .size = sizeof(ex),
				      .region_id = c->region,
				      .seq_id = seq,
				      .new_len = len,
				      .flags = KVMM_SEQ_EXTEND_COLLECT };
	struct kvmm_seq_extend_reply rep;
	int r;

	r = cc_call(c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), &rep, sizeof(rep),
		    NULL, NULL);
	if (!r)
		t_assert_eq(rep.flags, KVMM_EXTEND_REPLY_PENDING);
	return r;
}

/* A COLLECT prefix open of content 0: the sequence its pending reply
 * names. */
static uint32_t prefix_collect_open(struct cc *c)
{
	struct kvmm_prefix_open_reply rep;
	uint64_t h[NB];

	for (int b = 0; b < NB; b++)
		h[b] = hash_of(0, b);
	cc_prefix_send_flags(c, h, NB, KVMM_PREFIX_OPEN_COLLECT);
	t_ok(cc_recv(c, &rep, sizeof(rep), NULL, NULL));
	t_assert_eq(rep.flags, KVMM_PREFIX_REPLY_PENDING);
	t_assert_eq(rep.nr_blocks, 0);
	return rep.seq_id;
}

static void session_stats(struct cc *c, struct kvmm_stats_reply *st)
{
	t_ok(cc_call(c, KVMM_CMD_STATS, NULL, 0, st, sizeof(*st), NULL, NULL));
}

/* Until nothing is parked and no copy or restore runs (10 s at most);
 * unlike cc_settled_stats(), an open waiting to be collected is fine. */
static void wait_moved(struct td_daemon *d)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	struct kvmm_conn *a;
	int i;

	t_ok(kc_connect_admin(d->sock, &a));
	for (i = 0; i < 1000; i++) {
		t_ok(td_status(d, &st));
		t_ok(kc_request(a, KVMM_CMD_TIER_STATS, NULL, 0, &ts,
				sizeof(ts), NULL));
		if (!st.cmds_parked_now && !ts.migrations_in_flight)
			break;
		usleep(10000);
	}
	kvmm_disconnect(a);
	if (i == 1000)
		t_fail("still parked or moving after 10 s");
}

/* Close the socket and rings without BYE; the mappings stay. */
static void hang_up(struct cc *c)
{
	close(c->sock);
	for (int i = 0; i < 4; i++)
		close(c->ring_fds[i]);
}

/* After a hang-up: no session, n pages quarantined, and allocated only
 * those (revoking) and the cached blocks' pages. */
static void only_quarantined(struct td_daemon *d, uint64_t n)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;

	t_assert_eq(td_wait_sessions(d, 1, 5000, &st), 0);
	cc_wait_quarantined(d, n);
	wait_moved(d);
	cc_settled_stats(d->sock, &ts);
	t_ok(td_status(d, &st));
	t_assert_eq(st.pages_quarantined, n);
	t_assert_eq(st.pages_revoking, n); /* the owner let them go */
	t_assert_eq(st.sequences, 0);
	t_assert_eq(st.pages_allocated, n + ts.tiers[0].used_blocks * CC_PPB);
}

static void prefix_error(void)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	uint32_t fill_ids[NB * CC_PPB], ids[NB * CC_PPB], seq, fill, other;
	struct kvmm_stats_reply ss;
	struct kvmm_status_reply st;
	unsigned int nfds = 0;
	struct td_daemon d;
	uint64_t t0;
	struct cc c;
	int r;

	/* 12 block table entries for the uid: the filler's table takes 8 */
	start(&d, DELAY_MS, "12");
	cc_connect(&c, d.sock);
	cc_region(&c);
	fill = cc_seq_open(&c);
	cc_extend(&c, fill, NB * CC_TPB, fill_ids); /* the pool is full */
	/* the open's 4 fit beside them when it parks ... */
	seq = prefix_collect_open(&c);
	t_assert(seq != fill);
	cc_wait_parked(&d, 1);
	ref.region_id = c.region;
	ref.seq_id = seq;
	t_assert_eq(seq_cmd(&c, KVMM_CMD_SEQ_CLOSE, seq), -EBUSY);
	/* ... but not once a parked extend's table took one more */
	other = cc_seq_open(&c);
	t_ok(extend_collect(&c, other, CC_TPB));
	t0 = cc_now_ms();
	do {
		r = cc_call(&c, KVMM_CMD_PREFIX_COLLECT, &ref, sizeof(ref), buf,
			    sizeof(buf), NULL, NULL);
		if (r == -EAGAIN)
			usleep(10000);
	} while (r == -EAGAIN && cc_now_ms() - t0 < 10000);
	t_assert_eq(r, -ENOBUFS);
	/* its sequence is gone, nothing of it held */
	t_assert_eq(seq_cmd(&c, KVMM_CMD_SEQ_CLOSE, seq), -ENOENT);
	t_assert_eq(cc_call(&c, KVMM_CMD_PREFIX_COLLECT, &ref, sizeof(ref), buf,
			    sizeof(buf), NULL, NULL),
		    -ENOENT);
	session_stats(&c, &ss);
	t_assert_eq(ss.sequences, 2);
	/* the extend gets its block; then only the filler's pages */
	ref.seq_id = other;
	t0 = cc_now_ms();
	do {
		r = cc_call(&c, KVMM_CMD_SEQ_COLLECT, &ref, sizeof(ref), buf,
			    sizeof(buf), fds, &nfds);
		if (r == -EAGAIN)
			usleep(10000);
	} while (r == -EAGAIN && cc_now_ms() - t0 < 10000);
	t_ok(r);
	t_assert_eq(nfds, CC_PPB);
	for (unsigned int i = 0; i < nfds; i++)
		close(fds[i]);
	t_ok(seq_cmd(&c, KVMM_CMD_SEQ_CLOSE, other));
	wait_moved(&d);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked_now, 0);
	t_assert_eq(st.cmds_parked, 2);
	t_assert_eq(st.sequences, 1);
	session_stats(&c, &ss);
	t_assert_eq(ss.sequences, 1);
	t_assert_eq(ss.pages_held, NB * CC_PPB);
	t_assert_eq(ss.pages_owned, NB * CC_PPB);
	/* the connection goes on: a sequence of the 4 entries back */
	t_ok(cc_call(&c, KVMM_CMD_NOP, NULL, 0, NULL, 0, NULL, NULL));
	seq = cc_seq_open(&c);
	t_ok(cc_try_extend(&c, seq, NB * CC_TPB, ids));
	cc_seq_close(&c, seq, ids, NB * CC_PPB);
	cc_disconnect(&c);
	t_assert_eq(td_wait_sessions(&d, 1, 5000, &st), 0);
	wait_moved(&d);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_quarantined, 0);
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.sequences, 0);
	cc_stop(&d);
}

static void extend_left(void)
{
	uint32_t fill_ids[2 * CC_PPB], seq, fill;
	struct kvmm_stats_reply ss;
	struct td_daemon d;
	struct cc c;

	start(&d, 300, NULL);
	cc_connect(&c, d.sock);
	cc_region(&c);
	fill = cc_seq_open(&c);
	cc_extend(&c, fill, 2 * CC_TPB, fill_ids); /* mapped */
	seq = cc_seq_open(&c);
	/* 2 blocks free, 1 victim to copy: parks, then gets its pages */
	t_ok(extend_collect(&c, seq, 3 * CC_TPB));
	wait_moved(&d);
	session_stats(&c, &ss);
	t_assert_eq(ss.pages_owned, 5 * CC_PPB);
	hang_up(&c);
	only_quarantined(&d, 2 * CC_PPB);
	cc_stop(&d);
}

static void prefix_left(void)
{
	uint32_t fill_ids[NB * CC_PPB], fill;
	struct kvmm_status_reply st;
	struct kvmm_stats_reply ss;
	struct td_daemon d;
	struct cc c;

	start(&d, 300, NULL);
	cc_connect(&c, d.sock);
	cc_region(&c);
	fill = cc_seq_open(&c);
	cc_extend(&c, fill, NB * CC_TPB, fill_ids); /* mapped */
	prefix_collect_open(&c);
	wait_moved(&d);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cmds_parked, 1);
	session_stats(&c, &ss);
	t_assert_eq(ss.pages_owned, 2 * NB * CC_PPB);
	hang_up(&c);
	only_quarantined(&d, NB * CC_PPB);
	cc_stop(&d);
}

struct opener {
	struct kvmm_region *r;
	uint32_t seq, nb;
	int err;
};

static void *open_prefix(void *arg)
{
	struct opener *o = arg;
	uint64_t h[NB];

	for (int b = 0; b < NB; b++)
		h[b] = hash_of(0, b);
	o->err = kvmm_seq_open_prefix(o->r, h, NB, &o->seq, &o->nb);
	return NULL;
}

/* 3 through libkvmm: the open's call fails, and libkvmm has not kept the
 * sequence the pending reply named either. */
static void prefix_error_lib(void)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct opener o = { .err = 1 };
	struct kvmm_status_reply st;
	uint32_t fill, other, open = 0;
	struct kvmm_conn *c;
	struct td_daemon d;
	pthread_t t;

	start(&d, DELAY_MS, "12");
	c = cc_connect_lib(d.sock, "prefix-error");
	t_ok(kvmm_region_create(c, &ro, &o.r));
	t_ok(kvmm_seq_open(o.r, &fill));
	t_ok(kvmm_seq_extend(o.r, fill, NB * CC_TPB));
	t_assert_eq(pthread_create(&t, NULL, open_prefix, &o), 0);
	cc_wait_parked(&d, 1);
	t_ok(kvmm_seq_open(o.r, &other));
	t_ok(kvmm_seq_extend(o.r, other, CC_TPB));
	t_assert_eq(pthread_join(t, NULL), 0);
	t_assert_eq(o.err, -ENOBUFS);
	for (uint32_t i = 0; i < o.r->max_seqs; i++)
		open += o.r->seqs[i].open;
	t_assert_eq(open, 2);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.sequences, 2);
	t_ok(kvmm_seq_close(o.r, other));
	t_ok(kvmm_seq_close(o.r, fill));
	kvmm_disconnect(c);
	t_assert_eq(td_wait_sessions(&d, 1, 5000, &st), 0);
	wait_moved(&d);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_quarantined, 0);
	t_assert_eq(st.sequences, 0);
	cc_stop(&d);
}

/* SEQ_EXTEND of r's sequence seq to len through the ring: the result,
 * the length in *len. */
static int ring_extend(struct kvmm_region *r, uint32_t seq, uint64_t to,
		       uint64_t *len)
{
	return kc_ring_cmd(r->conn, KVMM_CMD_SEQ_EXTEND, r->id, seq, to, len);
}

static int socket_extend(struct kvmm_region *r, uint32_t seq, uint16_t cmd,
			 uint32_t len, uint32_t flags)
{
	struct kvmm_seq_extend ex = { .size = sizeof(ex),
				      .region_id = r->id,
				      .seq_id = seq,
				      .new_len = len,
				      .flags = flags };
	struct kvmm_seq_extend_reply rep;
	int err;

	err = kc_request(r->conn, cmd, &ex, sizeof(ex), &rep, sizeof(rep),
			 NULL);
	if (!err && flags)
		t_assert_eq(rep.flags, KVMM_EXTEND_REPLY_PENDING);
	return err;
}

static void ring_while_waiting(void)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_seq_extend_reply *rep = (void *)buf;
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_status_reply st;
	int fds[KVMM_MSG_MAX_FDS];
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	unsigned int nfds;
	uint64_t len = 0;
	uint32_t seq;
	int err;

	start(&d, DELAY_MS, NULL);
	c = cc_connect_lib(d.sock, "ring");
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 100)); /* block 0: 3 blocks free */
	/* 4 more blocks: one victim's copy */
	t_ok(socket_extend(r, seq, KVMM_CMD_SEQ_EXTEND, 5 * CC_TPB,
			   KVMM_SEQ_EXTEND_COLLECT));
	cc_wait_parked(&d, 1);
	t_ok(ring_extend(r, seq, 200, &len));
	t_assert_eq(len, 200);
	t_assert_eq(ring_extend(r, seq, CC_TPB + 1, &len), -ENODATA);
	t_assert_eq(socket_extend(r, seq, KVMM_CMD_SEQ_TRUNCATE, 150, 0),
		    -EBUSY);
	/* its pages came: waiting to be collected, the length its own */
	wait_moved(&d);
	t_ok(ring_extend(r, seq, 250, &len));
	t_assert_eq(len, 5 * CC_TPB);
	t_assert_eq(socket_extend(r, seq, KVMM_CMD_SEQ_TRUNCATE, 150, 0),
		    -EBUSY);
	ref.region_id = r->id;
	ref.seq_id = seq;
	pthread_mutex_lock(&c->sock_lock);
	err = kc_request_locked(c, KVMM_CMD_SEQ_COLLECT, &ref, sizeof(ref), buf,
				sizeof(buf), NULL, fds, KVMM_MSG_MAX_FDS,
				&nfds);
	pthread_mutex_unlock(&c->sock_lock);
	t_ok(err);
	t_assert_eq(rep->first_block, 1);
	t_assert_eq(rep->nr_blocks, 4);
	t_assert_eq(rep->len, 5 * CC_TPB);
	t_assert_eq(rep->nr_fds, 4 * CC_PPB);
	t_assert_eq(nfds, 4 * CC_PPB);
	for (unsigned int i = 0; i < nfds; i++)
		close(fds[i]);
	/* the client's again */
	t_ok(socket_extend(r, seq, KVMM_CMD_SEQ_TRUNCATE, 5 * CC_TPB, 0));
	kvmm_disconnect(c);
	t_assert_eq(td_wait_sessions(&d, 1, 5000, &st), 0);
	cc_stop(&d);
}

int main(void)
{
	extend_left();
	prefix_left();
	prefix_error();
	prefix_error_lib();
	ring_while_waiting();
	return 0;
}
