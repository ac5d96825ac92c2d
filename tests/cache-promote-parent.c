// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A block moving back up to the GPU tier whose only possible victim there
 * is its own parent stays cached where it is.  A real kvmmd (the default
 * asym policy, with its prefix rule; 2 cached GPU blocks; a host tier)
 * and real client processes:
 *   - content P (blocks P0, P1) is published; a holder publishes X (one
 *     block) and keeps its sequence open: P1, the leaf, goes down to the
 *     host tier; the GPU holds P0 (evictable: its child is not on the
 *     GPU) and X (in use);
 *   - a client pins P1 (plain) in the host tier;
 *   - a second publisher writes P from its own pages and publishes both
 *     blocks: P0 is a duplicate; P1 would be promoted by the publish,
 *     but on the GPU its parent P0 would stop being a leaf and nothing
 *     could make room.  P1 stays in the host tier: the publish counts 2
 *     duplicates, nothing is dropped or uncached, the pin is still there
 *     (unpin: 0), and a reader's open of P finds both blocks (P0 shared,
 *     P1 reloaded from the host tier), byte-identical.
 * Before the fix the publish moved P1 up (its host copy freed first),
 * make_room() found no victim and dropped it: not cached 1, a GPU drop,
 * the pin gone (unpin -ENOENT), the reader's open one block short.  A
 * restore (kc_restore_settle()) asks the same question.  Found by
 * tests/daemon-fuzz.c.
 */
#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 2

/* content 0 is P, content 1 is X (its first block) */
static const struct cc_contents contents = { .base = 0x9a7e00,
					     .tag0 = 60,
					     .nb = NB };

int main(void)
{
	const char *args[] = { "--cache-gpu-blocks", "2", "--host-mem", "2M",
			       "--pin-quota",	     "4", NULL };
	struct kvmm_block_publish_reply prep;
	struct kvmm_tier_stats_reply ts;
	uint32_t xpages[CC_PPB], pages[NB * CC_PPB];
	uint64_t hp[NB], hx[NB];
	struct kvmm_conn *pinner;
	struct kvmm_pin_opts o;
	struct cc holder, pub;
	struct td_daemon d;
	uint32_t xseq, seq;

	cc_start(&d, args);
	cc_content_hashes(&contents, 0, hp);
	cc_content_hashes(&contents, 1, hx);
	cc_write_content(d.sock, &contents, 0);

	cc_connect(&holder, d.sock);
	cc_region(&holder);
	xseq = cc_seq_open(&holder);
	cc_extend(&holder, xseq, CC_TPB, xpages);
	cc_fill(&holder, xpages, 1, contents.tag0 + 1);
	t_ok(cc_publish(&holder, xseq, 0, hx, 1, &prep));
	t_assert_eq(prep.published, 1);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2); /* P0, X */
	t_assert_eq(ts.tiers[1].used_blocks, 1); /* P1 */

	pinner = cc_connect_lib(d.sock, "pinner");
	t_ok(cc_pin(pinner, hp[1], 0, 0, 0, &o));
	t_assert_eq(o.tier, 1);

	cc_connect(&pub, d.sock);
	cc_region(&pub);
	seq = cc_seq_open(&pub);
	cc_extend(&pub, seq, NB * CC_TPB, pages);
	cc_fill(&pub, pages, NB, contents.tag0);
	t_ok(cc_publish(&pub, seq, 0, hp, NB, &prep));
	cc_seq_close(&pub, seq, pages, NB * CC_PPB);
	cc_disconnect(&pub);
	cc_settled_stats(d.sock, &ts);
	printf("publish of P again: published %u, duplicates %u, not cached %u; GPU %llu, host %llu blocks, drops %llu/%llu\n",
	       prep.published, prep.duplicates, prep.not_cached,
	       (unsigned long long)ts.tiers[0].used_blocks,
	       (unsigned long long)ts.tiers[1].used_blocks,
	       (unsigned long long)ts.tiers[0].drops,
	       (unsigned long long)ts.tiers[1].drops);
	t_assert_eq(prep.duplicates, NB);
	t_assert_eq(prep.not_cached, 0);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops, 0);
	t_assert_eq(ts.tiers[1].used_blocks, 1);
	t_ok(kvmm_block_unpin(pinner, hp[1]));
	cc_read_content(d.sock, &contents, 0, NB, -1);

	kvmm_disconnect(pinner);
	cc_seq_close(&holder, xseq, xpages, CC_PPB);
	cc_disconnect(&holder);
	cc_stop(&d);
	printf("promotion beside its parent ok\n");
	return T_PASS;
}
