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
#include "tests/cache-uids.h"

#define UID_R 63302
#define NB 8 /* a quota's worth of blocks */

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

/* A process of uid extends one new sequence block by block: `fit` blocks
 * must fit, the next must be -EDQUOT. */
static void extend_as(const char *sock, uid_t uid, uint32_t fit)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t ids[CC_MAX_PAGES];
		struct cc c;
		uint32_t seq;

		cu_become(uid, uid);
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		for (uint32_t b = 1; b <= fit; b++) {
			int r = cc_try_extend(&c, seq, b * CC_TPB, ids);

			if (r)
				t_fail("uid %u: extend to %u blocks: %s",
				       (unsigned)uid, b, strerror(-r));
		}
		t_assert_eq(cc_try_extend(&c, seq, (fit + 1) * CC_TPB, ids),
			    -EDQUOT);
		cc_seq_close(&c, seq, ids, fit * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* A process of uid (0: this one's, no quota) opens chain h: nb blocks,
 * from_gpu of them from the GPU, holding tag's bytes; closed. */
static void open_as(const char *sock, uid_t uid, const uint64_t *h, uint32_t nb,
		    uint32_t from_gpu, uint64_t tag)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t ids[CC_MAX_PAGES];
		struct kvmm_prefix_open_reply pr;
		struct cc c;

		if (uid)
			cu_become(uid, uid);
		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, NB, &pr, ids);
		t_assert_eq(pr.nr_blocks, nb);
		t_assert_eq(pr.from_gpu, from_gpu);
		cc_check(&c, ids, nb, tag);
		cc_seq_close(&c, pr.seq_id, ids, nb * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* The tiers' blocks, and the blocks moved down for quotas so far. */
static void expect_tiers(const struct td_daemon *d, uint64_t gpu, uint64_t host,
			 uint64_t quota_reclaims)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, gpu);
	t_assert_eq(ts.tiers[1].used_blocks, host);
	t_assert_eq(ts.quota_reclaims, quota_reclaims);
}

static void expect_quota(const struct td_daemon *d, uint32_t uid, uint64_t used,
			 uint64_t cached)
{
	struct kvmm_tenants_reply *r = cu_tenants(d->sock);
	const struct kvmm_tenant_info *t = cu_tenant(r, uid);

	t_assert_eq(t->quota_pages, NB * CC_PPB);
	t_assert_eq(t->quota_used_pages, used);
	t_assert_eq(t->quota_cached_pages, cached);
	free(r);
}

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
	expect_tiers(&d, 2 * NB, NB, 0);

	/* R reads X: 8 restores charged to R, kept on the GPU once closed */
	open_as(d.sock, UID_R, X, NB, 0, 1);
	expect_tiers(&d, 2 * NB, NB, 0);
	expect_quota(&d, UID_R, NB * CC_PPB, NB * CC_PPB);
	extend_as(d.sock, UID_R, NB); /* the 1st block was -EDQUOT */
	expect_tiers(&d, NB, 2 * NB, NB);
	expect_quota(&d, UID_R, 0, 0);

	/* only R's went: Z is on the GPU, X whole on the host */
	open_as(d.sock, 0, Z, NB, NB, 3);
	open_as(d.sock, 0, X, NB, 0, 1);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
