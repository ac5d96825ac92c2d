// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A quarantined page that no block owns is charged once, to one of the
 * quarantined processes that hold it, for as long as one does.  Root has
 * --quota 0=512K (8 pages, 2 blocks of 4) and the GPU cache keeps one
 * block; uid 4322 publishes the block B both root processes A and C open:
 *   - A opens B and hangs up without BYE, living on: quarantined (B's
 *     pages are charged to its publisher);
 *   - C opens B; kvmmctl revokes C's sequence and C never acknowledges;
 *     uid 4322 publishes another block, which evicts B: B's pages are
 *     freed while A and C map them, and charged to A's uid (4 pages);
 *   - C is cut off at the revocation timeout and quarantined too.  Its
 *     pages were charged again (8 of root's 8: a new session of root got
 *     -EDQUOT for one block) and pages.quarantined said 8; now 4, and one
 *     block fits, a second is -EDQUOT.
 *   - A exits: the charge passes to C (still no room for a second);
 *     C exits: nothing is quarantined, a second block fits, a third not.
 * Needs root (the publisher is another uid).
 */
#include <sys/stat.h>

#include "tests/cache-uids.h"

#define PUBLISHER 4322

static const uint64_t hb = 0x6600001, hb2 = 0x6600002;

struct opened {
	uint32_t session_id, region_id, seq_id;
};

/* A root child: HELLO, B opened; o says where (written to ready); with
 * hang_up, the connection closed without BYE.  Lives until go[1] closes
 * and never reads its ring (no acknowledgement).  other: the go[1] of an
 * earlier child, which it must not keep open (or -1). */
static pid_t opener(const char *sock, bool hang_up, const int *ready,
		    const int *go, int other)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct kvmm_hello hello = { .size = sizeof(hello),
				    .abi_major = KVMM_ABI_MAJOR };
	static uint32_t ids[CC_MAX_PAGES];
	struct kvmm_prefix_open_reply pr;
	struct kvmm_hello_reply hr;
	struct opened o;
	struct cc c;
	unsigned int n;
	pid_t p = fork();
	char b;

	t_assert(p >= 0);
	if (p)
		return p;
	close(ready[0]);
	close(go[1]);
	if (other >= 0)
		close(other);
	memset(&c, 0, sizeof(c));
	c.sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	t_ok(connect(c.sock, (struct sockaddr *)&sa, sizeof(sa)));
	t_ok(cc_call(&c, KVMM_CMD_HELLO, &hello, sizeof(hello), &hr, sizeof(hr),
		     c.ring_fds, &n));
	cc_region(&c);
	cc_prefix(&c, &hb, 1, &pr, ids);
	t_assert_eq(pr.nr_blocks, 1);
	o.session_id = hr.session_id;
	o.region_id = c.region;
	o.seq_id = pr.seq_id;
	if (hang_up)
		close(c.sock);
	t_assert_eq(write(ready[1], &o, sizeof(o)), sizeof(o));
	t_assert_eq(read(go[0], &b, 1), 0);
	_exit(0);
}

static void wait_cut_off(const struct td_daemon *d, uint64_t n)
{
	struct kvmm_status_reply st;

	for (int i = 0; i < 10000; i++) {
		t_ok(td_status(d, &st));
		if (st.sessions_cut_off == n)
			return;
		usleep(1000);
	}
	t_fail("sessions_cut_off never reached %llu", (unsigned long long)n);
}

int main(void)
{
	static uint32_t ids[CC_MAX_PAGES];
	const char *args[] = { "--quota",
			       "0=512K",
			       "--gpu-mem",
			       "8M",
			       "--cache-gpu-blocks",
			       "1",
			       "--revoke-timeout",
			       "300",
			       NULL };
	int ready_a[2], go_a[2], ready_c[2], go_c[2];
	struct opened oa, oc;
	struct td_daemon d;
	pid_t a, c_pid;
	struct cc c;
	uint32_t seq;

	if (geteuid())
		t_skip("needs root (a publisher of another uid)");
	cc_start(&d, args);
	t_ok(chmod(d.dir, 0777));
	t_ok(chmod(d.sock, 0777));
	cu_publish_as(d.sock, PUBLISHER, PUBLISHER, &hb, 1, 1, 1);

	t_ok(pipe(ready_a));
	t_ok(pipe(go_a));
	a = opener(d.sock, true, ready_a, go_a, -1);
	close(ready_a[1]);
	close(go_a[0]);
	t_assert_eq(read(ready_a[0], &oa, sizeof(oa)), sizeof(oa));
	cc_wait_quarantined(&d, CC_PPB);

	t_ok(pipe(ready_c));
	t_ok(pipe(go_c));
	c_pid = opener(d.sock, false, ready_c, go_c, go_a[1]);
	close(ready_c[1]);
	close(go_c[0]);
	t_assert_eq(read(ready_c[0], &oc, sizeof(oc)), sizeof(oc));
	{
		struct kvmm_admin_revoke r = { .size = sizeof(r),
					       .session_id = oc.session_id,
					       .region_id = oc.region_id,
					       .seq_id = oc.seq_id };

		cc_connect(&c, d.sock);
		t_ok(cc_call(&c, KVMM_CMD_ADMIN_REVOKE, &r, sizeof(r), NULL, 0,
			     NULL, NULL));
		cc_disconnect(&c);
	}
	/* B evicted (no host tier: dropped) while A and C map it */
	cu_publish_as(d.sock, PUBLISHER, PUBLISHER, &hb2, 1, 2, 1);
	wait_cut_off(&d, 1); /* and quarantined */

	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	t_ok(cc_try_extend(&c, seq, CC_TPB, ids)); /* was -EDQUOT */
	t_assert_eq(cc_try_extend(&c, seq, 2 * CC_TPB, ids), -EDQUOT);
	cc_wait_quarantined(&d, CC_PPB); /* was 2 * CC_PPB */

	/* A goes: C still maps B's pages and pays for them */
	close(go_a[1]);
	t_assert_eq(cc_wait_child(a), 0);
	cc_wait_quarantined(&d, CC_PPB);
	t_assert_eq(cc_try_extend(&c, seq, 2 * CC_TPB, ids), -EDQUOT);

	close(go_c[1]);
	t_assert_eq(cc_wait_child(c_pid), 0);
	cc_wait_quarantined(&d, 0);
	cc_extend(&c, seq, 2 * CC_TPB, ids);
	t_assert_eq(cc_try_extend(&c, seq, 3 * CC_TPB, ids), -EDQUOT);
	cc_disconnect(&c);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
