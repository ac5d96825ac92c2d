// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A truncate that reaches the daemon after it revoked blocks of the
 * sequence, but before the client applied the revocation, is no error:
 * the client asked for a length at or below the one it knows, and only
 * the revocation (which shortened the daemon's length already) makes it
 * longer than the daemon's.  The truncate changes nothing there, the
 * revocation applied afterwards takes what is left, and the daemon's and
 * the client's page holds agree; the sequence then grows again on fresh
 * pages and closes to idle.
 *
 * Found by the soak (tests/daemon-soak.c, seed 4): kvmm_seq_truncate()
 * returned -EINVAL after libkvmm had already unmapped the blocks and set
 * the length, so the engine got an error for a call that had happened.
 */
#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/client_seq.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define TPB 256 /* 64 KiB / (2 heads * 64 dim * 2 bytes) */
#define PPB 4 /* 2 layers, K and V */

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "trunc",
					.map_ahead_set = 1 }; /* no map-ahead */
	struct kvmm_region_opts ro = tr_small_region;
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;
	unsigned char *k0;
	uint32_t seq;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	cs_open(&co, &ro, &c, &r, &seq);
	t_ok(kvmm_seq_extend(r, seq, 4 * TPB));
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x5a, 65536); /* layer 0 K of block 0 */
	t_assert_eq(pc_held(c), 4 * PPB);

	/* the admin takes blocks 1..3 back: the daemon's length is 1 block */
	t_ok(kvmm_get_stats(c, &ks));
	t_ok(ar_revoke(d.sock, ks.session_id, r->id, seq, 1));

	/* not applied yet: to the client the sequence is 4 blocks long */
	t_assert_eq(kvmm_seq_len(r, seq), 4 * TPB);
	t_ok(kvmm_seq_truncate(r, seq, 3 * TPB));
	t_assert_eq(kvmm_seq_len(r, seq), 3 * TPB);
	/* blocks 1 and 2 are still the client's until it applies the
	 * revocation; block 3 went with the truncate, on both sides */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_revoking, 2 * PPB);

	/* the revocation takes blocks 1 and 2 (block 3's entries take
	 * nothing) */
	t_assert(kvmm_process_revocations(c) >= 2 * PPB);
	t_assert_eq(kvmm_seq_len(r, seq), TPB);
	t_assert_eq(k0[100], 0x5a); /* block 0 kept its contents */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.revocations_acked, 1);
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(pc_held(c), PPB);

	/* growing again gets fresh pages; the accounting agrees */
	t_ok(kvmm_seq_extend(r, seq, 3 * TPB));
	t_assert_eq(kvmm_seq_len(r, seq), 3 * TPB);
	t_assert_eq(pc_held(c), 3 * PPB);
	t_assert_eq(k0[65536 + 100], 0); /* block 1 is a fresh page */
	t_ok(kvmm_seq_truncate(r, seq, TPB));
	t_assert_eq(pc_held(c), PPB);
	t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, &st));
	td_stop_ok(&d);
	return T_PASS;
}
