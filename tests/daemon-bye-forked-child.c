// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A BYE counts only as a session's last word.  A client forks after
 * connecting and the child, sharing the socket, says BYE (an older
 * libkvmm's kvmm_disconnect() did) while the parent maps 2 blocks and
 * goes on:
 *   A: the parent is cut off (kvmmctl kill) before it sends anything
 *      more: its pages are quarantined (a cut-off quarantines after a BYE
 *      too);
 *   B: the parent sends a NOP, then hangs up without BYE while it lives:
 *      quarantined too (the NOP cleared the BYE);
 *   D: the same with the NOP through the ring (a libkvmm client);
 *   E: the same with the ring NOP still in the submission ring at the
 *      hang-up: the parent left its completion ring full, so kvmmd could
 *      not take it before the EOF.  It is a command after the BYE all
 *      the same, and the pages are quarantined too.
 * All used to release the pages at once, so the next client got pages
 * the parent still wrote (E until kvmmd looked at the ring at EOF: any
 * delay between the ring and the socket, a full CQ here, the race of a
 * spinning daemon that dispatches the socket between two ring polls
 * otherwise).  A plain BYE, then EOF, still releases them at once (C).
 */
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NPAGES (2 * CC_PPB)

/* A session with 2 blocks mapped; its id. */
static uint32_t session_with_pages(struct cc *c, const char *sock)
{
	static uint32_t ids[CC_MAX_PAGES];
	struct kvmm_stats_reply st;

	cc_connect(c, sock);
	cc_region(c);
	cc_extend(c, cc_seq_open(c), 2 * CC_TPB, ids);
	t_ok(cc_call(c, KVMM_CMD_STATS, NULL, 0, &st, sizeof(st), NULL, NULL));
	t_assert_eq(st.pages_held, NPAGES);
	return st.session_id;
}

/* A forked child says BYE on the session's socket and exits. */
static void child_says_bye(struct cc *c)
{
	pid_t pid = fork();

	t_assert(pid >= 0);
	if (pid == 0) {
		t_ok(cc_call(c, KVMM_CMD_BYE, NULL, 0, NULL, 0, NULL, NULL));
		_exit(0);
	}
	t_assert_eq(cc_wait_child(pid), 0);
}

/* One NOP into lc's submission ring, as libkvmm posts one (doorbell when
 * kvmmd sleeps), without waiting for its completion. */
static void ring_post_nop(struct kvmm_conn *lc)
{
	struct kvmm_sqe sqe = { .cmd = KVMM_CMD_NOP,
				.user_data = ++lc->next_user_data };
	struct kvmm_sqe *sqes = lc->r.sq.array;
	uint64_t one = 1;

	while (lc->sq_tail - kr_load_acquire(lc->r.sq.head) == lc->r.sq.entries)
		usleep(100); /* the SQ is full: kvmmd takes them as CQ room allows */
	memcpy(&sqes[lc->sq_tail & lc->r.sq.mask], &sqe, sizeof(sqe));
	lc->sq_tail++;
	kr_store_release(lc->r.sq.tail, lc->sq_tail);
	kr_full_barrier(); /* tail before the flag: see kvmmd's sleep */
	if (kr_load_relaxed(lc->r.flags) & KVMM_RING_F_NEED_WAKEUP)
		t_assert_eq(write(lc->sq_efd, &one, sizeof(one)), sizeof(one));
}

/* Wait (up to 10 s) until the ring's CQ holds n completions not reaped. */
static void ring_wait_cq(struct kvmm_conn *lc, uint32_t n)
{
	for (int i = 0; i < 10000; i++) {
		if (kr_load_acquire(lc->r.cq.tail) - lc->cq_head == n)
			return;
		usleep(1000);
	}
	t_fail("the CQ never held %u completions", n);
}

/* Wait (up to 10 s) until kvmmd has no session but the status one. */
static void wait_sessions_gone(struct td_daemon *d,
			       struct kvmm_status_reply *st)
{
	t_ok(td_status(d, st));
	for (int i = 0; i < 10000 && st->sessions > 1; i++) {
		usleep(1000);
		t_ok(td_status(d, st));
	}
	t_assert_eq(st->sessions, 1);
}

int main(void)
{
	struct kvmm_status_reply st;
	struct td_daemon d;
	char cmd[64], out[256];
	struct cc a, b, c;
	uint32_t id;

	cc_start(&d, NULL);

	/* A */
	id = session_with_pages(&a, d.sock);
	child_says_bye(&a);
	snprintf(cmd, sizeof(cmd), "kill %u", id);
	t_assert_eq(td_kvmmctl(d.sock, cmd, out, sizeof(out)), 0);
	cc_wait_quarantined(&d, NPAGES);

	/* B */
	session_with_pages(&b, d.sock);
	child_says_bye(&b);
	t_ok(cc_call(&b, KVMM_CMD_NOP, NULL, 0, NULL, 0, NULL, NULL));
	close(b.sock); /* EOF without BYE of its own; it lives on */
	cc_wait_quarantined(&d, 2 * NPAGES);

	/* C: the parent's own BYE, then EOF: released at once */
	session_with_pages(&c, d.sock);
	cc_disconnect(&c);
	wait_sessions_gone(&d, &st);
	t_assert_eq(st.pages_quarantined, 2 * NPAGES);
	/* D: libkvmm's session, its socket's BYE said by a child (raw: the
	 * library itself says nothing in a child), a NOP through the ring */
	{
		struct kvmm_region_opts ro = cc_region_opts();
		struct kvmm_conn *lc = cc_connect_lib(d.sock, "ring-client");
		struct cc raw = { .sock = lc->sock };
		struct kvmm_region *r;
		uint32_t seq;

		t_ok(kvmm_region_create(lc, &ro, &r));
		t_ok(kvmm_seq_open(r, &seq));
		t_ok(kvmm_seq_extend(r, seq, 2 * CC_TPB));
		child_says_bye(&raw);
		t_ok(kvmm_nop(lc, 0));
		t_ok(shutdown(lc->sock, SHUT_RDWR)); /* EOF; it lives on */
		cc_wait_quarantined(&d, 3 * NPAGES);
		kvmm_disconnect(lc);
	}
	/* E: as D, but the ring NOP after the BYE is not taken before EOF */
	{
		struct kvmm_region_opts ro = cc_region_opts();
		struct kvmm_connect_opts co = { .size = sizeof(co),
						.socket_path = d.sock,
						.name = "ring-pending",
						.map_ahead_set = 1,
						.sq_entries = 4 };
		struct kvmm_conn *lc;
		struct kvmm_region *r;
		struct cc raw;
		uint32_t seq, cq_n;

		t_ok(kvmm_connect(&co, &lc));
		raw = (struct cc){ .sock = lc->sock };
		t_ok(kvmm_region_create(lc, &ro, &r));
		t_ok(kvmm_seq_open(r, &seq));
		t_ok(kvmm_seq_extend(r, seq, 2 * CC_TPB));
		/* completions nobody reaps fill the CQ, all before the BYE */
		cq_n = lc->r.cq.entries;
		for (uint32_t i = 0; i < cq_n; i++)
			ring_post_nop(lc);
		ring_wait_cq(lc, cq_n);
		child_says_bye(&raw);
		ring_post_nop(lc);
		usleep(20000);
		/* kvmmd has not taken it (no CQ room) and will not */
		t_assert_eq(kr_load_acquire(lc->r.sq.head), lc->sq_tail - 1);
		t_ok(shutdown(lc->sock, SHUT_RDWR)); /* EOF; it lives on */
		wait_sessions_gone(&d, &st);
		t_assert_eq(st.pages_quarantined, 4 * NPAGES);
		kvmm_disconnect(lc);
	}
	printf("quarantined after a child's BYE: cut off %d, socket NOP then EOF %d, ring NOP then EOF %d, ring NOP pending at EOF %d pages; after the client's own BYE: 0\n",
	       NPAGES, NPAGES, NPAGES, NPAGES);
	cc_stop(&d);
	return 0;
}
