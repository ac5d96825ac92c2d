// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Revocations a session ends with count as cancelled (ADMIN_STATUS
 * revocations_cancelled, ABI 1.13), so that posted = acked + timed_out +
 * cancelled + pending.  Before, they stayed in posted for good.
 *
 * Two silent clients (they never step nor acknowledge), each with two
 * revocations posted by the admin (blocks 2.., then 1..):
 *   - one is killed: both revocations are cancelled (2), none timed out;
 *   - the other outlives --revoke-timeout: the oldest revocation times
 *     out and cuts the session off, the other is cancelled with it
 *     (timed_out 1, cancelled 3); killing the process afterwards changes
 *     nothing.
 * `kvmmctl status` (text and --json) and `kvmmctl metrics` show the
 * counts.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/revoke_client.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

/* A client with one sequence of 3 blocks that tells the parent where it
 * is, then waits to be killed without stepping. */
static int silent(int wr)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "silent",
					.map_ahead_set = 1 };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct rc_ids ids;
	uint32_t s;

	if (kvmm_connect(&co, &c) ||
	    kvmm_region_create(c, &tr_small_region, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, 3 * TR_TPB) ||
	    kvmm_get_stats(c, &ks))
		return 1;
	ids = (struct rc_ids){ ks.session_id, r->id, s };
	if (write(wr, &ids, sizeof(ids)) != sizeof(ids))
		return 2;
	for (;;)
		pause();
}

/* A silent client with two revocations posted to it (blocks 2.., then
 * 1..); its pid. */
static pid_t silent_revoked(struct td_daemon *d)
{
	struct rc_ids ids;
	int up[2];
	pid_t p;

	t_ok(pipe(up));
	p = fork();
	t_assert(p >= 0);
	if (p == 0)
		_exit(silent(up[1]));
	close(up[1]);
	t_assert_eq(read(up[0], &ids, sizeof(ids)), sizeof(ids));
	close(up[0]);
	rc_admin_revoke(d->sock, &ids, 2);
	rc_admin_revoke(d->sock, &ids, 1);
	return p;
}

static void reap(pid_t p)
{
	int ws;

	kill(p, SIGKILL);
	t_assert_eq(waitpid(p, &ws, 0), p);
}

static void expect(const struct kvmm_status_reply *st, uint64_t posted,
		   uint64_t timed_out, uint64_t cancelled)
{
	printf("revocations: %llu posted, %llu acked, %llu timed out, %llu cancelled\n",
	       (unsigned long long)st->revocations_posted,
	       (unsigned long long)st->revocations_acked,
	       (unsigned long long)st->revocations_timed_out,
	       (unsigned long long)st->revocations_cancelled);
	t_assert_eq(st->size, sizeof(*st));
	t_assert_eq(st->revocations_posted, posted);
	t_assert_eq(st->revocations_acked, 0);
	t_assert_eq(st->revocations_timed_out, timed_out);
	t_assert_eq(st->revocations_cancelled, cancelled);
	/* nothing pending: every posted one is accounted for */
	t_assert_eq(st->revocations_posted, st->revocations_acked +
						    st->revocations_timed_out +
						    st->revocations_cancelled);
}

int main(void)
{
	const char *args[] = { "--revoke-timeout", "3000", NULL };
	struct kvmm_status_reply st;
	struct td_daemon d;
	char out[65536];
	pid_t p;
	int i;

	t_ok(td_start(&d, args));

	/* killed with two revocations pending */
	p = silent_revoked(&d);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.revocations_posted, 2);
	t_assert_eq(st.revocations_cancelled, 0);
	reap(p);
	if (td_wait_idle(&d, 5000, &st)) {
		td_dump_log(&d);
		t_fail("not idle after the first client died");
	}
	expect(&st, 2, 0, 2);
	t_assert_eq(st.sessions_cut_off, 0);

	/* cut off by the timeout of the first, the second cancelled */
	p = silent_revoked(&d);
	for (i = 0; i < 2000; i++) {
		t_ok(td_status(&d, &st));
		if (st.sessions_cut_off)
			break;
		usleep(10000);
	}
	t_assert_eq(st.sessions_cut_off, 1);
	expect(&st, 4, 1, 3);
	reap(p);
	if (td_wait_idle(&d, 5000, &st)) {
		td_dump_log(&d);
		t_fail("not idle after the second client died");
	}
	expect(&st, 4, 1, 3);

	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	t_assert(strstr(out,
			"revocations  4 posted, 0 acked, 1 timed out, "
			"3 cancelled with their session (timeout 3000 ms)\n"));
	t_assert_eq(td_kvmmctl(d.sock, "--json status", out, sizeof(out)), 0);
	t_assert(strstr(out, "\"revocations\":{\"posted\":4,\"acked\":0,"
			     "\"timed_out\":1,\"cancelled\":3},"));
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	t_assert(strstr(out, "\nkvmm_revocations_cancelled_total 3\n"));

	t_assert_eq(td_stop(&d), 0);
	printf("revocations a session ended with are cancelled\n");
	return 0;
}
