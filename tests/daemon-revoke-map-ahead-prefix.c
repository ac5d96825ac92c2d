// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * The map-ahead thread's form of tests/daemon-revoke-extend-prefix.c:
 * the thread's SEQ_EXTEND reaches the daemon after it revoked blocks of
 * the sequence and gets fresh pages for them; the thread keeps those
 * aside until the step boundary (kvmm/lib/defer.c) and the old pages stay
 * mapped.  A prefix open in between that shares the old pages (the
 * cached blocks the sequence published) gets them as KVMM_PAGE_HELD and
 * maps them: the same pages, with the bytes written, before and after
 * the boundary applies the revocation and maps the kept pages.  At every
 * point libkvmm holds the pages the daemon counts it holding.
 *
 * The interleaving is forced as in tests/daemon-map-ahead-midstep.c: the
 * test holds the connection's socket lock, so the thread (kicked by an
 * extend inside the step) reaches the daemon only after the revocation.
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
#define PAGE 65536

/* The bytes of pseq's 2 blocks, and the pages they are. */
static void check_prefix(struct kvmm_region *r, uint32_t pseq,
			 const uint32_t *old0, const uint32_t *old1)
{
	unsigned char *k =
		(unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, pseq, 0);
	uint32_t now[PPB];

	t_assert_eq(kvmm_seq_len(r, pseq), 2 * TPB);
	t_assert_eq(kvmm_seq_block_pages(r, pseq, 0, now, PPB), PPB);
	t_assert(!memcmp(now, old0, sizeof(now)));
	t_assert_eq(kvmm_seq_block_pages(r, pseq, 1, now, PPB), PPB);
	t_assert(!memcmp(now, old1, sizeof(now)));
	for (size_t off = 0; off < PAGE; off += 4093) {
		t_assert_eq(k[off], 0x61);
		t_assert_eq(k[PAGE + off], 0x62);
	}
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "revmaprefix" }; /* 1 ahead */
	struct kvmm_region_opts ro = tr_small_region;
	const uint64_t h[2] = { 0x5eed0401, 0x5eed0402 };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	uint32_t old0[PPB], old1[PPB], now[PPB], seq, pseq, nb = 0;
	struct kvmm_status_reply st;
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	unsigned char *k0;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_get_stats(c, &ks));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB)); /* blocks 0-1, 2 ahead */
	t_assert_eq(pc_backed(r, seq), 3);
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x61, PAGE);
	memset(k0 + PAGE, 0x62, PAGE);
	t_assert_eq(kvmm_block_publish(r, seq, 0, 2, 0, h), 2);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, old0, PPB), PPB);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 1, old1, PPB), PPB);

	/* the thread maps block 3, keeps fresh pages for 0-2 */
	rc_revoke_under_map_ahead(d.sock, c, r, seq, 2 * TPB + 1, 4);
	/* blocks 0-2 keep their old pages until the boundary */
	t_assert_eq(c->nr_deferred, 3);
	t_assert_eq(kvmm_seq_len(r, seq), 2 * TPB + 1);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, now, PPB), PPB);
	t_assert(!memcmp(now, old0, sizeof(now)));

	/* in the step, before the boundary: the old pages, shared */
	t_ok(kvmm_seq_open_prefix(r, h, 2, &pseq, &nb));
	t_assert_eq(nb, 2);
	check_prefix(r, pseq, old0, old1);
	t_assert_eq(pc_client_pages(c), pc_held(c));
	t_ok(kvmm_step_end(c));

	/* the boundary: revocation applied, kept pages mapped in seq */
	t_assert_eq(c->nr_deferred, 0);
	t_assert_eq(kvmm_seq_len(r, seq), 0);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, now, PPB), PPB);
	for (int i = 0; i < PPB; i++)
		t_assert(now[i] != old0[i]);
	check_prefix(r, pseq, old0, old1);
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_revoking, 0);
	t_assert_eq(st.revocations_posted, st.revocations_acked);
	/* seq's 4 fresh blocks and pseq's 2 shared ones */
	t_assert_eq(pc_held(c), 6 * PPB);
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
