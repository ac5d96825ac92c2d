// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * A uid's quarantine records are bounded.  kvmmd runs without pidfds
 * (tests/shims/nopidfd.so), so every record is polled.  256 processes of
 * one unprivileged uid each map a block and hang up without BYE while
 * they live on: 64 records.  Then
 *   - a 257th process of that uid is refused: its HELLO is answered
 *     -ETOOMANYREFS, counted in ADMIN_STATUS (sessions_refused_quarantine)
 *     and shown by kvmmctl status;
 *   - one of the 256 still connects (its sessions add to its own record);
 *   - another uid, and root, still connect;
 *   - once one of the 256 exits, the 257th gets its session.
 * The quarantine's safety is unchanged: all 256 processes' pages stay
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
#define NPROC 256 /* KD_ZOMBIES_PER_UID */

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

int main(void)
{
	/* 256 processes' blocks: 1024 pages of 64K */
	const char *args[] = { "--socket-mode", "0666", "--gpu-mem", "128M",
			       NULL };
	struct rlimit rl;
	static struct hanger h[NPROC];
	struct kvmm_status_reply st;
	struct td_daemon d;
	char out[8192];

	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	setvbuf(stdout, NULL, _IONBF, 0);
	/* two pipes to each process */
	t_ok(getrlimit(RLIMIT_NOFILE, &rl));
	rl.rlim_cur = rl.rlim_max;
	t_ok(setrlimit(RLIMIT_NOFILE, &rl));
	td_start_nopidfd(&d, args);
	t_ok(chmod(d.dir, 0711)); /* the other uids reach the socket */

	for (int i = 0; i < NPROC; i++)
		hang_up(d.sock, &h[i]);
	cc_wait_quarantined(&d, NPROC * CC_PPB);

	cu_hello_as(d.sock, UID_Q, -ETOOMANYREFS);
	t_assert_eq(hello_again(&h[17]), 0);
	cu_hello_as(d.sock, UID_R, 0);
	t_assert_eq(cu_try_hello(d.sock), 0); /* root */
	cc_wait_quarantined(&d, NPROC * CC_PPB);

	t_ok(td_status(&d, &st));
	t_assert_eq(st.size, sizeof(st));
	t_assert_eq(st.sessions_refused_quarantine, 1);
	t_assert_eq(st.sessions_refused_uid_limit, 0);
	/* the bound, said since ABI 1.20 (KD_ZOMBIES_PER_UID) */
	t_assert_eq(st.quarantine_per_uid, 256);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (!strstr(out, ", 1 over their uid's 256 quarantined processes\n"))
		t_fail("kvmmctl status does not count the refusal:\n%s", out);
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	if (!strstr(out, "\"no_memory\":0,\"quarantine\":1}") ||
	    !strstr(out, ",\"quarantine_per_uid\":256"))
		t_fail("kvmmctl status --json does not count it:\n%s", out);

	/* one exits: its record goes (polled), and there is room again */
	t_ok(kill(h[3].pid, SIGKILL));
	t_assert_eq(waitpid(h[3].pid, NULL, 0), h[3].pid);
	cc_wait_quarantined(&d, (NPROC - 1) * CC_PPB);
	cu_hello_as(d.sock, UID_Q, 0);

	for (int i = 0; i < NPROC; i++) {
		if (i == 3)
			continue;
		t_ok(kill(h[i].pid, SIGKILL));
		t_assert_eq(waitpid(h[i].pid, NULL, 0), h[i].pid);
	}
	cc_wait_quarantined(&d, 0);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
