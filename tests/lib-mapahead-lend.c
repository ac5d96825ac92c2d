// SPDX-License-Identifier: MIT
/*
 * Map-ahead never makes an extend fail: an extend short of blocks (the
 * uid's quota, or the pool) takes back the blocks libkvmm mapped ahead of
 * the process's other sequences (lend.c) and succeeds, where before it
 * failed -EDQUOT / -ENOMEM for blocks nobody used.
 *
 * Four sequences of 502 tokens (2 blocks each), each with 2 blocks mapped
 * ahead: 16 blocks, the quota (or the pool) exactly.  A third sequence
 * grows within its blocks (1 ahead left).  Then:
 *   - the first grows by 4 blocks, 2 of them past what it has mapped:
 *     the blocks ahead of ONE other sequence with 2 go back (the most
 *     first, no more than needed), the extend succeeds, every sequence
 *     keeps its length and its contents (a pattern in each token of
 *     every layer's K and V), and kvmmd holds 16 blocks still;
 *   - the sequence that lent grows past its blocks: the other one with 2
 *     ahead lends;
 *   - the third grows by 2 blocks when only 1 is free and nothing is
 *     ahead anywhere: a real shortage still fails, nothing changed.
 * Once against kvmmd --quota, once against a pool of 16 blocks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/lend.h"
#include "tests/lib/test.h"

#define NSEQ 4

static void check_all(struct kvmm_region *r, const uint32_t *s,
		      const uint32_t *len)
{
	for (int i = 0; i < NSEQ; i++) {
		t_assert_eq(kvmm_seq_len(r, s[i]), len[i]);
		t_assert_eq(ld_intact(r, s[i], len[i], i), len[i]);
	}
}

static void run(const struct td_daemon *d, int short_err)
{
	uint32_t s[NSEQ], len[NSEQ], lender, other;
	struct kvmm_status_reply ds;
	struct kvmm_stats st;
	struct kvmm_conn *c;
	struct kvmm_region *r;

	ld_connect(2, &c, &r);
	for (int i = 0; i < NSEQ; i++) {
		t_ok(kvmm_seq_open(r, &s[i]));
		len[i] = 2 * LD_TPB - 10;
		/* the socket extend maps its 2 blocks ahead itself */
		t_ok(kvmm_seq_extend(r, s[i], len[i]));
		ld_fill(r, s[i], 0, len[i], i);
		t_assert(ld_mapped(r, s[i], 3) && !ld_mapped(r, s[i], 4));
	}
	t_ok(td_status(d, &ds));
	t_assert_eq(ds.pages_allocated, 16 * LD_PPB);
	/* within its blocks: 1 ahead left (the thread, kicked, is short) */
	t_ok(kvmm_seq_extend(r, s[2], 3 * LD_TPB - 10));
	ld_fill(r, s[2], len[2], 3 * LD_TPB - 10, 2);
	len[2] = 3 * LD_TPB - 10;

	/* 6 blocks: 2 past its 4, none free */
	t_ok(kvmm_seq_extend(r, s[0], 6 * LD_TPB - 20));
	ld_fill(r, s[0], len[0], 6 * LD_TPB - 20, 0);
	len[0] = 6 * LD_TPB - 20;
	check_all(r, s, len);
	st = ld_stats(c);
	t_assert_eq(st.blocks_lent, 2);
	t_assert_eq(st.extends_lent, 1);
	t_assert(st.map_ahead_backoffs >= 1);
	/* one of the two with 2 ahead gave them, the one with 1 kept it */
	t_assert(ld_mapped(r, s[1], 3) != ld_mapped(r, s[3], 3));
	lender = ld_mapped(r, s[1], 3) ? s[3] : s[1];
	other = lender == s[1] ? s[3] : s[1];
	t_assert(!ld_mapped(r, lender, 2) && ld_mapped(r, lender, 1));
	t_assert(ld_mapped(r, s[2], 3));
	t_ok(td_status(d, &ds));
	t_assert_eq(ds.pages_allocated, 16 * LD_PPB);

	/* the lender grows past its blocks: the other lends its 2 */
	t_ok(kvmm_seq_extend(r, lender, 3 * LD_TPB));
	ld_fill(r, lender, len[lender == s[1] ? 1 : 3], 3 * LD_TPB,
		lender == s[1] ? 1 : 3);
	len[lender == s[1] ? 1 : 3] = 3 * LD_TPB;
	check_all(r, s, len);
	t_assert(!ld_mapped(r, other, 2) && ld_mapped(r, other, 1));
	st = ld_stats(c);
	t_assert_eq(st.blocks_lent, 4);
	t_assert_eq(st.extends_lent, 2);
	/* 6 + 3 + 2 + 4: one block free */
	t_ok(td_status(d, &ds));
	t_assert_eq(ds.pages_allocated, 15 * LD_PPB);

	/* 2 blocks past its 4, 1 free, nothing ahead elsewhere: short */
	t_assert_eq(kvmm_seq_extend(r, s[2], 6 * LD_TPB), short_err);
	check_all(r, s, len);
	st = ld_stats(c);
	t_assert_eq(st.blocks_lent, 4);
	t_assert_eq(st.extends_lent, 2);

	for (int i = 0; i < NSEQ; i++)
		t_ok(kvmm_seq_close(r, s[i]));
	kvmm_disconnect(c);
	t_ok(td_wait_idle(d, 5000, NULL));
}

int main(void)
{
	char quota[64];
	const char *qargs[] = { "--quota", quota, NULL };
	/* 64 pages of 64 KiB: 16 blocks */
	const char *pargs[] = { "--gpu-mem", "4M", NULL };
	struct td_daemon d;

	snprintf(quota, sizeof(quota), "%u=4M", (unsigned)getuid());
	td_start_ok(&d, qargs);
	run(&d, -EDQUOT);
	td_stop_ok(&d);

	td_start_ok(&d, pargs);
	run(&d, -ENOMEM);
	td_stop_ok(&d);
	return 0;
}
