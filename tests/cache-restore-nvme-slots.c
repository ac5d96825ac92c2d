// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * An NVMe slot a restore is reading goes back to the tier whatever
 * happens to its block while the read is in flight: none is left taken
 * with no block to free it (tier_nvme_free() refuses a slot with a read
 * in flight, -EBUSY, or one not READY, -ENOENT, and kc_release_lower()
 * used to ignore that).  A real kvmmd (lru, 8 GPU blocks, 6 host, an NVMe
 * file of 40 slots) whose restore jobs each wait DELAY_MS; each round
 * writes 4 contents of 8 blocks (18 end on NVMe), has a client open the
 * first one (8 restores from NVMe, a few seconds of them in flight) and,
 * while they run:
 *   - drop: `kvmmctl cache-drop --tier nvme` (the blocks being restored
 *     are kept busy, the other NVMe blocks dropped and invalidated);
 *   - limit: the tenant's NVMe limit lowered to 1 block (the policy moves
 *     its other NVMe blocks out), lifted once the open is answered;
 *   - evict: 4 more contents written, so the NVMe tier overflows and the
 *     policy evicts its oldest blocks (those being restored among them);
 *   - bye: the client hangs up, its session ends (the restores not yet
 *     started are called off, the others end in the cache).
 * Then, nothing in flight, a drop of every tier must leave every tier
 * empty: TIER_STATS' NVMe used_blocks is the tier's own count of taken
 * slots, so a slot the cache forgot would stay there.  At the end the
 * NVMe tier fills to the policy's 39 blocks again (7 contents: 3 dropped
 * for room), and kvmmd never said a slot was not freed
 * (kc_free_refused()).  The existing restore tests count blocks over all
 * tiers after a client's death; none drops, limits or evicts NVMe blocks
 * under restores in flight and then checks the tier for a slot left
 * taken, nor that it fills to its capacity again.
 */
#include "tests/cache-drop-common.h"
#include "tests/cache-restore-common.h"

#define DELAY_MS 400

enum round { ROUND_DROP, ROUND_LIMIT, ROUND_EVICT, ROUND_BYE, ROUNDS };

static const char *const round_name[ROUNDS] = { "drop", "limit", "evict",
						"bye" };

/* ADMIN_SET_TENANT_LIMIT of tenant id (0: no limit there). */
static void set_limit(const char *sock, uint32_t id, uint64_t nvme)
{
	struct kvmm_admin_tenant_limit a = { .size = sizeof(a),
					     .id = id,
					     .limit_blocks = { 0, 0, nvme } };
	struct kvmm_conn *c;

	t_ok(kc_connect_admin(sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_SET_TENANT_LIMIT, &a, sizeof(a), NULL,
			0, NULL));
	kvmm_disconnect(c);
}

static void expect_used(const char *sock, uint64_t g, uint64_t h, uint64_t n)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(sock, &ts);
	if (ts.tiers[0].used_blocks != g || ts.tiers[1].used_blocks != h ||
	    ts.tiers[2].used_blocks != n)
		t_fail("used %llu/%llu/%llu, expected %llu/%llu/%llu",
		       (unsigned long long)ts.tiers[0].used_blocks,
		       (unsigned long long)ts.tiers[1].used_blocks,
		       (unsigned long long)ts.tiers[2].used_blocks,
		       (unsigned long long)g, (unsigned long long)h,
		       (unsigned long long)n);
}

static void run_round(struct cr_env *env, enum round what, int first)
{
	const char *sock = env->d.sock;
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_prefix_open_reply rep;
	static uint32_t ids[CR_NB * CC_PPB];
	struct kvmm_tier_stats_reply ts;
	uint64_t h[CR_NB];
	struct cc c, m;

	for (int k = first; k < first + 4; k++)
		cr_write_content(sock, k);
	expect_used(sock, 8, 6, 4 * CR_NB - 14);

	/* content `first` is all on NVMe: 8 restores, 2 staging slots */
	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(first, b);
	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix_send(&c, h, CR_NB);
	/* asked on a session of its own: c's waits for its reply */
	cc_connect(&m, sock);
	cr_wait_pending(&m, 1);
	cc_tier_stats(&m, &ts);
	t_assert(ts.migrations_in_flight >= 1);
	cc_disconnect(&m);

	switch (what) {
	case ROUND_DROP:
		r = cd_kvmmctl(sock, "--tier nvme");
		printf("drop: %llu NVMe blocks dropped, %llu kept busy\n",
		       (unsigned long long)r.dropped[2],
		       (unsigned long long)r.kept_busy);
		t_assert_eq(r.nvme_invalidate_failures, 0);
		break;
	case ROUND_LIMIT:
		set_limit(sock, getuid(), 1);
		break;
	case ROUND_EVICT:
		for (int k = first + 4; k < first + 8; k++)
			cr_write_content(sock, k);
		break;
	case ROUND_BYE:
		/* hung up with its open pending (a BYE would wait behind
		 * it): the session ends at EOF */
		close(c.sock);
		for (int i = 0; i < 4; i++)
			close(c.ring_fds[i]);
		break;
	default:
		break;
	}
	if (what != ROUND_BYE) {
		cc_prefix_recv(&c, &rep, ids);
		printf("%s: the open got %u of %d blocks\n", round_name[what],
		       rep.nr_blocks, CR_NB);
		/* its blocks were kept for it: a slot freed under its
		 * restore would have been a miss */
		t_assert_eq(rep.nr_blocks, CR_NB);
		if (rep.nr_blocks)
			cc_seq_close(&c, rep.seq_id, ids,
				     rep.nr_blocks * CC_PPB);
		cc_disconnect(&c);
	}
	if (what == ROUND_LIMIT)
		set_limit(sock, getuid(), 0);

	/* nothing in flight, nothing in use: a drop takes every block, and
	 * every slot goes back to its tier */
	cc_settled_stats(sock, &ts);
	r = cd_kvmmctl(sock, "");
	t_assert_eq(r.kept_busy, 0);
	t_assert_eq(r.kept_in_use, 0);
	t_assert_eq(r.kept_pinned, 0);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	expect_used(sock, 0, 0, 0);
	printf("%s while restoring from NVMe: no slot left taken\n",
	       round_name[what]);
}

int main(void)
{
	struct kvmm_tier_stats_reply ts0, ts;
	struct cr_env env;
	static char log[1 << 20];

	cr_start(&env, 40, DELAY_MS);
	for (int i = 0; i < ROUNDS; i++)
		run_round(&env, (enum round)i, 8 * (i + 1));

	/* every slot is there to fill: 7 contents, 56 blocks, for 8 GPU,
	 * 6 host and 39 NVMe (one of the 40 kept spare): 3 dropped */
	cc_settled_stats(env.d.sock, &ts0);
	for (int k = 100; k < 107; k++)
		cr_write_content(env.d.sock, k);
	cc_settled_stats(env.d.sock, &ts);
	t_assert_eq(ts.tiers[2].capacity_blocks, 40);
	expect_used(env.d.sock, 8, 6, 39);
	t_assert_eq(cr_drops(&ts) - cr_drops(&ts0), 3);

	t_assert(td_read_log(&env.d, log, sizeof(log)) >= 0);
	if (strstr(log, "not freed")) {
		td_dump_log(&env.d);
		t_fail("kvmmd refused to free a slot");
	}
	cr_stop(&env);
	printf("NVMe slots under restores in flight ok\n");
	return 0;
}
