// SPDX-License-Identifier: MIT
/*
 * A region whose (layer, K|V) range would pass 2^64 bytes is refused
 * with -EINVAL: kvmmd with 1 GiB host pages, tokens of a whole page
 * (4096 heads x 65536 dims x 4 bytes), 2^24 tokens (2^24 blocks, a
 * sequence stride of 2^54 bytes) and 65536 sequences (2^70 bytes; it
 * wrapped to 0 before) or 1024 (exactly 2^64), or 4765 sequences of
 * 3605429 blocks (2^64 + 2^30: it wrapped to one page, which the client
 * reserved as if it held every sequence); 1023 sequences fit in 64 bits, and are answered by the
 * daemon (the client then cannot reserve 2^63 bytes: -ENOMEM); a small
 * region of the same daemon works as ever.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

int main(void)
{
	static const char *const args[] = { "--page-size", "1G", "--gpu-mem",
					    "2G", NULL };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 1,
				       .kv_heads = 4096,
				       .head_dim = 65536,
				       .dtype_bytes = 4,
				       .max_seqs = 65536,
				       .max_tokens = 1u << 24 };
	struct kvmm_status_reply st;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;

	td_start_ok(&d, args);
	t_ok(kvmm_connect(NULL, &c));
	t_assert_eq(kvmm_region_create(c, &ro, &r), -EINVAL);
	/* 4765 x 3605429 blocks is 2^34 + 1: the range wrapped to one
	 * page, which the client reserved, and the region "worked" */
	ro.max_seqs = 4765;
	ro.max_tokens = 3605429;
	t_assert_eq(kvmm_region_create(c, &ro, &r), -EINVAL);
	ro.max_tokens = 1u << 24;
	ro.max_seqs = 1024;
	t_assert_eq(kvmm_region_create(c, &ro, &r), -EINVAL);
	ro.max_seqs = 1023;
	t_assert_eq(kvmm_region_create(c, &ro, &r), -ENOMEM);
	ro.max_seqs = 4;
	ro.max_tokens = 4;
	t_ok(kvmm_region_create(c, &ro, &r));
	kvmm_region_destroy(r);
	printf("a range past 2^64 bytes: -EINVAL\n");
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, &st));
	td_stop_ok(&d);
	return T_PASS;
}
