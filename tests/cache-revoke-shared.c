// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A page of a shared cached block is not reused until every client that
 * maps it has given it back, with a real kvmmd (pool of 8 blocks, host
 * tier) and real client processes.  A publisher writes a 2-block content;
 * holder A (libkvmm) opens it as a prefix (the same physical pages);
 * B (raw wire client) then asks for more pages than are free, so the cache
 * demotes the content to host memory.
 *
 *   closed:  A closed its sequence (libkvmm unmapped first): A holds
 *            nothing, no revocation is needed, the demoted pages go
 *            straight to B.
 *   delayed: A's sequence is revoked (the only way a session keeps pages
 *            no open sequence of it references) and A holds back its ack.
 *            A's revocation ring names exactly the content's pages; the
 *            demoted blocks' pages stay REVOKING: the reclaim goes on to
 *            a block nobody maps and B gets its pages, never those; with
 *            nothing else left B's extend fails (-ENOMEM); after A's ack
 *            (kvmm_process_revocations: pages_revoked) B gets them.
 *   silent:  A never acks: after --revoke-timeout it is cut off, its pages
 *            are quarantined while its process lives, and come back to
 *            the pool (and to B) when it is killed.
 */
#include <signal.h>
#include <sys/wait.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/cache-common.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"

#define NB 2
#define NP (NB * CC_PPB)

enum mode { CLOSED, DELAYED, SILENT };

/* What A tells the parent. */
struct amsg {
	uint32_t session, region, seq, n;
	uint32_t ids[NP];
	int32_t val;
	uint32_t pad;
	uint64_t pages_revoked, revocations_posted;
};

static uint64_t hash_of(int content, int b)
{
	return 0x500000ull * (content + 1) + b + 1;
}

static struct td_daemon *g_d; /* for its log */

/* A publisher process writes content k (nb blocks) and exits; ids gets
 * its page ids. */
static void publish_n(const char *sock, int k, uint32_t nb, uint32_t *ids)
{
	uint64_t h[NB];

	for (uint32_t b = 0; b < nb; b++)
		h[b] = hash_of(k, b);
	if (cc_publish_content(sock, h, nb, 700 + k, ids)) {
		td_dump_log(g_d);
		t_fail("publisher of content %d failed", k);
	}
}

static void publish(const char *sock, int k, uint32_t *ids)
{
	publish_n(sock, k, NB, ids);
}

static void send_msg(int fd, struct amsg *m)
{
	if (write(fd, m, sizeof(*m)) != sizeof(*m))
		_exit(3);
}

static void recv_msg(int fd, struct amsg *m)
{
	t_assert_eq(read(fd, m, sizeof(*m)), sizeof(*m));
}

static char wait_cmd(int fd)
{
	char ch = 0;

	if (read(fd, &ch, 1) != 1)
		_exit(4);
	return ch;
}

static void fill_stats(struct kvmm_conn *c, struct amsg *m)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_stats_reply st;

	if (kvmm_get_stats(c, &ks) ||
	    kc_request(c, KVMM_CMD_STATS, NULL, 0, &st, sizeof(st), NULL))
		_exit(5);
	m->session = ks.session_id;
	m->pages_revoked = ks.pages_revoked;
	m->revocations_posted = st.revocations_posted;
}

/* Holder A: opens content k as a prefix, then follows the parent. */
static int holder(const char *sock, int k, enum mode mode, int wr, int rd)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = "holder",
					.map_ahead_set = 1 };
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct amsg m = { 0 };
	uint64_t h[NB];
	uint32_t seq, nb;

	for (int b = 0; b < NB; b++)
		h[b] = hash_of(k, b);
	if (kvmm_connect(&co, &c) || kvmm_region_create(c, &ro, &r) ||
	    kvmm_seq_open_prefix(r, h, NB, &seq, &nb) || nb != NB)
		return 2;
	for (uint32_t b = 0; b < NB; b++)
		if (kvmm_seq_block_pages(r, seq, b, m.ids + b * CC_PPB,
					 CC_PPB) != CC_PPB)
			return 2;
	fill_stats(c, &m);
	m.region = r->id;
	m.seq = seq;
	m.n = NP;
	send_msg(wr, &m);
	if (mode == SILENT)
		for (;;)
			pause();
	if (mode == CLOSED) {
		wait_cmd(rd);
		m.val = kvmm_seq_close(r, seq);
		send_msg(wr, &m);
	} else {
		/* peek at the revocation ring without consuming it */
		struct kvmm_rqe *rq = c->r.rq.array;
		uint32_t tail;

		wait_cmd(rd);
		tail = kr_load_acquire(c->r.rq.tail);
		m.n = tail - c->rq_head;
		for (uint32_t i = 0; i < m.n && i < NP; i++)
			m.ids[i] = rq[(c->rq_head + i) & c->r.rq.mask].page_id;
		send_msg(wr, &m);
		wait_cmd(rd);
		m.val = kvmm_process_revocations(c);
		fill_stats(c, &m);
		send_msg(wr, &m);
	}
	wait_cmd(rd);
	fill_stats(c, &m);
	send_msg(wr, &m);
	kvmm_disconnect(c);
	return 0;
}

struct holder_proc {
	pid_t pid;
	int up, down;
};

static void holder_start(struct holder_proc *hp, const char *sock, int k,
			 enum mode mode, struct amsg *m)
{
	int up[2], down[2];

	t_ok(pipe(up));
	t_ok(pipe(down));
	hp->pid = fork();
	if (hp->pid == 0)
		_exit(holder(sock, k, mode, up[1], down[0]));
	close(up[1]);
	close(down[0]);
	hp->up = up[0];
	hp->down = down[1];
	recv_msg(hp->up, m);
}

static void holder_cmd(struct holder_proc *hp, char ch, struct amsg *m)
{
	t_assert_eq(write(hp->down, &ch, 1), 1);
	recv_msg(hp->up, m);
}

static void holder_end(struct holder_proc *hp, struct amsg *m)
{
	holder_cmd(hp, 'q', m);
	t_assert_eq(cc_wait_child(hp->pid), 0);
	close(hp->up);
	close(hp->down);
}

static void admin_revoke(const struct td_daemon *d, const struct amsg *m)
{
	t_ok(ar_revoke(d->sock, m->session, m->region, m->seq, 0));
}

static void status(const struct td_daemon *d, struct kvmm_status_reply *st)
{
	t_ok(td_status(d, st));
}

int main(void)
{
	const char *args[] = { "--gpu-mem",
			       "2M",
			       "--cache-gpu-blocks",
			       "8",
			       "--host-mem",
			       "2M",
			       "--revoke-timeout",
			       "400",
			       "--cache-policy",
			       "lru",
			       NULL };
	uint32_t pub[NP], other[CC_PPB], bids[8 * CC_PPB];
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	struct holder_proc hp;
	struct td_daemon d;
	struct amsg m;
	struct cc b;
	uint32_t seq;

	g_d = &d;
	td_start_ok(&d, args);

	/* closed: nothing to revoke, the pages go to B at once */
	publish(d.sock, 0, pub);
	cc_connect(&b, d.sock);
	cc_region(&b);
	holder_start(&hp, d.sock, 0, CLOSED, &m);
	t_assert(memcmp(m.ids, pub, sizeof(pub)) == 0); /* zero-copy */
	holder_cmd(&hp, 'c', &m);
	t_assert_eq(m.val, 0);
	status(&d, &st);
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.pages_allocated, NP); /* the cache's copy */
	seq = cc_seq_open(&b);
	t_ok(cc_try_extend(&b, seq, 8 * CC_TPB, bids)); /* the whole pool */
	t_assert_eq(cc_overlap(bids, 8 * CC_PPB, pub, NP), NP);
	cc_tier_stats(&b, &ts);
	t_assert_eq(ts.pressure_reclaims, NB);
	status(&d, &st);
	t_assert_eq(st.revocations_posted, 0);
	t_assert_eq(st.pages_revoking, 0);
	holder_end(&hp, &m);
	t_assert_eq(m.pages_revoked, 0);
	t_assert_eq(m.revocations_posted, 0);
	cc_seq_close(&b, seq, bids, 8 * CC_PPB);

	/* delayed: the pages wait for A's ack */
	publish(d.sock, 1, pub);
	holder_start(&hp, d.sock, 1, DELAYED, &m);
	t_assert(memcmp(m.ids, pub, sizeof(pub)) == 0);
	admin_revoke(&d, &m);
	status(&d, &st);
	t_assert_eq(st.revocations_posted, 1);
	t_assert_eq(st.pages_mapped, NP);
	t_assert_eq(st.pages_revoking, 0); /* still the cache's */
	holder_cmd(&hp, 'p', &m);
	t_assert_eq(m.n, NP); /* exactly the content's pages */
	t_assert(memcmp(m.ids, pub, sizeof(pub)) == 0);
	publish_n(d.sock, 3, 1, other); /* newer, and nobody maps it */
	seq = cc_seq_open(&b);
	/* 20 pages free, 24 wanted: the least recently used victims are the
	 * content's blocks, copied out but their pages REVOKING; the reclaim
	 * goes on to the block nobody maps, and the extend gets its pages */
	t_ok(cc_try_extend(&b, seq, 6 * CC_TPB, bids));
	t_assert_eq(cc_overlap(bids, 6 * CC_PPB, pub, NP), 0);
	t_assert_eq(cc_overlap(bids, 6 * CC_PPB, other, CC_PPB), CC_PPB);
	cc_tier_stats(&b, &ts);
	t_assert_eq(ts.pressure_reclaims, NB + NB + 1);
	status(&d, &st);
	t_assert_eq(st.pages_revoking, NP);
	t_assert_eq(st.pages_free, 0);
	/* only REVOKING pages are left: fail rather than take them */
	t_assert_eq(cc_try_extend(&b, seq, 7 * CC_TPB, bids), -ENOMEM);
	holder_cmd(&hp, 'a', &m);
	t_assert_eq(m.val, NP);
	t_assert_eq(m.pages_revoked, NP);
	status(&d, &st);
	t_assert_eq(st.revocations_acked, 1);
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.pages_mapped, 6 * CC_PPB); /* B's own */
	t_assert_eq(st.pages_free, NP);
	t_ok(cc_try_extend(&b, seq, 7 * CC_TPB, bids)); /* now they are free */
	t_assert_eq(cc_overlap(bids, 7 * CC_PPB, pub, NP), CC_PPB);
	holder_end(&hp, &m);
	t_assert_eq(m.revocations_posted, 1);
	t_ok(cc_try_extend(&b, seq, 8 * CC_TPB, bids));
	t_assert_eq(cc_overlap(bids, 8 * CC_PPB, pub, NP), NP);
	cc_seq_close(&b, seq, bids, 8 * CC_PPB);
	/* the block demoted while A still mapped it was copied out whole */
	{
		struct kvmm_prefix_open_reply rep;
		uint64_t h[NB] = { hash_of(1, 0), hash_of(1, 1) };
		uint32_t ids[NP];
		struct cc rd;

		cc_connect(&rd, d.sock);
		cc_region(&rd);
		cc_prefix(&rd, h, NB, &rep, ids);
		t_assert_eq(rep.nr_blocks, NB);
		t_assert_eq(rep.from_host, NB);
		cc_check(&rd, ids, NB, 701);
		cc_seq_close(&rd, rep.seq_id, ids, NP);
		cc_disconnect(&rd);
	}

	/* silent: cut off, quarantined, reclaimed when the process exits */
	publish(d.sock, 2, pub);
	holder_start(&hp, d.sock, 2, SILENT, &m);
	admin_revoke(&d, &m);
	seq = cc_seq_open(&b);
	/* the other cached blocks go, then the content's: still short */
	t_assert_eq(cc_try_extend(&b, seq, 7 * CC_TPB, bids), -ENOMEM);
	for (int i = 0; i < 300; i++) {
		status(&d, &st);
		if (st.sessions_cut_off)
			break;
		usleep(10000);
	}
	t_assert_eq(st.sessions_cut_off, 1);
	t_assert_eq(st.revocations_timed_out, 1);
	t_assert_eq(st.pages_quarantined, NP);
	t_assert_eq(st.pages_revoking, NP);
	kill(hp.pid, SIGKILL);
	t_assert_eq(cc_wait_child(hp.pid), 128 + SIGKILL);
	for (int i = 0; i < 300; i++) {
		status(&d, &st);
		if (!st.pages_quarantined && !st.pages_revoking)
			break;
		usleep(10000);
	}
	t_assert_eq(st.pages_quarantined, 0);
	t_assert_eq(st.pages_revoking, 0);
	t_ok(cc_try_extend(&b, seq, 8 * CC_TPB, bids));
	t_assert_eq(cc_overlap(bids, 8 * CC_PPB, pub, NP), NP);
	cc_seq_close(&b, seq, bids, 8 * CC_PPB);
	close(hp.up);
	close(hp.down);
	cc_disconnect(&b);
	/* no page was ever handed out while another process held it */
	{
		FILE *f = fopen(d.log, "re");
		char line[512];

		t_assert(f != NULL);
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "handed out in state"))
				t_fail("kvmmd: %s", line);
		fclose(f);
	}
	td_stop_ok(&d);
	return T_PASS;
}
