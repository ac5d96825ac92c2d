// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * Copy-on-write of a block whose early-open reload has not landed
 * (SEQ_UNSHARE's -EBUSY, ABI 1.20), real kvmmd (host backend) whose
 * restore jobs each wait DELAY_MS, content 0 (8 blocks, written by a
 * writer process) on its NVMe tier.  The test process opens content 0
 * early through libkvmm (KVMM_PREFIX_OPEN_EARLY): the reply comes while
 * block 7 still loads, and
 *   - kvmm_seq_block_unshare() of block 7 is -EBUSY: the block stays
 *     read-only, no copy counted (TIER_STATS, kvmm_stats);
 *   - truncated into block 7 (by one token), an extend over it, which
 *     unshares the block first, is -EBUSY too, the length unchanged: what
 *     an engine meets if it recomputes a whole prompt's last token before
 *     waiting (tools/tinylm waits);
 *   - after kvmm_seq_wait_ready() for all 8 blocks (none failed), the
 *     extend unshares block 7 and kvmm_seq_block_unshare() block 6: both
 *     writable, every byte of the 8 blocks content 0's, two copies
 *     counted; a write into the copies leaves the cache's content intact
 *     for a reader process.
 * Skips (77) where O_DIRECT io_uring is impossible for the NVMe file.
 */
#include <errno.h>

#include "kvmm/kvmm.h"
#include "tests/cache-restore-common.h"

#define DELAY_MS 500
#define NVME_SLOTS 40
#define BLOCK7_END (CR_NB * CC_TPB)

static uint64_t unshared(struct kvmm_conn *c)
{
	struct kvmm_tier_stats_reply ts = { 0 };

	t_ok(kvmm_tier_stats(c, &ts, sizeof(ts)));
	return ts.blocks_unshared;
}

static uint64_t own_copies(struct kvmm_conn *c)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	t_ok(kvmm_get_stats(c, &ks));
	return ks.blocks_unshared;
}

int main(void)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "unshare-busy",
					.map_ahead_set = 1 };
	struct kvmm_prefix_opts po = { .size = sizeof(po) };
	struct kvmm_tier_stats_reply ts0;
	uint8_t actions[CR_NB];
	uint32_t failed[CR_NB], seq, nb = 0, pending = 0, pending7 = 0;
	uint64_t h[CR_NB], copies0;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct cr_env env;

	/* every block reloaded: no restore plan recomputes one */
	cr_start_args(&env, NVME_SLOTS, DELAY_MS, "--restore-mode", "reload");
	/* contents 0 and 1 end on NVMe */
	cr_fill_tiers(&env, &ts0);

	co.socket_path = env.d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	copies0 = unshared(c);
	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(0, b);
	po.actions = actions;
	po.flags = KVMM_PREFIX_OPEN_EARLY;
	t_ok(kvmm_seq_open_prefix_opts(r, h, CR_NB, &seq, &nb, &po));
	printf("early open: %u blocks, %u shared, %u from host, %u from NVMe\n",
	       nb, po.shared, po.reloaded_host, po.reloaded_nvme);
	t_assert_eq(nb, CR_NB);
	t_assert_eq(po.reloaded_host + po.reloaded_nvme, CR_NB);

	/* block 7 has not landed: its restore waits DELAY_MS */
	t_assert_eq(kvmm_seq_block_unshare(r, seq, CR_NB - 1), -EBUSY);
	t_assert_eq(kvmm_seq_block_readonly(r, seq, CR_NB - 1), 1);
	t_ok(kvmm_seq_truncate(r, seq, BLOCK7_END - 1));
	t_assert_eq(kvmm_seq_extend(r, seq, BLOCK7_END), -EBUSY);
	t_assert_eq(kvmm_seq_len(r, seq), BLOCK7_END - 1);
	t_assert_eq(kvmm_seq_block_readonly(r, seq, CR_NB - 1), 1);
	/* still loading after both answers: the -EBUSY was the reload's */
	t_assert_eq(kvmm_seq_wait_ready(r, seq, CR_NB, KVMM_WAIT_READY_POLL,
					failed, CR_NB, &pending),
		    0);
	t_assert_eq(kvmm_seq_wait_ready(r, seq, CR_NB - 1, KVMM_WAIT_READY_POLL,
					failed, CR_NB, &pending7),
		    0);
	printf("after the -EBUSY answers: %u of 8 blocks still loading\n",
	       pending);
	t_assert(pending > pending7);
	t_assert_eq(unshared(c), copies0);
	t_assert_eq(own_copies(c), 0);

	/* once landed, both ways copy */
	t_assert_eq(kvmm_seq_wait_ready(r, seq, CR_NB, 0, failed, CR_NB, NULL),
		    0);
	t_ok(kvmm_seq_extend(r, seq, BLOCK7_END));
	t_assert_eq(kvmm_seq_len(r, seq), BLOCK7_END);
	t_assert_eq(kvmm_seq_block_readonly(r, seq, CR_NB - 1), 0);
	t_ok(kvmm_seq_block_unshare(r, seq, CR_NB - 2));
	t_assert_eq(kvmm_seq_block_readonly(r, seq, CR_NB - 2), 0);
	t_assert_eq(kvmm_seq_block_readonly(r, seq, 0), 1);
	t_assert(cc_seq_content_ok(r, seq, CR_NB, 200, 1));
	t_assert_eq(unshared(c), copies0 + 2);
	t_assert_eq(own_copies(c), 2);

	/* the copies are this sequence's: the cache's bytes stay */
	for (uint32_t l = 0; l < CC_L; l++) {
		memset((void *)(uintptr_t)(kvmm_seq_k_ptr(r, seq, l) +
					   (uint64_t)(CR_NB - 1) * CC_PAGE),
		       0xee, CC_PAGE);
		memset((void *)(uintptr_t)(kvmm_seq_v_ptr(r, seq, l) +
					   (uint64_t)(CR_NB - 2) * CC_PAGE),
		       0xee, CC_PAGE);
	}
	t_assert(!cc_seq_content_ok(r, seq, CR_NB, 200, 1));
	cr_check_content(env.d.sock, 0);

	t_ok(kvmm_seq_close(r, seq));
	kvmm_disconnect(c);
	cr_stop(&env);
	printf("ok: -EBUSY while block 7 loaded (unshare and extend), then two copies with content 0's bytes\n");
	return 0;
}
