// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * The step boundary maps the fresh pages the map-ahead thread kept
 * (kvmm/lib/defer.c) over blocks whose revocation libkvmm has not seen
 * yet: apply_block() finds the old pages still mapped, unmaps them and
 * keeps each one's reference (kvmm/lib/retire.c) until the revocation
 * entry naming it is applied, as kvmmd keeps its hold until the ack.
 *
 * kvmmd posts a revocation before it detaches the blocks, and the
 * thread's extend that gets fresh pages for them is answered after that,
 * so today the entries are always in the ring by the boundary and this
 * path runs only for a revocation that reaches the ring late (a daemon
 * that posts after detaching, in pieces).  The test makes that happen
 * with a real kvmmd by holding back libkvmm's view of the RQ tail while
 * the revocation is posted, then lets it through.  It checks:
 *   - at the boundary: the kept pages are mapped in their blocks (page
 *     ids), the length is cut to 0, the old pages keep one reference
 *     each and libkvmm holds exactly the pages kvmmd counts (12 old,
 *     12 fresh, block 3's 4);
 *   - in between: a prefix open that shares the old pages (the cached
 *     blocks the sequence published) maps them from the kept references
 *     (KVMM_PAGE_HELD, no fd), with the bytes written before;
 *   - once the revocation shows: applying it drops the old pages' kept
 *     references, not the fresh mappings, the ack goes out (nothing
 *     revoking) and the counts still agree.
 *
 * The interleaving of the thread is forced as in
 * tests/daemon-revoke-map-ahead-prefix.c (rc_revoke_under_map_ahead()):
 * the test holds the socket lock so the thread reaches kvmmd only after
 * the revocation.
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

#define TPB TR_TPB
#define PPB 4 /* 2 layers, K and V */
#define PAGE 65536
#define NB 3 /* blocks 0-1 and the one mapped ahead */

/* Point libkvmm's RQ tail at *tail (the ring's own word when NULL). */
static void rq_tail_at(struct kvmm_conn *c, uint32_t *tail)
{
	static uint32_t *real;

	pthread_mutex_lock(&c->lock);
	if (!real)
		real = c->r.rq.tail;
	c->r.rq.tail = tail ? tail : real;
	pthread_mutex_unlock(&c->lock);
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "revunposted" }; /* 1 ahead */
	struct kvmm_region_opts ro = tr_small_region;
	const uint64_t h[2] = { 0x5eed0501, 0x5eed0502 };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	uint32_t old[NB][PPB], kept[NB][PPB], now[PPB], ahead[PPB];
	uint32_t seq, pseq, nb = 0, hidden_tail;
	struct kvmm_status_reply st;
	uint64_t revoked0;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	unsigned char *k0, *pk;
	int tries;

	td_start_ok(&d, (const char *[]){ "--revoke-timeout", "20000", NULL });
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_get_stats(c, &ks));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB)); /* blocks 0-1, 2 ahead */
	t_assert_eq(pc_backed(r, seq), NB);
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x61, PAGE);
	memset(k0 + PAGE, 0x62, PAGE);
	t_assert_eq(kvmm_block_publish(r, seq, 0, 2, 0, h), 2);
	for (uint32_t b = 0; b < NB; b++)
		t_assert_eq(kvmm_seq_block_pages(r, seq, b, old[b], PPB), PPB);
	revoked0 = ks.pages_revoked;

	/* what libkvmm sees of the ring until the test lets it through */
	hidden_tail = c->rq_head;
	rq_tail_at(c, &hidden_tail);
	/* blocks 0-2 revoked (12 entries, unseen), the thread maps block 3
	 * and keeps fresh pages for 0-2 */
	rc_revoke_under_map_ahead(d.sock, c, r, seq, 2 * TPB + 1, NB + 1);
	t_assert_eq(c->nr_deferred, NB);
	pthread_mutex_lock(&c->lock);
	for (uint32_t b = 0; b < NB; b++)
		memcpy(kept[b], r->seqs[seq].deferred[b], sizeof(kept[b]));
	pthread_mutex_unlock(&c->lock);
	t_assert_eq(kvmm_seq_block_pages(r, seq, NB, ahead, PPB), PPB);
	t_assert_eq(pc_held(c), (2 * NB + 1) * PPB);
	t_assert_eq(pc_client_pages(c), pc_held(c));
	t_ok(kvmm_step_end(c));

	/* the boundary, the revocation not seen: kept pages mapped, the
	 * old ones unmapped but kept */
	t_assert_eq(c->nr_deferred, 0);
	t_assert_eq(kvmm_seq_len(r, seq), 0);
	t_assert_eq(pc_backed(r, seq), NB + 1);
	for (uint32_t b = 0; b < NB; b++) {
		t_assert_eq(kvmm_seq_block_pages(r, seq, b, now, PPB), PPB);
		t_assert(!memcmp(now, kept[b], sizeof(now)));
		for (int i = 0; i < PPB; i++) {
			t_assert(kept[b][i] != old[b][i]);
			t_assert_eq(pc_refs(c, old[b][i]), 1);
			t_assert_eq(pc_refs(c, kept[b][i]), 1);
		}
	}
	t_assert_eq(kvmm_seq_block_pages(r, seq, NB, now, PPB), PPB);
	t_assert(!memcmp(now, ahead, sizeof(now)));
	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_revoked - revoked0, NB * PPB);
	t_assert_eq(pc_held(c), (2 * NB + 1) * PPB);
	t_assert_eq(pc_client_pages(c), pc_held(c));
	t_ok(td_status(&d, &st));
	/* not acknowledged: block 2's pages wait (the cache holds 0-1's) */
	t_assert_eq(st.pages_revoking, PPB);
	t_assert_eq(st.revocations_posted, st.revocations_acked + 1);
	/* the fresh pages are the sequence's own: writable */
	memset(k0, 0x71, PAGE);
	t_assert_eq(k0[PAGE - 1], 0x71);

	/* a prefix open shares the old, cached pages from what is kept */
	t_ok(kvmm_seq_open_prefix(r, h, 2, &pseq, &nb));
	t_assert_eq(nb, 2);
	t_assert_eq(kvmm_seq_len(r, pseq), 2 * TPB);
	for (uint32_t b = 0; b < 2; b++) {
		t_assert_eq(kvmm_seq_block_pages(r, pseq, b, now, PPB), PPB);
		t_assert(!memcmp(now, old[b], sizeof(now)));
		for (int i = 0; i < PPB; i++)
			t_assert_eq(pc_refs(c, old[b][i]), 2);
	}
	pk = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, pseq, 0);
	for (size_t off = 0; off < PAGE; off += 4093) {
		t_assert_eq(pk[off], 0x61);
		t_assert_eq(pk[PAGE + off], 0x62);
	}
	t_assert_eq(pc_client_pages(c), pc_held(c));

	/* the revocation shows: it takes the kept refs, nothing mapped */
	rq_tail_at(c, NULL);
	t_assert_eq(kvmm_process_revocations(c), NB * PPB);
	for (uint32_t b = 0; b < NB; b++)
		for (int i = 0; i < PPB; i++) {
			t_assert_eq(pc_refs(c, old[b][i]), b < 2 ? 1 : 0);
			t_assert_eq(pc_refs(c, kept[b][i]), 1);
		}
	for (uint32_t b = 0; b < NB; b++) {
		t_assert_eq(kvmm_seq_block_pages(r, seq, b, now, PPB), PPB);
		t_assert(!memcmp(now, kept[b], sizeof(now)));
	}
	t_assert_eq(k0[0], 0x71);
	t_assert_eq(pk[0], 0x61);
	t_assert_eq(pk[PAGE], 0x62);
	/* the entries take the old pages the boundary unmapped and counted
	 * already: pages_revoked does not count them twice (kvmm.h) */
	t_ok(kvmm_get_stats(c, &ks));
	t_assert_eq(ks.pages_revoked - revoked0, NB * PPB);
	t_ok(td_wait_sessions(&d, 1 + 1, 5000, &st)); /* c and status */
	for (tries = 0; tries < 5000; tries++) {
		t_ok(td_status(&d, &st));
		if (!st.pages_revoking)
			break;
		usleep(1000);
	}
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.revocations_posted, st.revocations_acked);
	/* seq's 4 fresh blocks and pseq's 2 shared ones */
	t_assert_eq(pc_held(c), (NB + 1 + 2) * PPB);
	t_assert_eq(pc_client_pages(c), pc_held(c));

	t_ok(kvmm_seq_close(r, pseq));
	t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
	t_assert_eq(pc_client_pages(c), 0);
	kvmm_disconnect(c);
	/* the 2 cached blocks keep their pages; nothing else is held */
	rc_wait_only_cached(&d, 2 * PPB, &st);
	td_stop_ok(&d);
	return T_PASS;
}
