// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A revocation whose entries wait in the ring while the client truncates
 * the blocks they name, then extends over them again and gets the same
 * pages back at the same places: applying the entries takes nothing.
 *
 * kvmmd marks the places of a truncated block gone and drops their holds
 * at the truncate (kd_revoke_unmapped()), so the pool may hand the same
 * page to the same sequence's same block at the next extend (it reuses
 * the pages freed last first).  The entries still named that page at
 * that place, and libkvmm applying them later unmapped the new mapping
 * and cut the length there, while kvmmd's sequence still held the block:
 * the next extend past the mapped blocks was -ENODATA (tests/daemon-fuzz
 * phase 4 with revocations, seed 1 about 1 run in 3).  It checks, after
 * the boundary applied the entries: the length and the pages of the block
 * as they were, the bytes written, libkvmm's pages and kvmmd's count
 * agreeing, nothing revoking, a further extend and a publish of the
 * block that a prefix open reads back.
 */
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define TPB TR_TPB
#define PPB 4 /* 2 layers, K and V */
#define PAGE 65536

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "revtrunc",
					.map_ahead_set = 1,
					.map_ahead_blocks = 0 };
	struct kvmm_region_opts ro = tr_small_region;
	struct kvmm_stats ks = { .size = sizeof(ks) };
	const uint64_t h[4] = { 0x5eed0c01, 0x5eed0c02, 0x5eed0c03,
				0x5eed0c04 };
	uint32_t seq, pseq, nb = 0, old[PPB], now[PPB], after[PPB];
	struct kvmm_status_reply st;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	unsigned char *k;
	int reused = 0;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_get_stats(c, &ks));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 4 * TPB));
	t_assert_eq(kvmm_seq_block_pages(r, seq, 3, old, PPB), PPB);
	t_ok(ar_revoke(d.sock, ks.session_id, r->id, seq, 3));

	/* block 3 given back and backed again, the entries still waiting */
	t_ok(kvmm_seq_truncate(r, seq, 730));
	t_ok(kvmm_seq_extend(r, seq, 1764));
	t_assert_eq(kvmm_seq_len(r, seq), 1764);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 3, now, PPB), PPB);
	for (int i = 0; i < PPB; i++)
		for (int j = 0; j < PPB; j++)
			reused += now[i] == old[j];
	/* the state the bug needs: some of the same pages in block 3 */
	t_assert(reused > 0);
	k = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k + 3 * PAGE, 0x77, PAGE);

	/* the boundary applies the 4 entries: they take nothing */
	t_ok(kvmm_step_begin(c));
	t_ok(kvmm_step_end(c));
	t_assert(!kc_revocations_pending(c));
	t_assert_eq(kvmm_seq_len(r, seq), 1764);
	t_assert(pc_backed(r, seq) >= 7);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 3, after, PPB), PPB);
	t_assert(!memcmp(after, now, sizeof(now)));
	for (size_t off = 0; off < PAGE; off += 4093)
		t_assert_eq(k[3 * PAGE + off], 0x77);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.revocations_posted, st.revocations_acked);
	t_assert_eq(pc_client_pages(c), pc_held(c));
	t_assert_eq(pc_held(c), 7 * PPB);

	/* past the mapped blocks: was -ENODATA */
	t_ok(kvmm_seq_extend(r, seq, 7 * TPB + 10));
	t_assert_eq(kvmm_seq_len(r, seq), 7 * TPB + 10);
	memset(k, 0x11, 3 * PAGE);
	t_assert_eq(kvmm_block_publish(r, seq, 0, 4, 0, h), 4);
	t_ok(kvmm_seq_open_prefix(r, h, 4, &pseq, &nb));
	t_assert_eq(nb, 4);
	k = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, pseq, 0);
	for (size_t off = 0; off < PAGE; off += 4093) {
		t_assert_eq(k[2 * PAGE + off], 0x11);
		t_assert_eq(k[3 * PAGE + off], 0x77);
	}
	t_ok(kvmm_seq_close(r, pseq));
	t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
	t_assert_eq(pc_client_pages(c), 0);
	kvmm_disconnect(c);
	t_ok(td_wait_sessions(&d, 1, 5000, &st));
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.pages_mapped, 0);
	td_stop_ok(&d);
	return T_PASS;
}
