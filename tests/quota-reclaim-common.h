/* SPDX-License-Identifier: MIT */
/*
 * What the quota reclaim tests (tests/daemon-quota-reclaim*.c) share:
 * processes of a uid that extend to their quota, by one block, or open a
 * chain of QR_NB blocks, and the tiers' and the uid's quota counts
 * expected.  static inline: a test that uses some of them builds without
 * unused-function warnings.
 */
#ifndef KVMM_TESTS_QUOTA_RECLAIM_COMMON_H
#define KVMM_TESTS_QUOTA_RECLAIM_COMMON_H

#include "tests/cache-uids.h"

#define QR_NB 8 /* a quota's worth of blocks */

/* A process of uid extends one new sequence block by block: `fit` blocks
 * must fit; with then_full, the next must be -EDQUOT. */
static inline void qr_extend_blocks_as(const char *sock, uid_t uid,
				       uint32_t fit, bool then_full)
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
		if (then_full)
			t_assert_eq(cc_try_extend(&c, seq, (fit + 1) * CC_TPB,
						  ids),
				    -EDQUOT);
		cc_seq_close(&c, seq, ids, fit * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* A process of uid extends to its quota: `fit` blocks must fit, the next
 * must be -EDQUOT. */
static inline void qr_extend_as(const char *sock, uid_t uid, uint32_t fit)
{
	qr_extend_blocks_as(sock, uid, fit, true);
}

/* A process of uid (0: this one's, no quota) opens chain h: nb blocks,
 * from_gpu of them from the GPU, holding tag's bytes; closed. */
static inline void qr_open_as(const char *sock, uid_t uid, const uint64_t *h,
			      uint32_t nb, uint32_t from_gpu, uint64_t tag)
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
		cc_prefix(&c, h, QR_NB, &pr, ids);
		t_assert_eq(pr.nr_blocks, nb);
		t_assert_eq(pr.from_gpu, from_gpu);
		cc_check(&c, ids, nb, tag);
		cc_seq_close(&c, pr.seq_id, ids, nb * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* A process of uid extends one new sequence by one block, which must fit
 * (over its quota, the reclaim must make the room). */
static inline void qr_extend_one_as(const char *sock, uid_t uid)
{
	qr_extend_blocks_as(sock, uid, 1, false);
}

/* The tiers' blocks, and the blocks moved down for quotas so far. */
static inline void qr_expect_tiers(const struct td_daemon *d, uint64_t gpu,
				   uint64_t host, uint64_t quota_reclaims)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(d->sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, gpu);
	t_assert_eq(ts.tiers[1].used_blocks, host);
	t_assert_eq(ts.quota_reclaims, quota_reclaims);
}

static inline void qr_expect_quota(const struct td_daemon *d, uint32_t uid,
				   uint64_t used, uint64_t cached)
{
	struct kvmm_tenants_reply *r = cu_tenants(d->sock);
	const struct kvmm_tenant_info *t = cu_tenant(r, uid);

	t_assert_eq(t->quota_pages, QR_NB * CC_PPB);
	t_assert_eq(t->quota_used_pages, used);
	t_assert_eq(t->quota_cached_pages, cached);
	free(r);
}

#endif
