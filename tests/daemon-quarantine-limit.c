// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * A uid's quarantine records are bounded.  kvmmd runs without pidfds
 * (tests/shims/nopidfd.so), so every record is polled.  256 processes of
 * one unprivileged uid (kvmmd's default bound) each map a block and hang
 * up without BYE while they live on: 256 records.  Then
 *   - a 257th process of that uid is refused: its HELLO is answered
 *     -ETOOMANYREFS, counted in ADMIN_STATUS (sessions_refused_quarantine)
 *     and shown by kvmmctl status, with the bound (quarantine_per_uid);
 *   - one of the 256 still connects (its sessions add to its own record);
 *   - another uid, and root, still connect;
 *   - once one of the 256 exits, the 257th gets its session.
 * Then the same against a kvmmd started with --quarantine-per-uid 4 and
 * 4 such processes: the 5th is refused, and ADMIN_STATUS and kvmmctl
 * status say 4.  (Values out of range stop kvmmd's start:
 * tests/kvmmd-option-errors.sh.)
 * The quarantine's safety is unchanged: all the processes' pages stay
 * quarantined while they live.  Records used to grow with the processes
 * a uid ran (each polled every 200 ms): the 257th got its session.
 * Needs root (processes of other uids).
 */
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/cache-uids.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nopidfd.h"
#include "tests/lib/test.h"

#define UID_Q 62601 /* the uid whose processes hang up */
#define UID_R 62602 /* someone else */
#define NPROC 256 /* KD_ZOMBIES_PER_UID, --quarantine-per-uid's default */
#define NPROC_SET "4" /* the bound the second kvmmd is given */

struct hanger {
	pid_t pid;
	int cmd; /* write a byte: HELLO again, and answer on res */
	int res;
};

/*
 * A process of UID_Q that maps a block, hangs up without BYE and lives
 * on; on each byte from the parent it sends a HELLO on a new connection
 * and writes the status back.  It lives until killed.
 */
static void hang_up(const char *sock, struct hanger *h)
{
	static uint32_t ids[CC_PPB];
	int cmd[2], res[2];
	struct cc c;
	uint32_t seq;
	char x;

	t_ok(pipe(cmd));
	t_ok(pipe(res));
	h->pid = fork();
	t_assert(h->pid >= 0);
	if (h->pid == 0) {
		close(cmd[1]);
		close(res[0]);
		cu_become(UID_Q, UID_Q);
		t_ok(prctl(PR_SET_PDEATHSIG, SIGKILL));
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, CC_TPB, ids);
		close(c.sock); /* no BYE: the pages stay mapped here */
		x = 0;
		t_assert_eq(write(res[1], &x, 1), 1);
		while (read(cmd[0], &x, 1) == 1) {
			int st = cu_try_hello(sock);

			t_assert_eq(write(res[1], &st, sizeof(st)), sizeof(st));
		}
		_exit(0);
	}
	close(cmd[0]);
	close(res[1]);
	h->cmd = cmd[1];
	h->res = res[0];
	t_assert_eq(read(h->res, &x, 1), 1);
}

static int hello_again(struct hanger *h)
{
	char x = 1;
	int st;

	t_assert_eq(write(h->cmd, &x, 1), 1);
	t_assert_eq(read(h->res, &st, sizeof(st)), sizeof(st));
	return st;
}

/*
 * One kvmmd whose bound is nproc: its default (bound NULL) or
 * --quarantine-per-uid bound.  nproc processes of UID_Q fill it.
 */
static void fill_and_refuse(const char *bound, int nproc)
{
	/* 256 processes' blocks: 1024 pages of 64K */
	const char *args[] = { "--socket-mode",
			       "0666",
			       "--gpu-mem",
			       "128M",
			       bound ? "--quarantine-per-uid" : NULL,
			       bound,
			       NULL };
	static struct hanger h[NPROC];
	/* one of them connects again, another exits */
	const int again = nproc / 2, gone = nproc / 4;
	struct kvmm_status_reply st;
	struct td_daemon d;
	char out[8192], want[96];

	td_start_nopidfd(&d, args);
	t_ok(chmod(d.dir, 0711)); /* the other uids reach the socket */

	for (int i = 0; i < nproc; i++)
		hang_up(d.sock, &h[i]);
	cc_wait_quarantined(&d, nproc * CC_PPB);

	cu_hello_as(d.sock, UID_Q, -ETOOMANYREFS);
	t_assert_eq(hello_again(&h[again]), 0);
	cu_hello_as(d.sock, UID_R, 0);
	t_assert_eq(cu_try_hello(d.sock), 0); /* root */
	cc_wait_quarantined(&d, nproc * CC_PPB);

	t_ok(td_status(&d, &st));
	t_assert_eq(st.size, sizeof(st));
	t_assert_eq(st.sessions_refused_quarantine, 1);
	t_assert_eq(st.sessions_refused_uid_limit, 0);
	/* the bound, said since ABI 1.20 (--quarantine-per-uid) */
	t_assert_eq(st.quarantine_per_uid, nproc);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 ", 1 over their uid's %d quarantined processes\n", nproc);
	if (!strstr(out, want))
		t_fail("kvmmctl status does not count the refusal:\n%s", out);
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), ",\"quarantine_per_uid\":%d,", nproc);
	if (!strstr(out, "\"no_memory\":0,\"quarantine\":1}") ||
	    !strstr(out, want))
		t_fail("kvmmctl status --json does not count it:\n%s", out);

	/* one exits: its record goes (polled), and there is room again */
	t_ok(kill(h[gone].pid, SIGKILL));
	t_assert_eq(waitpid(h[gone].pid, NULL, 0), h[gone].pid);
	cc_wait_quarantined(&d, (nproc - 1) * CC_PPB);
	cu_hello_as(d.sock, UID_Q, 0);

	for (int i = 0; i < nproc; i++) {
		if (i == gone)
			continue;
		t_ok(kill(h[i].pid, SIGKILL));
		t_assert_eq(waitpid(h[i].pid, NULL, 0), h[i].pid);
	}
	cc_wait_quarantined(&d, 0);
	cc_stop(&d);
	printf("%d quarantined processes of one uid (%s): the next refused\n",
	       nproc, bound ? "--quarantine-per-uid " NPROC_SET : "default");
}

int main(void)
{
	struct rlimit rl;

	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	setvbuf(stdout, NULL, _IONBF, 0);
	/* two pipes to each process */
	t_ok(getrlimit(RLIMIT_NOFILE, &rl));
	rl.rlim_cur = rl.rlim_max;
	t_ok(setrlimit(RLIMIT_NOFILE, &rl));
	fill_and_refuse(NULL, NPROC);
	fill_and_refuse(NPROC_SET, atoi(NPROC_SET));
	printf("ok\n");
	return 0;
}
