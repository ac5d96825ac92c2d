// SPDX-License-Identifier: MIT
/*
 * Per-uid quotas: with --quota UID=512K (8 pages of 64 KiB) a client of
 * that uid can back 2 blocks of 4 pages and gets -EDQUOT for a third;
 * ADMIN_SET_QUOTA raises the limit at run time; closing gives the quota
 * back.  A full pool answers -ENOMEM the same way.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.map_ahead_set = 1 };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 2,
				       .kv_heads = 2,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 4,
				       .max_tokens = 8192 };
	struct kvmm_admin_quota q = { .size = sizeof(q) };
	char quota[64];
	const char *args[] = { "--quota", quota, "--gpu-mem", "2M", NULL };
	struct td_daemon d;
	struct kvmm_conn *c, *admin;
	struct kvmm_region *r;
	uint32_t s, s2;
	int err;

	snprintf(quota, sizeof(quota), "%u=512K", (unsigned)getuid());
	err = td_start(&d, args);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, 512)); /* 2 blocks = 8 pages */
	t_assert_eq(kvmm_seq_extend(r, s, 513), -EDQUOT);
	t_assert_eq(kvmm_seq_len(r, s), 512);

	t_ok(kc_connect_admin(d.sock, &admin));
	q.uid = getuid();
	q.bytes = 16 << 20;
	t_ok(kc_request(admin, KVMM_CMD_ADMIN_SET_QUOTA, &q, sizeof(q), NULL, 0,
			NULL));
	t_ok(kvmm_seq_extend(r, s, 513));
	/* The pool holds 32 pages: 3 blocks used, 5 more fit. */
	t_ok(kvmm_seq_open(r, &s2));
	t_ok(kvmm_seq_extend(r, s2, 5 * 256));
	t_assert_eq(kvmm_seq_extend(r, s2, 5 * 256 + 1), -ENOMEM);
	t_ok(kvmm_seq_close(r, s2));
	t_ok(kvmm_seq_extend(r, s, 2000));

	/* Back to a small quota: closing returns what was charged. */
	q.bytes = 512 << 10;
	t_ok(kc_request(admin, KVMM_CMD_ADMIN_SET_QUOTA, &q, sizeof(q), NULL, 0,
			NULL));
	t_ok(kvmm_seq_close(r, s));
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, 512));
	t_assert_eq(kvmm_seq_extend(r, s, 513), -EDQUOT);
	kvmm_disconnect(admin);
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, NULL));
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
