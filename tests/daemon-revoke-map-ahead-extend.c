// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * An engine's extend after the map-ahead thread kept fresh pages for
 * revoked blocks (their revocation still in the ring) applies the
 * revocation first: the length ends where it cut, and the pages mapped
 * are kvmmd's, the kept ones.
 *
 * kvmmd backs a revoked block again when the thread's SEQ_EXTEND reaches
 * it, so the engine's later extend found the block backed there: the
 * ring's extend (within the blocks mapped) answered 0 and the socket's
 * (past them) sent only the blocks above.  Either way the length grew
 * over the old pages, still mapped here, while kvmmd's sequence held the
 * fresh ones: the engine's KV was gone without a word, and a publish
 * then cached kvmmd's pages, not what the engine had written
 * (tests/daemon-fuzz phase 4 with revocations: a block reloaded from
 * NVMe with other bytes).  A daemon-fuzz extend from a read-only block
 * met the same state: kvmmd called the block the sequence's own, and
 * the unshare left it read-only (-EROFS).
 *
 * The interleaving is forced as in daemon-map-ahead-midstep.c: the
 * revocation takes blocks 0 and 1 while the thread, kicked by an extend
 * inside the step, waits for the socket; it maps block 2 and keeps fresh
 * pages for 0 and 1.  Then the engine extends, by the ring (within
 * block 2) in one round and by the socket (to block 4) in the other.
 */
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/revoke_client.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define TPB 256 /* 64 KiB / (2 heads * 64 dim * 2 bytes) */
#define PPB 4 /* 2 layers, K and V */
#define BLOCK 65536

static struct td_daemon d;

static void extend_round(struct kvmm_conn *c, struct kvmm_region *r,
			 uint32_t new_len)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	uint32_t before[PPB], now[PPB], seq;
	unsigned char *k0;

	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, TPB)); /* blocks 0 and 1 (1 ahead) */
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x5a, BLOCK);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, before, PPB), PPB);

	/* the thread maps block 2, keeps fresh pages for 0 and 1 */
	rc_revoke_under_map_ahead(d.sock, c, r, seq, TPB + 1, 3);
	t_assert_eq(c->nr_deferred, 2);
	t_assert_eq(kvmm_seq_len(r, seq), TPB + 1);

	/* the engine's extend applies the revocation: block 0 on is gone */
	t_ok(kvmm_seq_extend(r, seq, new_len));
	t_assert_eq(kvmm_seq_len(r, seq), 0);
	t_assert_eq(c->nr_deferred, 0);
	t_assert(pc_backed(r, seq) >= (new_len + TPB - 1) / TPB);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, now, PPB), PPB);
	for (int i = 0; i < PPB; i++)
		t_assert(now[i] != before[i]);
	t_ok(kvmm_step_end(c));
	t_assert_eq(kvmm_seq_len(r, seq), 0);
	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_held, pc_backed(r, seq) * PPB);

	/* grown again from 0: the blocks are the sequence's, writable */
	t_ok(kvmm_seq_extend(r, seq, new_len));
	t_assert_eq(kvmm_seq_len(r, seq), new_len);
	memset(k0, 0x33, BLOCK);
	t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "midstep" }; /* 1 ahead */
	struct kvmm_region_opts ro = tr_small_region;
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	struct kvmm_region *r;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	extend_round(c, r, 2 * TPB + 1); /* the ring: block 2 is mapped */
	extend_round(c, r, 4 * TPB + 1); /* the socket: blocks 3 and 4 */
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, &st));
	t_ok(td_wait_sessions(&d, 1, 5000, &st));
	t_assert_eq(st.pages_revoking, 0);
	td_stop_ok(&d);
	return T_PASS;
}
