// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * Quota entries go when nothing keeps them, so any number of uids can
 * come and go.  A limit is set for uid A (1M: 4 blocks of 4 pages); then
 * processes of 100 other uids connect and leave one after the other
 * (kvmmd's fixed table of 64 entries kept every uid it had seen: the
 * 65th uid's sessions ran with no quota at all, counted nowhere, and
 * ADMIN_SET_QUOTA of a new uid failed with -ENOSPC).  Afterwards A's limit
 * still holds (4 blocks fit, a 5th is -EDQUOT); a limit set for a new
 * uid B works, both for a session B had open before the limit was set
 * and for a later one; and C, never limited, extends freely.  Needs root
 * (processes of other uids).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/cache-uids.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define UID_BASE 62000 /* the 100 passing uids */
#define NR_UIDS 100
#define UID_A 62200
#define UID_B 62201
#define UID_C 62202
#define QUOTA_BLOCKS 4

static void set_quota(const char *sock, uint32_t uid, uint64_t bytes)
{
	t_ok(td_set_quota(sock, uid, bytes));
}

/*
 * A process of uid connects; when wait_fd >= 0 it then waits for a byte
 * on it.  With blocks > 0 it extends a sequence to that many blocks,
 * which must work, and when limited, one more, which must be -EDQUOT.
 */
static pid_t as_uid(const char *sock, uid_t uid, uint32_t blocks, bool limited,
		    int wait_fd)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t ids[CC_MAX_PAGES];
		struct cc c;
		uint32_t seq;
		char b;

		cu_become(uid, uid);
		cc_connect(&c, sock);
		if (wait_fd >= 0)
			t_assert_eq(read(wait_fd, &b, 1), 1);
		if (blocks) {
			cc_region(&c);
			seq = cc_seq_open(&c);
			cc_extend(&c, seq, blocks * CC_TPB, ids);
			if (limited)
				t_assert_eq(cc_try_extend(&c, seq,
							  (blocks + 1) * CC_TPB,
							  ids),
					    -EDQUOT);
		}
		cc_disconnect(&c);
		_exit(0);
	}
	return p;
}

/* Wait (up to 10 s) until kvmmd has n sessions. */
static void wait_sessions(struct td_daemon *d, uint64_t n)
{
	struct kvmm_status_reply st;

	for (int i = 0; i < 10000; i++) {
		t_ok(td_status(d, &st));
		if (st.sessions == n)
			return;
		usleep(1000);
	}
	t_fail("sessions never reached %llu (is %llu)", (unsigned long long)n,
	       (unsigned long long)st.sessions);
}

int main(void)
{
	const char *args[] = { "--socket-mode", "0666", "--gpu-mem", "8M",
			       NULL };
	struct td_daemon d;
	int go[2];
	pid_t p;

	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	cu_start(&d, args);
	set_quota(d.sock, UID_A, 1 << 20);
	for (uint32_t i = 0; i < NR_UIDS; i++)
		t_assert_eq(cc_wait_child(
				    as_uid(d.sock, UID_BASE + i, 0, false, -1)),
			    0);

	/* A's limit outlived the churn */
	t_assert_eq(
		cc_wait_child(as_uid(d.sock, UID_A, QUOTA_BLOCKS, true, -1)),
		0);

	/* B connects first, is limited while connected, then extends */
	t_ok(pipe(go));
	p = as_uid(d.sock, UID_B, QUOTA_BLOCKS, true, go[0]);
	wait_sessions(&d, 2); /* B's and the status's own */
	set_quota(d.sock, UID_B, 1 << 20);
	t_assert_eq(write(go[1], "", 1), 1);
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(
		cc_wait_child(as_uid(d.sock, UID_B, QUOTA_BLOCKS, true, -1)),
		0);

	/* C has no limit: twice A's and B's */
	t_assert_eq(cc_wait_child(
			    as_uid(d.sock, UID_C, 2 * QUOTA_BLOCKS, false, -1)),
		    0);
	t_ok(td_wait_idle(&d, 5000, NULL));
	cc_stop(&d);
	return 0;
}
