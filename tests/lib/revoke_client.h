/* SPDX-License-Identifier: MIT */
/*
 * A client process that has one sequence revoked by the admin while it
 * steps, and the parent that posts the revocation: the telemetry tests
 * count the client's extends and the daemon's revocation this way.
 */
#ifndef KVMM_TESTS_REVOKE_CLIENT_H
#define KVMM_TESTS_REVOKE_CLIENT_H

#include <poll.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"
#include "tests/lib/wait.h"

/* Where the client's sequence is, for the admin's revocation. */
struct rc_ids {
	uint32_t session, region, seq;
};

/*
 * Connect to sock with co (its socket_path set here) and create a region
 * of tr_small_region's shape into *c and *r; the session's id, which the
 * admin's revocations name.  The test fails on any error.
 */
static inline uint32_t rc_connect_small(const char *sock,
					struct kvmm_connect_opts *co,
					struct kvmm_conn **c,
					struct kvmm_region **r)
{
	struct kvmm_region_opts ro = tr_small_region;
	struct kvmm_stats ks = { .size = sizeof(ks) };

	co->socket_path = sock;
	t_ok(kvmm_connect(co, c));
	t_ok(kvmm_region_create(*c, &ro, r));
	t_ok(kvmm_get_stats(*c, &ks));
	return ks.session_id;
}

/*
 * Revoke sequence ids->seq of ids->region from first_block on, as the
 * admin on d's socket sock; fails the test if the daemon refuses.
 */
static inline void rc_admin_revoke(const char *sock, const struct rc_ids *ids,
				   uint32_t first_block)
{
	t_ok(ar_revoke(sock, ids->session, ids->region, ids->seq, first_block));
}

/*
 * In a step of c, the map-ahead thread's SEQ_EXTEND for seq reaches kvmmd
 * only after the admin (on sock) revoked seq from block 0: the test holds
 * c's socket lock while the engine's extend to new_len (through the ring)
 * kicks the thread and the revocation is posted, then waits until the
 * thread has mapped `backed` blocks, keeping the fresh pages of the
 * revoked ones aside.  The step stays open.
 */
static inline void rc_revoke_under_map_ahead(const char *sock,
					     struct kvmm_conn *c,
					     struct kvmm_region *r,
					     uint32_t seq, uint32_t new_len,
					     uint32_t backed)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	t_ok(kvmm_get_stats(c, &ks));
	t_ok(kvmm_step_begin(c));
	pthread_mutex_lock(&c->sock_lock); /* the thread waits for it */
	t_ok(kvmm_seq_extend(r, seq, new_len)); /* the ring; kicks it */
	t_ok(ar_revoke(sock, ks.session_id, r->id, seq, 0));
	pthread_mutex_unlock(&c->sock_lock);
	for (int tries = 0; tries < 5000 && pc_backed(r, seq) < backed; tries++)
		usleep(1000);
	t_assert_eq(pc_backed(r, seq), backed);
}

/*
 * Once the client's session has ended: kvmmd counts no session but the
 * status connection's, no page is mapped, revoking or quarantined, and
 * only the cached blocks' `cached` pages stay allocated.  st gets the
 * last status.
 */
static inline void rc_wait_only_cached(const struct td_daemon *d,
				       uint64_t cached,
				       struct kvmm_status_reply *st)
{
	t_ok(td_wait_sessions(d, 1, 5000, st));
	t_assert_eq(st->pages_mapped, 0);
	t_assert_eq(st->pages_revoking, 0);
	t_assert_eq(st->pages_quarantined, 0);
	t_assert_eq(st->pages_allocated, cached);
}

/*
 * The client's part once its sequence s of region r is set up: tell the
 * parent where it is (wr), step until the parent says stop (rd), which
 * acknowledges the revocation, and check that pages were revoked.
 * 0, or which of these failed (1..4); disconnects c on success.
 */
static inline int rc_client_steps(struct kvmm_conn *c, struct kvmm_region *r,
				  uint32_t s, int wr, int rd)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct rc_ids ids;

	if (kvmm_get_stats(c, &ks))
		return 1;
	ids = (struct rc_ids){ ks.session_id, r->id, s };
	if (write(wr, &ids, sizeof(ids)) != sizeof(ids))
		return 2;
	for (;;) {
		struct pollfd p = { .fd = rd, .events = POLLIN };

		if (poll(&p, 1, 5) > 0)
			break;
		if (kvmm_step_begin(c) || kvmm_step_end(c))
			return 3;
	}
	if (kvmm_get_stats(c, &ks) || ks.pages_revoked == 0)
		return 4;
	kvmm_disconnect(c);
	return 0;
}

/*
 * Fork client(arg, wr, rd) (its return value is its exit status), revoke
 * its sequence from block 1 on through an admin connection to d once it
 * says where it is, let it step until kvmmd counts its acknowledgement,
 * tell it to stop,
 * and fail (with d's log) unless it exits 0.
 */
static inline void rc_run_client(struct td_daemon *d,
				 int (*client)(void *arg, int wr, int rd),
				 void *arg)
{
	int to_parent[2], to_child[2], ws;
	struct kvmm_status_reply st;
	struct rc_ids ids;
	uint64_t acked;
	pid_t pid;

	t_assert(pipe(to_parent) == 0 && pipe(to_child) == 0);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		_exit(client(arg, to_parent[1], to_child[0]));
	/* the child's ends: a client that dies early is an EOF, not a hang */
	close(to_parent[1]);
	close(to_child[0]);
	t_assert_eq(read(to_parent[0], &ids, sizeof(ids)), sizeof(ids));
	t_ok(td_status(d, &st));
	acked = st.revocations_acked;
	rc_admin_revoke(d->sock, &ids, 1);
	/* the client steps every 5 ms and acknowledges: kvmmd counts it,
	 * where a 200 ms sleep guessed how long that takes */
	t_wait_until(
		20000, t_ok(td_status(d, &st)), st.revocations_acked > acked,
		"the client never acknowledged the revocation (%llu posted, %llu acked, %llu timed out)",
		(unsigned long long)st.revocations_posted,
		(unsigned long long)st.revocations_acked,
		(unsigned long long)st.revocations_timed_out);
	t_assert_eq(write(to_child[1], "x", 1), 1);
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	if (WEXITSTATUS(ws)) {
		td_dump_log(d);
		t_fail("client exited with %d", WEXITSTATUS(ws));
	}
	close(to_parent[0]);
	close(to_child[1]);
}

#endif
