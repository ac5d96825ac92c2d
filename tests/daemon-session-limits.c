// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * One uid cannot take every session slot.  A process of an unprivileged
 * uid opens connections and sends nothing (no HELLO):
 *   - under --max-sessions-per-uid 8 kvmmd keeps 8 of its 20, refuses
 *     the rest at accept, and answers a 9th's HELLO with -EUSERS;
 *     another uid and the admin still get in;
 *   - under --hello-timeout 1500 the 8 are closed once 1.5 s pass, while
 *     the process lives, and the uid connects again; a session that
 *     sent HELLO is not closed by the timeout;
 *   - with no per-uid limit, 1100 connections take 1008 sessions, the
 *     last 16 of the 1024 are kept for admin uids: kvmmctl status works
 *     and another unprivileged uid's HELLO is answered -EBUSY;
 *   - under --max-sessions 24 the same with 30 connections: 8 sessions
 *     (the last 16 kept for admin uids), -EBUSY for another uid, kvmmctl
 *     still in; the fd budget logged at start counts 24 sessions.
 * Before these limits the flood of 1100 took all 1024 sessions, kvmmctl
 * status failed (connection reset) until the flooder died, and idle
 * connections were never closed.  Each refusal and HELLO timeout is
 * counted by why, in ADMIN_STATUS, kvmmctl status (text and --json) and
 * kvmmctl metrics: 13 over the uid's limit and 8 timeouts, then 93 kept
 * out of the admins' sessions (these counts were kept but shown nowhere).
 * Needs root (processes of other uids).
 */
#include <errno.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include "tests/cache-uids.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define UID_F 62301 /* the flooder */
#define UID_G 62302 /* someone else */
#define PER_UID 8
#define HELLO_MS 1500

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* kvmmd's live sessions (the status connection's own included). */
static uint64_t sessions(const struct td_daemon *d)
{
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	return st.sessions;
}

/* Wait (up to ms) until kvmmd has n sessions, then check that it stays
 * there for 300 ms (connections still coming in would show). */
static void wait_sessions(const struct td_daemon *d, uint64_t n, int ms)
{
	uint64_t end = now_ms() + ms, got;

	while (sessions(d) != n && now_ms() < end)
		usleep(5000);
	usleep(300000);
	got = sessions(d);
	if (got != n)
		t_fail("kvmmd has %llu sessions, expected %llu",
		       (unsigned long long)got, (unsigned long long)n);
}

/* The refusal and HELLO-timeout counts of ADMIN_STATUS and the bounds
 * kvmmd was given (ABI 1.19), and kvmmctl status (text, --json) and
 * metrics showing the same. */
static void check_counts(const struct td_daemon *d, uint64_t uid_limit,
			 uint64_t admin_reserved, uint64_t hello_timeouts,
			 uint64_t max_sessions, uint64_t per_uid)
{
	static char out[65536]; /* all of kvmmctl metrics */
	struct kvmm_status_reply st;
	char want[320], bound[32] = "";

	t_ok(td_status(d, &st));
	t_assert_eq(st.size, sizeof(st));
	t_assert_eq(st.sessions_refused_uid_limit, uid_limit);
	t_assert_eq(st.sessions_refused_admin_reserved, admin_reserved);
	t_assert_eq(st.sessions_refused_full, 0);
	t_assert_eq(st.sessions_refused_no_memory, 0);
	t_assert_eq(st.sessions_hello_timeouts, hello_timeouts);
	t_assert_eq(st.max_sessions, max_sessions);
	t_assert_eq(st.max_sessions_per_uid, per_uid);

	t_assert_eq(td_kvmmctl(d->sock, "status", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "%llu refused at accept, %llu closed for no HELLO in time\n",
		 (unsigned long long)(uid_limit + admin_reserved),
		 (unsigned long long)hello_timeouts);
	if (!strstr(out, want))
		t_fail("kvmmctl status lacks \"%s\":\n%s", want, out);
	/* the per-uid bound is named only when there is one */
	if (per_uid)
		snprintf(bound, sizeof(bound), " (%llu)",
			 (unsigned long long)per_uid);
	snprintf(
		want, sizeof(want),
		"refused      %llu over their uid's --max-sessions-per-uid%s, %llu kept out of the admin uids' sessions, 0 at kvmmd's most (--max-sessions %llu), 0 for want of memory, 0 over their uid's 256 quarantined processes\n",
		(unsigned long long)uid_limit, bound,
		(unsigned long long)admin_reserved,
		(unsigned long long)max_sessions);
	if (!strstr(out, want))
		t_fail("kvmmctl status lacks \"%s\":\n%s", want, out);

	t_assert_eq(td_kvmmctl(d->sock, "status --json", out, sizeof(out)), 0);
	snprintf(
		want, sizeof(want),
		"\"sessions_refused\":{\"uid_limit\":%llu,\"admin_reserved\":%llu,\"full\":0,\"no_memory\":0,\"quarantine\":0},\"sessions_hello_timeouts\":%llu,\"max_sessions\":%llu,\"max_sessions_per_uid\":%llu",
		(unsigned long long)uid_limit,
		(unsigned long long)admin_reserved,
		(unsigned long long)hello_timeouts,
		(unsigned long long)max_sessions, (unsigned long long)per_uid);
	if (!strstr(out, want))
		t_fail("status --json lacks %s:\n%s", want, out);

	t_assert_eq(td_kvmmctl(d->sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "\nkvmm_sessions_refused_total{reason=\"uid_limit\"} %llu\n"
		 "kvmm_sessions_refused_total{reason=\"admin_reserved\"} %llu\n"
		 "kvmm_sessions_refused_total{reason=\"full\"} 0\n"
		 "kvmm_sessions_refused_total{reason=\"no_memory\"} 0\n"
		 "kvmm_sessions_refused_total{reason=\"quarantine\"} 0\n",
		 (unsigned long long)uid_limit,
		 (unsigned long long)admin_reserved);
	if (!strstr(out, want))
		t_fail("kvmmctl metrics lacks %s", want);
	snprintf(want, sizeof(want),
		 "\nkvmm_max_sessions %llu\n"
		 "# HELP kvmm_max_sessions_per_uid ",
		 (unsigned long long)max_sessions);
	if (!strstr(out, want))
		t_fail("kvmmctl metrics lacks %s", want);
	snprintf(want, sizeof(want), "\nkvmm_max_sessions_per_uid %llu\n",
		 (unsigned long long)per_uid);
	if (!strstr(out, want))
		t_fail("kvmmctl metrics lacks %s", want);
	snprintf(want, sizeof(want),
		 "\nkvmm_sessions_hello_timeouts_total %llu\n",
		 (unsigned long long)hello_timeouts);
	if (!strstr(out, want))
		t_fail("kvmmctl metrics lacks %s", want);
}

/*
 * A process of UID_F opens n connections and sends nothing; it says how
 * many connected on *ready and lives until killed.
 */
static pid_t flood(const char *sock, int n)
{
	int ready[2];
	pid_t p;
	int got;

	t_ok(pipe(ready));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct rlimit rl = { 4096, 4096 };
		int i;

		t_ok(setrlimit(RLIMIT_NOFILE, &rl));
		cu_become(UID_F, UID_F);
		/* after the uid change, which clears it: a failing test
		 * leaves no flooder behind */
		t_ok(prctl(PR_SET_PDEATHSIG, SIGKILL));
		for (i = 0; i < n; i++)
			if (cu_raw_connect(sock) < 0)
				break;
		t_assert_eq(write(ready[1], &i, sizeof(i)), sizeof(i));
		pause();
		_exit(0);
	}
	close(ready[1]);
	t_assert_eq(read(ready[0], &got, sizeof(got)), sizeof(got));
	close(ready[0]);
	t_assert_eq(got, n); /* connect() does not wait for accept */
	return p;
}

static void stop_flood(pid_t p)
{
	t_ok(kill(p, SIGKILL));
	t_assert(cc_wait_child(p) != 0);
}

/* Per-uid limit and HELLO deadline. */
static void per_uid(void)
{
	const char *args[] = { "--socket-mode",
			       "0666",
			       "--gpu-mem",
			       "8M",
			       "--max-sessions-per-uid",
			       "8",
			       "--hello-timeout",
			       "1500",
			       NULL };
	struct kvmm_conn *admin;
	struct td_daemon d;
	struct cc c;
	char out[4096];
	uint64_t t0;
	pid_t p;

	cu_start(&d, args);
	t0 = now_ms();
	p = flood(d.sock, 20);
	wait_sessions(&d, PER_UID + 1, 1000);
	cu_hello_as(d.sock, UID_F, -EUSERS);
	cu_hello_as(d.sock, UID_G, 0);
	t_ok(kc_connect_admin(d.sock, &admin));
	kvmm_disconnect(admin);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	/* a session that sent HELLO outlives the deadline */
	cc_connect(&c, d.sock);
	t_assert(now_ms() - t0 < HELLO_MS); /* the checks above were quick */

	/* the deadline closes the flooder's 8 while it lives */
	wait_sessions(&d, 2, 3 * HELLO_MS);
	printf("flooder's 8 closed after %llu ms (--hello-timeout %d)\n",
	       (unsigned long long)(now_ms() - t0), HELLO_MS);
	t_assert(now_ms() - t0 >= HELLO_MS);
	t_assert_eq(kill(p, 0), 0);
	cu_hello_as(d.sock, UID_F, 0);
	t_ok(cc_call(&c, KVMM_CMD_NOP, NULL, 0, NULL, 0, NULL, NULL));
	close(c.sock);
	stop_flood(p);
	/* 12 of the flood and the 9th HELLO over the limit; the 8 idle */
	check_counts(&d, 20 - PER_UID + 1, 0, PER_UID, 1024, PER_UID);
	cc_stop(&d);
}

/* Admin slots: a flood with no per-uid limit leaves room for kvmmctl. */
static void admin_reserve(void)
{
	/* no HELLO timeout while the 1100 connect: the counts stay known */
	const char *args[] = { "--socket-mode",
			       "0666",
			       "--gpu-mem",
			       "8M",
			       "--max-sessions-per-uid",
			       "0",
			       "--hello-timeout",
			       "600000",
			       NULL };
	struct kvmm_conn *admin;
	struct td_daemon d;
	char out[4096];
	pid_t p;

	cu_start(&d, args);
	p = flood(d.sock, 1100);
	/* 1024 - 16 of the flooder's, and the status connection */
	wait_sessions(&d, 1024 - 16 + 1, 10000);
	cu_hello_as(d.sock, UID_G, -EBUSY);
	t_ok(kc_connect_admin(d.sock, &admin));
	kvmm_disconnect(admin);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	t_assert(strstr(out, "sessions") != NULL);
	/* the flood's 92 past 1008 and UID_G's; the status checks connect
	 * as root, which the reserve lets in */
	check_counts(&d, 0, 1100 - (1024 - 16) + 1, 0, 1024, 0);
	stop_flood(p);
	cc_stop(&d);
}

/* --max-sessions: fewer sessions in all, the admins' 16 still kept. */
static void max_sessions(void)
{
	const char *args[] = { "--socket-mode",
			       "0666",
			       "--gpu-mem",
			       "8M",
			       "--max-sessions-per-uid",
			       "0",
			       "--max-sessions",
			       "24",
			       "--hello-timeout",
			       "600000",
			       NULL };
	static char log[1 << 16];
	struct kvmm_conn *admin;
	struct td_daemon d;
	pid_t p;

	cu_start(&d, args);
	t_assert(td_read_log(&d, log, sizeof(log)) > 0);
	if (!strstr(log, " fds each, 24 sessions)"))
		t_fail("kvmmd's fd budget does not count 24 sessions:\n%s",
		       log);
	p = flood(d.sock, 30);
	/* 24 - 16 of the flooder's, and the status connection */
	wait_sessions(&d, 24 - 16 + 1, 5000);
	cu_hello_as(d.sock, UID_G, -EBUSY);
	t_ok(kc_connect_admin(d.sock, &admin));
	kvmm_disconnect(admin);
	check_counts(&d, 0, 30 - (24 - 16) + 1, 0, 24, 0);
	stop_flood(p);
	cc_stop(&d);
	printf("--max-sessions 24: 8 sessions for the flood of 30, admins still in\n");
}

int main(void)
{
	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	setvbuf(stdout, NULL, _IONBF, 0);
	per_uid();
	admin_reserve();
	max_sessions();
	printf("ok\n");
	return 0;
}
