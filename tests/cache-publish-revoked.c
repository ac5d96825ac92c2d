// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A publish of blocks a revocation took (ABI 1.20) against a real kvmmd,
 * from a libkvmm client process whose sequence of 4 blocks an admin
 * revokes from block 2 (ADMIN_REVOKE) before the client applies it:
 *
 *   - a client of ABI 1.20 is answered -ESTALE for a publish that names
 *     block 2 or 3 (alone, or with blocks it still has), where a block
 *     that never had pages (5) is -EINVAL, and a hash 0 or a hash other
 *     than the block's is -EINVAL whatever else the request names;
 *     SEQ_WAIT_READY over them is -ESTALE where it was -ERANGE; blocks 0
 *     and 1 publish as ever;
 *   - the same after the client applied the revocation, until it
 *     extends the sequence over those blocks again: then they publish,
 *     and block 5 is -EINVAL;
 *   - a client whose HELLO says 1.19 (KVMM_TEST_HELLO_MINOR=19, a libkvmm
 *     test knob) gets -EINVAL and -ERANGE, as before 1.20.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/client_seq.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define PPB 4 /* 2 layers, K and V */

static int poll_ready(struct kvmm_region *r, uint32_t seq, uint32_t upto)
{
	uint32_t pending = 99;

	return kvmm_seq_wait_ready(r, seq, upto, KVMM_WAIT_READY_POLL, NULL, 0,
				   &pending);
}

/* The client process: its HELLO says 1.19 when old. */
static void client(const char *sock, bool old, uint64_t base)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "publish-revoked",
					.map_ahead_set = 1 }; /* no map-ahead */
	struct kvmm_stats ks = { .size = sizeof(ks) };
	const int stale = old ? -EINVAL : -ESTALE;
	const int gone = old ? -ERANGE : -ESTALE;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint64_t h[6], bad[4];
	uint32_t seq;

	if (old)
		t_ok(setenv("KVMM_TEST_HELLO_MINOR", "19", 1));
	for (int i = 0; i < 6; i++)
		h[i] = base + (uint64_t)i;
	co.socket_path = sock;
	cs_open(&co, &tr_small_region, &c, &r, &seq);
	/* the older of kvmmd's and the one announced: the library plays a
	 * client of 1.19 too */
	t_assert_eq(c->hello.abi_minor, old ? 19 : KVMM_ABI_MINOR);
	t_ok(kvmm_seq_extend(r, seq, 4 * TR_TPB));
	t_ok(kvmm_get_stats(c, &ks));
	t_ok(ar_revoke(sock, ks.session_id, r->id, seq, 2));

	/* not applied yet: to the engine the sequence has 4 blocks */
	t_assert_eq(kvmm_block_publish(r, seq, 0, 4, 0, h), stale);
	t_assert_eq(kvmm_block_publish(r, seq, 2, 1, h[1], &h[2]), stale);
	t_assert_eq(kvmm_block_publish(r, seq, 3, 1, h[2], &h[3]), stale);
	t_assert_eq(kvmm_block_publish(r, seq, 5, 1, h[4], &h[5]), -EINVAL);
	/* a malformed request says so, whatever it names */
	memcpy(bad, h, sizeof(bad));
	bad[3] = 0;
	t_assert_eq(kvmm_block_publish(r, seq, 0, 4, 0, bad), -EINVAL);
	t_assert_eq(poll_ready(r, seq, 4), gone);
	t_assert_eq(poll_ready(r, seq, 2), 0);
	/* what is left publishes */
	t_assert_eq(kvmm_block_publish(r, seq, 0, 2, 0, h), 2);
	memcpy(bad, h, sizeof(bad));
	bad[1] = base + 100; /* block 1 has h[1] now */
	t_assert_eq(kvmm_block_publish(r, seq, 0, 4, 0, bad), -EINVAL);

	/* applied: the same until the sequence grows over them again */
	t_assert(kvmm_process_revocations(c) >= 2 * PPB);
	t_assert_eq(kvmm_seq_len(r, seq), 2 * TR_TPB);
	t_assert_eq(kvmm_block_publish(r, seq, 2, 1, h[1], &h[2]), stale);
	t_ok(kvmm_seq_extend(r, seq, 4 * TR_TPB));
	t_assert_eq(kvmm_block_publish(r, seq, 2, 2, h[1], &h[2]), 2);
	t_assert_eq(kvmm_block_publish(r, seq, 5, 1, h[4], &h[5]), -EINVAL);
	t_assert_eq(poll_ready(r, seq, 4), 0);
	t_assert_eq(poll_ready(r, seq, 5), -ERANGE);
	t_ok(kvmm_seq_close(r, seq));
	kvmm_region_destroy(r);
	kvmm_disconnect(c);
}

static void run(const char *sock, bool old, uint64_t base)
{
	int status;
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		client(sock, old, base);
		_exit(0);
	}
	t_assert_eq(waitpid(p, &status, 0), p);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		t_fail("the %s client failed (status %#x)",
		       old ? "1.19" : "1.20", status);
}

int main(void)
{
	struct kvmm_status_reply st;
	struct td_daemon d;

	td_start_ok(&d, NULL);
	run(d.sock, false, 0x5e0000);
	run(d.sock, true, 0x5f0000);
	/* (the published blocks stay cached) */
	t_ok(td_wait_sessions(&d, 1, 5000, &st));
	t_assert_eq(st.revocations_posted, 2);
	t_assert_eq(st.revocations_acked, 2);
	td_stop_ok(&d);
	return T_PASS;
}
