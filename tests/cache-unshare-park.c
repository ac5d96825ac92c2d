// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A copy-on-write (SEQ_UNSHARE, ABI 1.20) in a full pool is charged as an
 * extend is: a real kvmmd whose pool (8 blocks) is full of cached blocks
 * and whose demotion jobs each wait DELAY_MS.  A libkvmm reader opens
 * content 0 (4 blocks shared from the GPU) and unshares block 1: kvmmd
 * demotes an idle block of content 1 to make room, the command parks
 * until the copy down is done (cmds_parked 1, the call takes at least
 * DELAY_MS), then the block is the reader's own, with content 0's bytes,
 * writable; the cache's copy (a second sequence on the prefix) keeps its
 * bytes.  (The park's 5 s bound is cache-extend-park's: the unshare
 * takes its pages through the same kd_seq_fill().)
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 4
#define DELAY_MS 400
#define TAG 700

static uint64_t hash_of(int content, int b)
{
	return 0xc0e0000ull * (content + 1) + b + 1;
}

int main(void)
{
	const char *args[] = { "--gpu-mem", "2M",	  "--cache-gpu-blocks",
			       "8",	    "--host-mem", "2M",
			       NULL };
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_status_reply st0, st;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;
	uint64_t h[NB], t0, ms;
	uint32_t s, s2, n;

	cc_start_with_delay(&d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", DELAY_MS);
	cc_publish_contents(d.sock, 2, NB, hash_of, TAG);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB); /* the whole pool */

	c = cc_connect_lib(d.sock, "unshare-park");
	t_ok(kvmm_region_create(c, &ro, &r));
	for (int b = 0; b < NB; b++)
		h[b] = hash_of(0, b);
	t_ok(kvmm_seq_open_prefix(r, h, NB, &s, &n));
	t_assert_eq(n, NB);
	t_assert(cc_seq_content_ok(r, s, NB, TAG, 4096));
	t_assert_eq(kvmm_seq_block_readonly(r, s, 1), 1);

	t_ok(td_status(&d, &st0));
	t0 = cc_now_ms();
	t_ok(kvmm_seq_block_unshare(r, s, 1));
	ms = cc_now_ms() - t0;
	t_ok(td_status(&d, &st));
	printf("unshare in a full pool: %llu ms (demotion copies %d ms)\n",
	       (unsigned long long)ms, DELAY_MS);
	t_assert(ms >= DELAY_MS * 8 / 10);
	t_assert_eq(st.cmds_parked, st0.cmds_parked + 1);
	t_assert_eq(st.cmds_parked_now, 0);
	t_assert_eq(kvmm_seq_block_readonly(r, s, 1), 0);
	t_assert_eq(kvmm_seq_block_readonly(r, s, 0), 1);
	t_assert(cc_seq_content_ok(r, s, NB, TAG, 4096));
	memset((void *)(uintptr_t)(kvmm_seq_k_ptr(r, s, 0) + CC_PAGE), 0xee,
	       CC_PAGE);
	t_ok(kvmm_tier_stats(c, &ts, sizeof(ts)));
	t_assert_eq(ts.blocks_unshared, 1);
	t_assert(ts.pressure_reclaims >= 1);

	/* the cache's copy of block 1 is content 0's still */
	t_ok(kvmm_seq_open_prefix(r, h, NB, &s2, &n));
	t_assert_eq(n, NB);
	t_assert(cc_seq_content_ok(r, s2, NB, TAG, 4096));
	kvmm_disconnect(c);
	td_stop_ok(&d);
	return 0;
}
