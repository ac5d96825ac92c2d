// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A truncate that reaches kvmmd after a revocation cut its length, and
 * after the map-ahead thread's extend backed the revoked blocks and the
 * ones ahead again, drops those blocks past the new length all the same:
 * libkvmm unmapped them, and the next extend past them gets them again.
 *
 * The truncate names a length above kvmmd's (the revocation is still in
 * the ring), and kvmmd took that for "nothing lies past it": it kept the
 * blocks the thread's extend (which names no length) had backed there.
 * The next extend past them was sent only the blocks above, and libkvmm,
 * which had none of those mapped, answered -ENODATA (tests/daemon-fuzz
 * phase 4 with revocations, seed 1: an extend of a sequence truncated
 * after a revocation, -ENODATA); the blocks counted against the uid's
 * quota until the sequence closed.
 *
 * The interleaving is forced as in daemon-revoke-map-ahead-extend.c:
 * the revocation takes blocks 0 and 1 while the thread, kicked by an
 * extend inside the step, waits for the socket; it maps block 2 and
 * keeps fresh pages for 0 and 1.  Then the engine truncates to 1 token
 * (kvmmd's length is 0), ends the step and extends to block 4.
 */
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/client_seq.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/revoke_client.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define TPB 256 /* 64 KiB / (2 heads * 64 dim * 2 bytes) */
#define PPB 4 /* 2 layers, K and V */
#define BLOCK 65536

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "trunc" }; /* 1 ahead */
	struct kvmm_region_opts ro = tr_small_region;
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;
	unsigned char *k;
	uint32_t seq;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	cs_open(&co, &ro, &c, &r, &seq);
	t_ok(kvmm_seq_extend(r, seq, TPB)); /* blocks 0 and 1 (1 ahead) */

	/* the thread maps block 2, keeps fresh pages for 0 and 1; kvmmd's
	 * sequence: length 0, blocks 0-2 */
	rc_revoke_under_map_ahead(d.sock, c, r, seq, TPB + 1, 3);
	t_assert_eq(c->nr_deferred, 2);

	/* past kvmmd's length 0: blocks 1 and 2 go on both sides */
	t_ok(kvmm_seq_truncate(r, seq, 1));
	t_assert_eq(pc_backed(r, seq), 1);
	t_ok(kvmm_step_end(c)); /* the revocation; block 0 is the kept */
	t_assert_eq(kvmm_seq_len(r, seq), 0);
	t_assert_eq(c->nr_deferred, 0);

	/* blocks 1-3 come in the reply, 4 ahead */
	t_ok(kvmm_seq_extend(r, seq, 3 * TPB + 1));
	t_assert_eq(kvmm_seq_len(r, seq), 3 * TPB + 1);
	t_assert(pc_backed(r, seq) >= 4);
	k = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k, 0x5a, 4 * BLOCK); /* writable, every block */
	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_held, pc_backed(r, seq) * PPB);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_mapped, pc_backed(r, seq) * PPB);
	t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, &st));
	t_ok(td_wait_sessions(&d, 1, 5000, &st));
	t_assert_eq(st.pages_revoking, 0);
	td_stop_ok(&d);
	return T_PASS;
}
