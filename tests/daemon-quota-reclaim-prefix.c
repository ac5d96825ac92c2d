// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A quota reclaim counts only the blocks the policy can move: under the
 * prefix rule a parent leaves the GPU only after its cached children
 * there, and a child that is another uid's (pinned for the reclaim) or in
 * use never goes, so neither does its chain above it.  The count of the
 * uid's idle blocks (kc_quota_scan()) took every idle one: it said
 * "enough", the policy moved what it could, and the check still failed:
 * a block was dropped for an -EDQUOT, where the design is that nothing
 * moves when there is not enough.
 *
 * kvmmd (asym: the prefix rule; 16 GPU blocks, no host tier: victims are
 * dropped) and processes of uid W, quota 2M (8 blocks):
 *   - W publishes chain P (7 blocks) and block X (no parent): its quota;
 *   - root opens P and publishes C, a child of P[6]: P's chain cannot
 *     leave the GPU while C stays (another uid's block);
 *   - W extends 2 blocks at once: only X could go, 1 block of the 2
 *     needed: -EDQUOT and nothing moved (before: X dropped,
 *     quota_reclaims 1, and -EDQUOT all the same);
 *   - W extends 1 block: X goes, the extend is served.
 * Needs root (processes of another uid).
 */
#include "tests/quota-reclaim-common.h"

#define UID_W 63321

static const char *const args[] = { "--socket-mode",
				    "0666",
				    "--cache-scope",
				    "shared",
				    "--cache-policy",
				    "asym",
				    "--cache-gpu-blocks",
				    "16",
				    "--quota",
				    "63321=2M",
				    NULL };

/* P[0..6], then C (P[6]'s child) */
static uint64_t H[8], X[1];

/* A root process opens P and publishes C after it. */
static void publish_child(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t ids[CC_MAX_PAGES];
		struct kvmm_block_publish_reply rep;
		struct kvmm_prefix_open_reply pr;
		struct cc c;

		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, H, 7, &pr, ids);
		t_assert_eq(pr.nr_blocks, 7);
		cc_extend(&c, pr.seq_id, 8 * CC_TPB, ids);
		t_ok(cc_publish(&c, pr.seq_id, 7, &H[7], 1, &rep));
		t_assert_eq(rep.published, 1);
		cc_seq_close(&c, pr.seq_id, ids, 8 * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* A process of W extends a new sequence to nb blocks in one call. */
static int extend_as_w(const char *sock, uint32_t nb)
{
	int fd[2], r = 0;
	pid_t p;

	t_ok(pipe(fd));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t ids[CC_MAX_PAGES];
		struct cc c;
		uint32_t seq;

		cu_become(UID_W, UID_W);
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		r = cc_try_extend(&c, seq, nb * CC_TPB, ids);
		t_assert_eq(write(fd[1], &r, sizeof(r)), sizeof(r));
		cc_seq_close(&c, seq, ids, r ? 0 : nb * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(read(fd[0], &r, sizeof(r)), sizeof(r));
	close(fd[0]);
	close(fd[1]);
	return r;
}

static void expect(const struct td_daemon *d, uint64_t gpu, uint64_t drops,
		   uint64_t quota_reclaims)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(d->sock, &ts);
	printf("GPU %llu blocks, %llu dropped, quota reclaims %llu\n",
	       (unsigned long long)ts.tiers[0].used_blocks,
	       (unsigned long long)ts.tiers[0].drops,
	       (unsigned long long)ts.quota_reclaims);
	t_assert_eq(ts.tiers[0].used_blocks, gpu);
	t_assert_eq(ts.tiers[0].drops, drops);
	t_assert_eq(ts.quota_reclaims, quota_reclaims);
}

int main(void)
{
	struct td_daemon d;

	if (geteuid() != 0)
		t_skip("needs root, to run processes of other uids");
	for (int i = 0; i < 8; i++)
		H[i] = 0x7f560000 + i + 1;
	X[0] = 0x7f570001;
	cu_start(&d, args);

	cu_publish_as(d.sock, UID_W, UID_W, H, 7, 1, 7);
	cu_publish_as(d.sock, UID_W, UID_W, X, 1, 2, 1);
	publish_child(d.sock);
	expect(&d, 9, 0, 0);
	qr_expect_quota(&d, UID_W, QR_NB * CC_PPB, QR_NB * CC_PPB);

	t_assert_eq(extend_as_w(d.sock, 2), -EDQUOT);
	expect(&d, 9, 0, 0); /* nothing moved: X is still cached */
	qr_expect_quota(&d, UID_W, QR_NB * CC_PPB, QR_NB * CC_PPB);

	t_ok(extend_as_w(d.sock, 1));
	expect(&d, 8, 1, 1);
	qr_expect_quota(&d, UID_W, (QR_NB - 1) * CC_PPB, (QR_NB - 1) * CC_PPB);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
