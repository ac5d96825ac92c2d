// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * An extend whose reply backs again a block the daemon revoked (the
 * client had not applied the revocation yet: the block lies below what
 * the client counted as mapped) and fails to map it (the map, or the
 * read-write access of its pages, fails in the backend: the vmm fault
 * injector around the connection's backend) leaves the sequence mapped
 * only up to that block: a later extend over it is never answered 0 over
 * unmapped pages (it goes to the daemon and says -ENODATA, as for any
 * block a failed reply gave), and truncating to the length and extending
 * again maps the block, whose bytes can then be written and read.
 * A real kvmmd, host backend; as tests/daemon-revoke-extend-race.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"
#include "vmm/vmm.h"

#define TPB 256 /* 64 KiB / (2 heads * 64 dim * 2 bytes) */
#define PPB 4 /* 2 layers, K and V */

/* Revoke the sequence's blocks from first on, through an admin session;
 * the client does not look at its revocation ring. */
static void revoke(struct td_daemon *d, struct kvmm_conn *c,
		   struct kvmm_region *r, uint32_t seq, uint32_t first)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };

	t_ok(kvmm_get_stats(c, &ks));
	t_ok(ar_revoke(d->sock, ks.session_id, r->id, seq, first));
}

static void one_case(struct td_daemon *d, struct kvmm_conn *c,
		     struct vmm_backend *w, struct kvmm_region *r,
		     enum vmm_op op, unsigned int fails)
{
	uint32_t ids[PPB], seq;
	unsigned char *k0;
	int err;

	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 2 * TPB));
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x5a, 2 * 65536); /* layer 0 K of blocks 0 and 1 */
	revoke(d, c, r, seq, 1);

	/* the reply's first map (block 1's first page), or its first
	 * run's access and that page's own, fails */
	vmm_fault_arm_count(w, op, 1, fails, -EIO);
	err = kvmm_seq_extend(r, seq, 3 * TPB);
	vmm_fault_arm(w, op, 0, 0);
	printf("%s failing: extend over the revoked block: %s\n",
	       vmm_op_string(op), kvmm_strerror(err));
	t_assert_eq(err, -EIO);
	t_assert_eq(kvmm_seq_len(r, seq), TPB); /* block 1 is lost */
	t_assert_eq(kvmm_seq_block_pages(r, seq, 1, ids, PPB), -ENODATA);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, ids, PPB), PPB);

	/* the same extend again, and one back to the old length: never 0
	 * while block 1 is unmapped here */
	err = kvmm_seq_extend(r, seq, 2 * TPB);
	printf("%s failing: extend to 2 blocks again: %s\n", vmm_op_string(op),
	       kvmm_strerror(err));
	t_assert(err != 0 || kvmm_seq_block_pages(r, seq, 1, ids, PPB) == PPB);
	t_assert_eq(err, -ENODATA);
	t_assert_eq(kvmm_seq_len(r, seq), TPB);

	/* repaired as any block a failed reply gave */
	kvmm_process_revocations(c);
	t_ok(kvmm_seq_truncate(r, seq, (uint32_t)kvmm_seq_len(r, seq)));
	t_ok(kvmm_seq_extend(r, seq, 3 * TPB));
	t_assert_eq(kvmm_seq_block_pages(r, seq, 1, ids, PPB), PPB);
	k0[65536 + 100] = 0xa5;
	t_assert_eq(k0[65536 + 100], 0xa5);
	t_assert_eq(k0[100], 0x5a); /* block 0 kept its contents */
	t_ok(kvmm_seq_close(r, seq));
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "remap-failure",
					.map_ahead_set = 1 }; /* no map-ahead */
	struct kvmm_region_opts ro = tr_small_region;
	struct kvmm_status_reply st;
	struct vmm_backend *w;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;

	td_start_ok(&d, NULL);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(vmm_fault_wrap(c->backend, &w));
	c->backend = w;
	t_ok(kvmm_region_create(c, &ro, &r));

	one_case(&d, c, w, r, VMM_OP_MAP, 1);
	/* the run's call and block 1's first page alone */
	one_case(&d, c, w, r, VMM_OP_SET_ACCESS, 2);

	kvmm_region_destroy(r);
	kvmm_disconnect(c);
	t_ok(td_wait_idle(&d, 2000, &st));
	td_stop_ok(&d);
	return T_PASS;
}
