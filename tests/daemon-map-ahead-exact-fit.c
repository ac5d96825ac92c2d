// SPDX-License-Identifier: MIT
/*
 * Map-ahead is best effort: an extend that fits the uid's quota or the
 * pool exactly succeeds with map-ahead on, the blocks ahead simply not
 * mapped.  libkvmm asked for the needed blocks and the ones ahead in one
 * all-or-nothing SEQ_EXTEND, and answered -EDQUOT / -ENOMEM for an extend
 * the quota or the pool held exactly.
 *
 * Blocks of 4 pages of 64 KiB (2 layers, K and V), 256 tokens each.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

static const struct kvmm_region_opts ro = {
	.size = sizeof(ro),
	.layers = 2,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 4,
	.max_tokens = 8192,
};

/*
 * One sequence grown to `blocks` blocks in one extend (the daemon holds
 * exactly that many), then one token more: `full`.  ahead < 0: libkvmm's
 * default map-ahead.
 */
static void exact_fit(const struct td_daemon *d, int ahead, uint32_t blocks,
		      int full)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;

	if (ahead >= 0) {
		co.map_ahead_set = 1;
		co.map_ahead_blocks = ahead;
	}
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, blocks * 256));
	t_assert_eq(kvmm_seq_len(r, s), blocks * 256);
	/* every block mapped here and writable */
	((char *)kvmm_seq_v_ptr(r, s, 1))[blocks * 256 * 256 - 1] = 1;
	t_assert_eq(kvmm_seq_extend(r, s, blocks * 256 + 1), full);
	t_assert_eq(kvmm_seq_len(r, s), blocks * 256);
	t_ok(td_status(d, &st));
	t_assert_eq(st.pages_allocated, blocks * 4);
	t_ok(kvmm_seq_close(r, s));
	kvmm_disconnect(c);
	t_ok(td_wait_idle(d, 2000, NULL));
}

int main(void)
{
	char quota[64];
	const char *qargs[] = { "--quota", quota, NULL };
	const char *pargs[] = { "--gpu-mem", "1M", NULL };
	struct td_daemon d;
	int err;

	/* 512 KiB: 8 pages, 2 blocks */
	snprintf(quota, sizeof(quota), "%u=512K", (unsigned)getuid());
	err = td_start(&d, qargs);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	exact_fit(&d, -1, 2, -EDQUOT);
	exact_fit(&d, 4, 2, -EDQUOT);
	exact_fit(&d, 0, 2, -EDQUOT);
	t_assert_eq(td_stop(&d), 0);

	/* 1 MiB: 16 pages, 4 blocks */
	err = td_start(&d, pargs);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	exact_fit(&d, -1, 4, -ENOMEM);
	exact_fit(&d, 4, 4, -ENOMEM);
	exact_fit(&d, 0, 4, -ENOMEM);
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
