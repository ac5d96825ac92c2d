// SPDX-License-Identifier: MIT
/*
 * kvmmd plans an open with the overlap only when the client can use it.
 * 40 blocks of one prefix sit on the host tier (kvmmd --restore-mode
 * plan, lru, GPU tier of 2 blocks).  An open with KVMM_PREFIX_OPEN_EARLY
 * gets its first blocks to recompute (the head, computed while the rest
 * is copied: the plan's overlap; restore_plan.h) and the rest reloaded;
 * the same open without the flag, whose reply waits for every reload
 * before the client can compute anything, gets every block reloaded (the
 * serial plan: a recomputed head would only add to the copies).  Before,
 * both got the overlapped plan.  The same holds for segmented opens
 * (KVMM_PREFIX_OPEN_SEGMENTS, planned with MSA's greedy): an early one
 * gets host blocks to recompute while the queue brings the others, a
 * plain one gets every block reloaded; before, a plain segmented open
 * still got the overlapped plan and recomputed blocks it could only
 * compute after every reload.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "kvmm/uapi.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define TPB 256
#define NB 40

static struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = 2,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 4,
	.max_tokens = 16384,
	.salt = 9,
};

static uint64_t hashes[NB];

static void publish(struct kvmm_region *r, const uint64_t *h, uint32_t n)
{
	uint32_t s;

	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, n * TPB + 1));
	for (uint32_t l = 0; l < 2; l++)
		memset((void *)kvmm_seq_k_ptr(r, s, l), 0x40 + l,
		       (size_t)n * TPB * 256);
	t_assert_eq(kvmm_block_publish(r, s, 0, n, 0, h), (int)n);
	t_ok(kvmm_seq_close(r, s));
}

/* An open of the 40 blocks with flags; its actions; closed again. */
static void open_acts(struct kvmm_region *r, uint32_t flags, uint8_t *acts,
		      struct kvmm_prefix_opts *po)
{
	uint32_t s, n = 0, failed[NB];
	int err;

	memset(po, 0, sizeof(*po));
	po->size = sizeof(*po);
	po->flags = flags;
	po->actions = acts;
	/* 0 is no action: an action this open did not write is not taken
	 * for the one an earlier open wrote there */
	memset(acts, 0, NB);
	t_ok(kvmm_seq_open_prefix_opts(r, hashes, NB, &s, &n, po));
	t_assert_eq(n, NB);
	if (flags & KVMM_PREFIX_OPEN_EARLY) {
		err = kvmm_seq_wait_ready(r, s, NB, 0, failed, NB, NULL);
		t_assert_eq(err, 0);
	}
	t_ok(kvmm_seq_close(r, s));
}

static uint32_t host_blocks(const struct td_daemon *d)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "st" };
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *c;

	t_ok(kvmm_connect(&co, &c));
	t_ok(kc_request(c, KVMM_CMD_TIER_STATS, NULL, 0, &ts, sizeof(ts),
			NULL));
	kvmm_disconnect(c);
	return (uint32_t)ts.tiers[1].used_blocks;
}

int main(void)
{
	const char *args[] = { "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "32M",
			       "--restore-mode",
			       "plan",
			       "--cache-policy",
			       "lru",
			       NULL };
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "plan" };
	struct kvmm_prefix_opts po;
	uint8_t acts[NB];
	uint64_t other[2] = { 0x9001, 0x9002 };
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	uint32_t head = 0;
	int tries;

	for (int i = 0; i < NB; i++)
		hashes[i] = 0x7000 + i;
	t_ok(td_start(&d, args));
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	publish(r, hashes, NB);
	publish(r, other, 2); /* the last two of the 40 go down too */
	for (tries = 0; tries < 500 && host_blocks(&d) < NB; tries++)
		usleep(10000);
	t_assert_eq(host_blocks(&d), NB);

	/* early: the head is recomputed while the rest is copied */
	open_acts(r, KVMM_PREFIX_OPEN_EARLY, acts, &po);
	while (head < NB && acts[head] == KVMM_BLOCK_RECOMPUTE)
		head++;
	printf("early open: %u of %d blocks recomputed (the head), %u reloaded from host\n",
	       po.recompute, NB, po.reloaded_host);
	t_assert(head >= 1);
	t_assert_eq(po.recompute, head); /* a head, nothing after it */
	t_assert_eq(po.reloaded_host + po.shared + po.recompute, NB);

	/* without the flag the reply waits for the reloads: all reloaded
	 * (or shared: the open above left a few on the GPU) */
	open_acts(r, 0, acts, &po);
	printf("plain open: %u recomputed, %u reloaded from host, %u shared\n",
	       po.recompute, po.reloaded_host, po.shared);
	t_assert_eq(po.recompute, 0);
	t_assert_eq(po.reloaded_host + po.shared, NB);

	/* segmented and early: host blocks recomputed during the copies */
	open_acts(r, KVMM_PREFIX_OPEN_SEGMENTS | KVMM_PREFIX_OPEN_EARLY, acts,
		  &po);
	printf("early segmented open: %u recomputed, %u reloaded from host, %u shared\n",
	       po.recompute, po.reloaded_host, po.shared);
	t_assert(po.recompute >= 1);
	t_assert_eq(po.reloaded_host + po.shared + po.recompute, NB);

	/* segmented, not early: serial, every block reloaded or shared */
	open_acts(r, KVMM_PREFIX_OPEN_SEGMENTS, acts, &po);
	printf("plain segmented open: %u recomputed, %u reloaded from host, %u shared\n",
	       po.recompute, po.reloaded_host, po.shared);
	t_assert_eq(po.recompute, 0);
	t_assert_eq(po.reloaded_host + po.shared, NB);

	kvmm_region_destroy(r);
	kvmm_disconnect(c);
	t_ok(td_stop(&d));
	return 0;
}
