// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * An extend that reaches the daemon after it revoked blocks of the
 * sequence gets fresh pages for them, and libkvmm maps those in place of
 * the old ones at once (lifecycle.md, "Ordering guarantees", 5).  The
 * daemon keeps its holds on the old pages until the revocation is
 * acknowledged, so libkvmm keeps the old pages imported as long
 * (kvmm/lib/retire.c): a prefix open in between that shares them (the
 * cached blocks the sequence had published) is answered with them marked
 * KVMM_PAGE_HELD, "you have these already", without their fds, and maps
 * them from the handles kept.  It used to fail with -EPROTO, libkvmm
 * holding none of them any more.
 *
 * A client publishes 2 blocks from a sequence; the admin revokes the
 * sequence from block 0; before applying the revocation the client
 * extends the sequence to 3 blocks (a socket extend: fresh pages for all
 * 3) and opens the prefix of the 2 hashes.  The open gets both blocks,
 * shared: the old pages, with the bytes written.  At every point libkvmm
 * holds the pages the daemon counts it holding.  Two more rounds close or
 * truncate the sequence between the extend and the open (the daemon
 * drops its holds of the revoked places then, libkvmm its kept pages):
 * the open gets the pages with their fds.
 *
 * Found by the soak (tests/daemon-soak.c --seed 42 --clients 8, with
 * revocations in its admin loop).  The map-ahead thread's form of the
 * same events is tests/daemon-revoke-map-ahead-prefix.c.
 */
#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/page_counts.h"
#include "tests/lib/revoke_client.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define TPB 256 /* 64 KiB / (2 heads * 64 dim * 2 bytes) */
#define PPB 4 /* 2 layers, K and V */
#define PAGE 65536

enum between { OPEN_AT_ONCE, CLOSE_FIRST, TRUNCATE_FIRST };

static struct td_daemon d;
static uint32_t session_id;

static void round_trip(struct kvmm_conn *c, struct kvmm_region *r,
		       enum between what, uint64_t tag)
{
	const uint64_t h[2] = { tag + 1, tag + 2 };
	uint32_t old0[PPB], now[PPB], seq, pseq, nb = 0;
	struct rc_ids ids = { .session = session_id, .region = r->id };
	struct kvmm_status_reply st;
	unsigned char *k0;

	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB));
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x61, PAGE);
	memset(k0 + PAGE, 0x62, PAGE);
	t_assert_eq(kvmm_block_publish(r, seq, 0, 2, 0, h), 2);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, old0, PPB), PPB);

	ids.seq = seq;
	rc_admin_revoke(d.sock, &ids, 0);

	/* not applied: the extend gets fresh pages for blocks 0 and 1 */
	t_ok(kvmm_seq_extend(r, seq, 3 * TPB));
	t_assert_eq(kvmm_seq_len(r, seq), 0); /* both lost, as it says */
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, now, PPB), PPB);
	for (int i = 0; i < PPB; i++)
		t_assert(now[i] != old0[i]);
	/* 3 blocks mapped, and the 2 revoked ones held by both sides */
	t_assert_eq(pc_held(c), 5 * PPB);
	t_assert_eq(pc_client_pages(c), pc_held(c));
	for (int i = 0; i < PPB; i++)
		t_assert_eq(pc_refs(c, old0[i]), 1); /* kept, not mapped */

	if (what == CLOSE_FIRST)
		t_ok(kvmm_seq_close(r, seq));
	else if (what == TRUNCATE_FIRST)
		t_ok(kvmm_seq_truncate(r, seq, 0));
	if (what != OPEN_AT_ONCE) {
		/* the revoked places went with the close or truncate */
		t_assert_eq(pc_held(c), 0);
		t_assert_eq(pc_client_pages(c), 0);
	}

	t_ok(kvmm_seq_open_prefix(r, h, 2, &pseq, &nb));
	t_assert_eq(nb, 2);
	t_assert_eq(kvmm_seq_len(r, pseq), 2 * TPB);
	/* the cached blocks: the very pages revoked from seq */
	t_assert_eq(kvmm_seq_block_pages(r, pseq, 0, now, PPB), PPB);
	t_assert(!memcmp(now, old0, sizeof(now)));
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, pseq, 0);
	t_assert_eq(k0[100], 0x61);
	t_assert_eq(k0[PAGE + 100], 0x62);
	t_assert_eq(pc_client_pages(c), pc_held(c));
	for (int i = 0; i < PPB; i++) /* pseq's, and kept for seq's entry */
		t_assert_eq(pc_refs(c, old0[i]), what == OPEN_AT_ONCE ? 2 : 1);

	/* the revocation takes the kept pages (nothing after a close or
	 * truncate), never the open's mappings */
	t_assert_eq(kvmm_process_revocations(c), 2 * PPB); /* entries */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.revocations_posted, st.revocations_acked);
	t_assert_eq(pc_client_pages(c), pc_held(c));
	for (int i = 0; i < PPB; i++)
		t_assert_eq(pc_refs(c, old0[i]), 1);
	t_assert_eq(k0[100], 0x61);
	t_assert_eq(k0[PAGE + 100], 0x62);
	t_assert_eq(kvmm_seq_len(r, pseq), 2 * TPB);

	t_ok(kvmm_seq_close(r, pseq));
	if (what != CLOSE_FIRST)
		t_ok(kvmm_seq_close(r, seq));
	t_assert_eq(pc_held(c), 0);
	t_assert_eq(pc_client_pages(c), 0);
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "revext",
					.map_ahead_set = 1 }; /* no map-ahead */
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	struct kvmm_region *r;

	td_start_ok(&d, NULL);
	session_id = rc_connect_small(d.sock, &co, &c, &r);
	round_trip(c, r, OPEN_AT_ONCE, 0x5eed0100);
	round_trip(c, r, CLOSE_FIRST, 0x5eed0200);
	round_trip(c, r, TRUNCATE_FIRST, 0x5eed0300);
	kvmm_disconnect(c);
	/* the 6 cached blocks keep their pages; nothing else is held */
	rc_wait_only_cached(&d, 6 * PPB, &st);
	t_assert_eq(st.revocations_posted, 3);
	t_assert_eq(st.revocations_acked, 3);
	td_stop_ok(&d);
	return T_PASS;
}
