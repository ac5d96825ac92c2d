// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * Reading other tenants' blocks does not use up a uid's quota for as
 * long as the cache keeps them.  A restore is charged to the reader (what
 * it holds must count against its quota, or opens would pin pages past
 * it), and the blocks it brought onto the GPU stay charged to it once its
 * sequence closed; a check over its quota now moves those idle blocks
 * down first.  kvmmd: shared scope, lru, 16 GPU blocks, a host tier of 32;
 * uid R has a quota of 2M (8 blocks of 4 pages), root none.
 *
 * Root publishes chains X, Y and Z (8 blocks each): X goes to the host.
 * A process of R opens X (8 restores, charged to R; Y goes to the host),
 * closes it and hangs up; a new process of R extends 1 block: it got
 * -EDQUOT, holding nothing (a review's reproducer).  Now one of X's blocks
 * goes down and the extend is served; 8 fit in all, a 9th is -EDQUOT.
 * Only R's blocks go: Z, less recently used than X under lru, stays on
 * the GPU (root opens it from there), and X comes back byte-identical.
 * ADMIN_TENANTS shows R's charge while the cache keeps X and after.
 * Needs root (processes of another uid).
 */
#include "tests/quota-reclaim-common.h"

#define UID_R 63302
#define NB QR_NB

static const char *const args[] = { "--socket-mode",
				    "0666",
				    "--cache-scope",
				    "shared",
				    "--cache-policy",
				    "lru",
				    "--cache-gpu-blocks",
				    "16",
				    "--host-mem",
				    "8M",
				    "--quota",
				    "63302=2M",
				    NULL };

static uint64_t X[NB], Y[NB], Z[NB];

int main(void)
{
	struct td_daemon d;

	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	for (int i = 0; i < NB; i++) {
		X[i] = 0x7f610000 + i + 1;
		Y[i] = 0x7f620000 + i + 1;
		Z[i] = 0x7f630000 + i + 1;
	}
	cu_start(&d, args);
	t_assert_eq(cc_publish_content(d.sock, X, NB, 1, NULL), 0);
	t_assert_eq(cc_publish_content(d.sock, Y, NB, 2, NULL), 0);
	t_assert_eq(cc_publish_content(d.sock, Z, NB, 3, NULL), 0);
	qr_expect_tiers(&d, 2 * NB, NB, 0);

	/* R reads X: 8 restores charged to R, kept on the GPU once closed */
	qr_open_as(d.sock, UID_R, X, NB, 0, 1);
	qr_expect_tiers(&d, 2 * NB, NB, 0);
	qr_expect_quota(&d, UID_R, NB * CC_PPB, NB * CC_PPB);
	qr_extend_as(d.sock, UID_R, NB); /* the 1st block was -EDQUOT */
	qr_expect_tiers(&d, NB, 2 * NB, NB);
	qr_expect_quota(&d, UID_R, 0, 0);

	/* only R's went: Z is on the GPU, X whole on the host */
	qr_open_as(d.sock, 0, Z, NB, NB, 3);
	qr_open_as(d.sock, 0, X, NB, 0, 1);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
