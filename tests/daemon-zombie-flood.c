// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * Quarantined processes cannot exhaust kvmmd's fds, and a page counts
 * once in pages.quarantined however many of them hold it.  kvmmd runs
 * with RLIMIT_NOFILE 256 (lowered once it started); a root client
 * publishes one block (4 pages).  Then:
 *   - one live process of uid 4321 (quota 256K) connects, prefix-opens
 *     the cached block and hangs up without BYE, 400 times: every HELLO
 *     and open still works (each session used to stay quarantined with
 *     its own pidfd: HELLO failed with -EMFILE after about 230 rounds, for
 *     every client), kvmmd holds one fd more than before, 4 pages are
 *     quarantined (not 4 per session), and ADMIN_SESSIONS (kvmmctl
 *     sessions) shows the process once, flagged quarantined, holding 4
 *     pages; a root client
 *     still connects.  When the process exits, nothing is quarantined.
 *   - 80 live processes of that uid do the same once each, one after
 *     the other (start_flooders()): kvmmd waits
 *     on a pidfd for 64 of them (KD_ZOMBIE_PIDFDS_PER_UID) and polls the
 *     rest, 4 pages are quarantined, 80 entries listed; once they exit,
 *     nothing is quarantined and kvmmd's fds are back where they were.
 *   - 80 more do it again, and kvmmd stops cleanly while they live.
 * Needs root (the clients become uid 4321).
 */
#include <dirent.h>
#include <poll.h>
#include <sys/resource.h>

#include "tests/cache-uids.h"
#include "tests/lib/wait.h"

#define FLOOD_UID 4321
#define NOFILE 256
#define ROUNDS 400
#define PROCS 80
#define PIDFDS_PER_UID 64 /* KD_ZOMBIE_PIDFDS_PER_UID */

static const uint64_t hash = 0x5500001;

static int nr_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (!dir)
		t_fail("%s: %s", path, strerror(errno));
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/* Wait until kvmmd holds want fds (a status connection of ours may
 * still be open for a moment). */
static void wait_fds(pid_t pid, int want)
{
	int n;

	t_wait_until(20000, n = nr_fds(pid), n == want,
		     "kvmmd holds %d fds, expected %d", n, want);
}

/*
 * The fds kvmmd holds with no session.  Asked on a connection of ours
 * that stays open, the status counts 1 session once every other one
 * ended, and a session's end closes all its fds in that same turn of the
 * loop (kd_session_end()): kvmmd then holds the idle fds and our
 * session's.  A second session of ours adds as many again (its socket,
 * its pidfd, whatever else a session holds), counted from its HELLO's
 * reply on.  Measured so, not read after a sleep that the close of the
 * last status connection could outlast on a loaded machine.
 */
static int idle_fds(const struct td_daemon *d)
{
	struct kvmm_status_reply st;
	int one, two;
	struct cc q, q2;

	cc_connect(&q, d->sock);
	t_wait_until(20000,
		     t_ok(cc_call(&q, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
				  sizeof(st), NULL, NULL)),
		     st.sessions == 1, "kvmmd still counts %llu sessions",
		     (unsigned long long)st.sessions);
	one = nr_fds(d->pid);
	cc_connect(&q2, d->sock);
	two = nr_fds(d->pid);
	cc_disconnect(&q2);
	cc_disconnect(&q);
	t_assert(two > one && one - (two - one) > 0);
	return one - (two - one);
}

/* One session: HELLO, the cached block opened, a hang-up without BYE (its
 * pages stay mapped here).  0, or HELLO's answer. */
static int round_trip(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct kvmm_hello hello = { .size = sizeof(hello),
				    .abi_major = KVMM_ABI_MAJOR };
	struct kvmm_prefix_open_reply pr;
	struct kvmm_hello_reply hr;
	static uint32_t ids[CC_MAX_PAGES];
	static struct cc c;
	unsigned int n = 0;
	int r;

	memset(&c, 0, sizeof(c));
	c.sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	t_assert(c.sock >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	t_ok(connect(c.sock, (struct sockaddr *)&sa, sizeof(sa)));
	r = cc_call(&c, KVMM_CMD_HELLO, &hello, sizeof(hello), &hr, sizeof(hr),
		    c.ring_fds, &n);
	if (r) {
		close(c.sock);
		return r;
	}
	cc_region(&c);
	cc_prefix(&c, &hash, 1, &pr, ids);
	t_assert_eq(pr.nr_blocks, 1);
	close(c.sock);
	for (unsigned int k = 0; k < n; k++)
		close(c.ring_fds[k]);
	return 0;
}

/* A child of uid 4321 that runs rounds round trips, says so on ready[1]
 * and lives on until go[1] is closed. */
static pid_t flooder(const char *sock, int rounds, const int *ready,
		     const int *go)
{
	pid_t p = fork();
	char b = 0;

	t_assert(p >= 0);
	if (p)
		return p;
	close(ready[0]);
	close(go[1]);
	cu_become(FLOOD_UID, FLOOD_UID);
	for (int i = 0; i < rounds; i++) {
		int r = round_trip(sock);

		if (r)
			t_fail("round %d of %d: HELLO answered %d (%s)", i,
			       rounds, r, strerror(-r));
	}
	t_assert_eq(write(ready[1], &b, 1), 1);
	t_assert_eq(read(go[0], &b, 1), 0); /* EOF: the parent says go */
	_exit(0);
}

/* ADMIN_SESSIONS: the quarantined entries, each checked against pids
 * (every one listed once, holding 4 pages, of uid 4321). */
static void check_listed(const char *sock, const pid_t *pids, int n)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_sessions_reply *rep = (void *)buf;
	int found = 0;
	struct cc c;

	cc_connect(&c, sock);
	t_ok(cc_call(&c, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf, sizeof(buf),
		     NULL, NULL));
	cc_disconnect(&c);
	t_assert_eq(rep->total, rep->nr);
	for (uint32_t i = 0; i < rep->nr; i++) {
		const struct kvmm_session_info *s = &rep->sessions[i];
		int k = 0;

		if (!(s->flags & KVMM_SESSION_F_QUARANTINED))
			continue;
		while (k < n && pids[k] != (pid_t)s->pid)
			k++;
		if (k == n)
			t_fail("pid %u listed quarantined", s->pid);
		t_assert_eq(s->uid, FLOOD_UID);
		t_assert_eq(s->pages_held, CC_PPB);
		t_assert_eq(s->sequences, 0);
		found++;
	}
	t_assert_eq(found, n);
}

/* A root client connects (HELLO) while the flooders' zombies wait. */
static void bystander(const char *sock)
{
	struct cc c;

	cc_connect(&c, sock); /* was -EMFILE */
	cc_disconnect(&c);
}

/*
 * PROCS flooders of one round each, one after the other: each has hung
 * up (its session quarantined) before the next connects.  Started all at
 * once, up to 80 live sessions' fds at a time met kvmmd's 256 and HELLO
 * failed with -EMFILE now and then, which is not what this measures; and
 * a flooder that failed left the others' ends of ready open, so the wait
 * for the rest hung until the test's timeout.  A flooder that has not
 * reported in 10 s fails the test.
 */
static void start_flooders(const char *sock, pid_t *pids, int *ready, int *go)
{
	struct pollfd pfd = { .fd = ready[0], .events = POLLIN };
	char b;

	for (int i = 0; i < PROCS; i++) {
		pids[i] = flooder(sock, 1, ready, go);
		if (poll(&pfd, 1, 10000) != 1 || read(ready[0], &b, 1) != 1)
			t_fail("flooder %d of %d did not report", i, PROCS);
	}
	close(ready[1]);
	close(go[0]);
}

static void wait_children(const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		t_assert_eq(cc_wait_child(pids[i]), 0);
}

int main(void)
{
	char quota[64];
	const char *args[] = { "--quota", quota, "--gpu-mem", "8M", NULL };
	struct rlimit rl = { NOFILE, NOFILE };
	static uint32_t ids[CC_MAX_PAGES];
	struct kvmm_block_publish_reply rep;
	static pid_t pids[PROCS];
	int ready[2], go[2], base;
	struct td_daemon d;
	struct cc c;
	uint32_t seq;
	char b;

	if (geteuid())
		t_skip("needs root (clients of another uid)");
	setvbuf(stdout, NULL, _IONBF, 0);
	snprintf(quota, sizeof(quota), "%d=256K", FLOOD_UID);
	cc_start(&d, args);
	t_ok(chmod(d.dir, 0777));
	t_ok(chmod(d.sock, 0777));
	t_ok(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL));

	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, CC_TPB, ids);
	cc_fill(&c, ids, 1, 3);
	t_ok(cc_publish(&c, seq, 0, &hash, 1, &rep));
	t_assert_eq(rep.published, 1);
	cc_seq_close(&c, seq, ids, CC_PPB);
	cc_disconnect(&c);
	base = idle_fds(&d);
	wait_fds(d.pid, base);

	/* one process, ROUNDS hang-ups */
	t_ok(pipe(ready));
	t_ok(pipe(go));
	pids[0] = flooder(d.sock, ROUNDS, ready, go);
	close(ready[1]); /* a flooder that fails: EOF */
	close(go[0]);
	if (read(ready[0], &b, 1) != 1) {
		t_assert_eq(cc_wait_child(pids[0]), 0);
		t_fail("the flooder ended early");
	}
	cc_wait_quarantined(&d, CC_PPB); /* was 4 per session */
	wait_fds(d.pid, base + 1); /* its pidfd */
	printf("one process, %d hang-ups: kvmmd fds %d (were %d)\n", ROUNDS,
	       base + 1, base);
	check_listed(d.sock, pids, 1);
	{
		char out[4096];

		t_assert_eq(td_kvmmctl(d.sock, "sessions", out, sizeof(out)),
			    0);
		printf("%s", out);
		t_assert_eq(t_count(out, " quarantined\n"), 1);
	}
	bystander(d.sock);
	close(go[1]);
	wait_children(pids, 1);
	cc_wait_quarantined(&d, 0);
	wait_fds(d.pid, base);
	close(ready[0]);

	/* PROCS processes, one hang-up each */
	t_ok(pipe(ready));
	t_ok(pipe(go));
	start_flooders(d.sock, pids, ready, go);
	cc_wait_quarantined(&d, CC_PPB); /* was 4 per process */
	wait_fds(d.pid, base + PIDFDS_PER_UID);
	printf("%d processes, one hang-up each: kvmmd fds %d (were %d)\n",
	       PROCS, base + PIDFDS_PER_UID, base);
	check_listed(d.sock, pids, PROCS);
	bystander(d.sock);
	close(go[1]);
	wait_children(pids, PROCS);
	cc_wait_quarantined(&d, 0); /* the polled ones too */
	wait_fds(d.pid, base);
	close(ready[0]);

	/* kvmmd stops cleanly with both kinds quarantined (ASan: no leak) */
	t_ok(pipe(ready));
	t_ok(pipe(go));
	start_flooders(d.sock, pids, ready, go);
	cc_wait_quarantined(&d, CC_PPB);
	cc_stop(&d);
	close(go[1]);
	wait_children(pids, PROCS);
	printf("ok\n");
	return 0;
}
