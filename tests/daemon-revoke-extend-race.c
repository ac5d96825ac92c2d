// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * An extend that reaches the daemon after it revoked blocks of the
 * sequence, but before the client applied the revocation, gets fresh pages
 * for those blocks.  libkvmm then maps them in place of the old ones and
 * clamps the sequence's length to the first replaced block, as applying
 * the revocation would, so the engine knows their contents are gone; the
 * revocation, applied afterwards, takes nothing more, and the daemon's and
 * the client's page holds agree.
 *
 * A client extends a sequence to 2 blocks and writes them; the admin
 * revokes block 1 on; the client, not having looked at its revocation
 * ring, extends to 3 blocks (past what it has mapped: a socket extend).
 * Then the same within the blocks it has mapped (a ring extend, which
 * the daemon answers -ENODATA; libkvmm applies the revocation and fetches
 * over the socket): the length is the revocation's too.
 */
#include <string.h>
#include <unistd.h>

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
					.name = "race",
					.map_ahead_set = 1 }; /* no map-ahead */
	struct kvmm_region_opts ro = tr_small_region;
	struct kvmm_stats ks = { .size = sizeof(ks) };
	uint32_t before[PPB], after[PPB], seq;
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;
	unsigned char *k0;
	uint64_t revoked, bell;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	cs_open(&co, &ro, &c, &r, &seq);
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB));
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x5a, 2 * 65536); /* layer 0 K of blocks 0 and 1 */
	t_assert_eq(kvmm_seq_block_pages(r, seq, 1, before, PPB), PPB);
	t_assert_eq(pc_held(c), 2 * PPB);

	t_ok(kvmm_get_stats(c, &ks));
	t_ok(ar_revoke(d.sock, ks.session_id, r->id, seq, 1));

	/* not applied yet: this extend goes to the daemon over the socket */
	t_ok(kvmm_seq_extend(r, seq, 3 * TPB));
	t_assert_eq(kvmm_seq_block_pages(r, seq, 1, after, PPB), PPB);
	for (int i = 0; i < PPB; i++)
		t_assert(after[i] != before[i]); /* fresh pages */
	t_assert_eq(kvmm_seq_len(r, seq), TPB); /* block 1 is lost */
	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_revoked, PPB);
	t_assert_eq(k0[100], 0x5a); /* block 0 kept its contents */
	t_assert_eq(k0[65536 + 100], 0); /* block 1 is a fresh page */

	t_assert_eq(kvmm_process_revocations(c), PPB);
	t_assert_eq(kvmm_seq_len(r, seq), TPB);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.revocations_acked, 1);
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(pc_held(c), 3 * PPB);
	/* growing again over the mapped blocks: the ring, no loss */
	t_ok(kvmm_seq_extend(r, seq, 3 * TPB));
	t_assert_eq(kvmm_seq_len(r, seq), 3 * TPB);
	t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);

	/*
	 * The same within the mapped blocks: the extend goes through the
	 * ring, the daemon answers -ENODATA (block 1 is revoked), libkvmm
	 * applies the revocation and fetches fresh pages over the socket.
	 * The length stays where the revocation left it (block 1 lost),
	 * not new_len over fresh zeros (before: 2 * TPB + 20).  The
	 * doorbell is drained first, as by an engine that polled before
	 * the revocation was posted: only the extend can find it.
	 */
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB + 10)); /* blocks 0..2 */
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x6b, 2 * 65536 + 10 * 256);
	t_ok(kvmm_get_stats(c, &ks));
	revoked = ks.pages_revoked;
	t_ok(ar_revoke(d.sock, ks.session_id, r->id, seq, 1));
	t_assert(read(kvmm_poll_fd(c), &bell, sizeof(bell)) == sizeof(bell));
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB + 20));
	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_revoked - revoked, 2 * PPB); /* blocks 1, 2 */
	t_assert_eq(kvmm_seq_len(r, seq), TPB);
	t_assert_eq(k0[100], 0x6b); /* block 0 kept its contents */
	/* block 1 is another page (of this uid's: not scrubbed) */
	t_assert(k0[65536 + 100] != 0x6b);
	/* recomputed, the engine grows it again: the ring, no loss */
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB + 20));
	t_assert_eq(kvmm_seq_len(r, seq), 2 * TPB + 20);
	t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, &st));
	td_stop_ok(&d);
	return T_PASS;
}
