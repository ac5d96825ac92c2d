// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * Nothing a step may read changes between kvmm_step_begin() and
 * kvmm_step_end(), even when libkvmm's map-ahead thread fetches for the
 * sequence during the step after the daemon revoked its blocks.
 *
 * The daemon detaches revoked blocks at once and answers the thread's
 * SEQ_EXTEND with fresh pages for them, while the revocation waits in the
 * client's ring for the next boundary.  The thread used to map those
 * pages in place and cut the sequence's length mid-step (a forward pass
 * then read fresh pages: a wrong token).  Now it keeps them until the
 * boundary: during the step block 0 keeps its page and contents and the
 * length stays; at step_end the revocation is applied, the kept pages
 * are mapped and the length is cut to the first revoked block.
 *
 * The interleaving is forced: the test holds the connection's socket
 * lock, so the thread (kicked by an extend inside the step) reaches the
 * daemon only after the admin's revocation.  A second round revokes the
 * kept pages too before the boundary: they are dropped, never mapped.
 * Either way the client's page refs and the daemon's holds agree.
 */
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/revoke_client.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define TPB 256 /* 64 KiB / (2 heads * 64 dim * 2 bytes) */
#define PPB 4 /* 2 layers, K and V */
#define BLOCK 65536

static struct td_daemon d;
static uint32_t session_id;

/* Page refs libkvmm holds: one per mapping, and one per kept page. */
static uint64_t client_refs(struct kvmm_conn *c)
{
	uint64_t n = 0;

	pthread_mutex_lock(&c->lock);
	for (uint64_t i = 0; i < c->nr_pages; i++)
		n += c->pages[i].refs;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* Through another connection: the client's socket lock may be held. */
static void revoke_from_0(struct kvmm_region *r, uint32_t seq)
{
	t_ok(ar_revoke(d.sock, session_id, r->id, seq, 0));
}

/* One step during which the map-ahead thread meets a revocation of
 * blocks 0 and 1; with again, the pages it kept are revoked too. */
static void step_round(struct kvmm_conn *c, struct kvmm_region *r, bool again)
{
	uint32_t before[PPB], now[PPB], seq;
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_status_reply st;
	uint64_t revoked0;
	unsigned char *k0;

	t_ok(kvmm_get_stats(c, &ks));
	revoked0 = ks.pages_revoked;
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, TPB)); /* blocks 0 and 1 (1 ahead) */
	t_assert_eq(pc_backed(r, seq), 2);
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x5a, BLOCK);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, before, PPB), PPB);

	/* the thread maps block 2, keeps fresh pages for 0 and 1 */
	rc_revoke_under_map_ahead(d.sock, c, r, seq, TPB + 1, 3);
	if (again)
		revoke_from_0(r,
			      seq); /* the pages it kept for 0 and 1 as well */
	/* the forward pass reads blocks 0 and 1 as they were */
	t_assert_eq(kvmm_seq_len(r, seq), TPB + 1);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, now, PPB), PPB);
	t_assert(!memcmp(now, before, sizeof(now)));
	t_assert_eq(k0[0], 0x5a);
	t_assert_eq(k0[BLOCK - 1], 0x5a);
	t_ok(kvmm_step_end(c));

	/* applied at the boundary: block 0 on is lost */
	t_assert_eq(kvmm_seq_len(r, seq), 0);
	t_ok(kvmm_get_stats(c, &ks));
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_revoking, 0);
	if (again) {
		/* blocks 0-1 twice, block 2 once; nothing kept is mapped */
		t_assert_eq(ks.pages_revoked - revoked0, 5 * PPB);
		t_assert_eq(pc_backed(r, seq), 0);
		t_assert_eq(pc_held(c), 0);
	} else {
		t_assert_eq(ks.pages_revoked - revoked0, 2 * PPB);
		t_assert_eq(pc_backed(r, seq), 3); /* kept pages mapped */
		t_assert_eq(kvmm_seq_block_pages(r, seq, 0, now, PPB), PPB);
		for (int i = 0; i < PPB; i++)
			t_assert(now[i] != before[i]);
		t_assert_eq(pc_held(c), 3 * PPB);
	}
	t_assert_eq(client_refs(c), pc_held(c));
	/* growing again: no loss, nothing kept left over */
	t_ok(kvmm_seq_extend(r, seq, 3 * TPB));
	t_assert_eq(kvmm_seq_len(r, seq), 3 * TPB);
	t_assert_eq(c->nr_deferred, 0);
	t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
	t_assert_eq(client_refs(c), 0);
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "midstep" }; /* 1 ahead */
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	struct kvmm_region *r;

	td_start_ok(&d, NULL);
	session_id = rc_connect_small(d.sock, &co, &c, &r);
	step_round(c, r, false);
	step_round(c, r, true);
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, &st));
	td_stop_ok(&d);
	return T_PASS;
}
