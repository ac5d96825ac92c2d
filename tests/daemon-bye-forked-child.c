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
 *   D: the same with the NOP through the ring (a libkvmm client).
 * All used to release the pages at once, so the next client got pages
 * the parent still wrote.  A plain BYE, then EOF, still releases them at
 * once (C).
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
	t_ok(td_status(&d, &st));
	for (int i = 0; i < 10000 && st.sessions > 1; i++) {
		usleep(1000);
		t_ok(td_status(&d, &st));
	}
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
	printf("quarantined after a child's BYE: cut off %d, socket NOP then EOF %d, ring NOP then EOF %d pages; after the client's own BYE: 0\n",
	       NPAGES, NPAGES, NPAGES);
	cc_stop(&d);
	return 0;
}
