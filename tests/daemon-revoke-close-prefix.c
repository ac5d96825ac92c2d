// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A sequence closed (or truncated) while an admin revocation of its blocks
 * waits in the client's ring: libkvmm unmaps the blocks at the close, so
 * the daemon must count those mappings gone at the close too, not at the
 * acknowledgement that comes later.  Otherwise a prefix open in between
 * that shares the same pages (the cached blocks the sequence published)
 * names them KVMM_PAGE_HELD, "you map these already", without their fds,
 * and libkvmm, which holds none of them any more, fails it with -EPROTO.
 *
 * A client publishes 2 blocks from a sequence; the admin revokes the
 * sequence from block 0; before applying the revocation the client closes
 * the sequence and opens the prefix of the 2 hashes (then the same with
 * a truncate to block 1 instead of the close).  The open gets both blocks,
 * shared, with the bytes written; the revocation applied afterwards takes
 * nothing, the daemon's and the client's holds agree, and the end is idle.
 *
 * Found by the soak (tests/daemon-soak.c, seeds 5, 7 and 9 with
 * revocations in its admin loop).
 */
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
#define PAGE 65536

static void revoke_seq(struct td_daemon *d, struct kvmm_conn *c,
		       struct kvmm_region *r, uint32_t seq)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	t_ok(kvmm_get_stats(c, &ks));
	t_ok(ar_revoke(d->sock, ks.session_id, r->id, seq, 0));
}

/* Publish 2 blocks under h (layer 0 K of block b all tag + b), have the
 * admin revoke the sequence, close it (truncate it to 1 block when
 * truncate) without applying that, and open the prefix. */
static void one_case(struct td_daemon *d, struct kvmm_conn *c,
		     struct kvmm_region *r, const uint64_t *h,
		     unsigned char tag, bool truncate)
{
	struct kvmm_status_reply st;
	uint32_t seq, pseq, nb = 0;
	unsigned char *k0;

	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB));
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, tag, PAGE);
	memset(k0 + PAGE, tag + 1, PAGE);
	t_assert_eq(kvmm_block_publish(r, seq, 0, 2, 0, h), 2);
	revoke_seq(d, c, r, seq);
	if (truncate)
		t_ok(kvmm_seq_truncate(r, seq, TPB));
	else
		t_ok(kvmm_seq_close(r, seq));

	/* the revocation is still in the ring, not applied */
	t_ok(kvmm_seq_open_prefix(r, h, 2, &pseq, &nb));
	t_assert_eq(nb, 2);
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, pseq, 0);
	t_assert_eq(k0[100], tag);
	t_assert_eq(k0[PAGE + 100], tag + 1);
	t_assert_eq(kvmm_seq_block_readonly(r, pseq, 1), 1);

	/* applied now: nothing left to take; every hold is the prefix's */
	t_assert(kvmm_process_revocations(c) >= 0);
	t_ok(td_status(d, &st));
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.revocations_posted, st.revocations_acked);
	t_assert_eq(pc_held(c), 2 * PPB);
	t_assert_eq(k0[100], tag);
	t_ok(kvmm_seq_close(r, pseq));
	if (truncate)
		t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "revclose",
					.map_ahead_set = 1 }; /* no map-ahead */
	struct kvmm_region_opts ro = tr_small_region;
	const uint64_t h1[2] = { 0x5eed0001, 0x5eed0002 };
	const uint64_t h2[2] = { 0x5eed0011, 0x5eed0012 };
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	one_case(&d, c, r, h1, 0x40, false);
	one_case(&d, c, r, h2, 0x50, true);
	kvmm_disconnect(c);
	/* the 4 cached blocks keep their pages; nothing else is held */
	rc_wait_only_cached(&d, 4 * PPB, &st);
	td_stop_ok(&d);
	return T_PASS;
}
