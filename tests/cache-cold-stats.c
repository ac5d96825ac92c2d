// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * TIER_STATS says what became of the blocks a restart recovered from
 * NVMe (ABI 1.24): cold_blocks (still cold now: in the index, served by
 * an open, outside the policy), and since the start cold_admitted (the
 * policy took them in: an open's restore, a pin), cold_evicted (dropped
 * unused for NVMe room or by a tenant's NVMe limit) and cold_dropped
 * (left unused any other way: an operator's drop).  At every step
 * recovered_blocks = cold + admitted + evicted + dropped, and kvmmctl
 * status (text and --json) and kvmmctl metrics say the same figures.
 *
 * kvmmd (lru, 2 GPU blocks, 6 host, a 16-slot NVMe tier) saves 4
 * contents of 2 blocks at a stop; a new kvmmd on the same file:
 *   1. recovers 8: 8 cold, nothing admitted; a client whose HELLO says
 *      1.23 gets the 696 bytes of before (the cold counts not written),
 *      one of 1.24 the 728;
 *   2. an open of content 0 reads its 2 blocks up from NVMe: admitted 2,
 *      6 cold;
 *   3. a pin of content 1's first block: admitted 3, 5 cold;
 *   4. 10 new contents need NVMe slots: the unused cold blocks go for
 *      room, the oldest written first: 4 of the 5, the newest keeping
 *      the slot the policy's capacity of 15 leaves spare (its 14 new
 *      blocks and the pinned one are 15: it drops none);
 *   5. an operator's `kvmmctl cache-drop --tier nvme` drops the one
 *      left cold: 0 cold, 1 dropped; the pinned block, kept, stays
 *      admitted.
 * Fails on the kvmmd of before (no cold counts: cold_blocks 0 where 8).
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include "tests/lib/nvme_layout.h"
#include "tests/cache-common.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_probe.h"

#define NB 2
#define NVME_SLOTS 16

static const struct cc_contents old = { .base = 0xc01d500,
					.tag0 = 40,
					.nb = NB };
static const struct cc_contents fresh = { .base = 0xf7e5500,
					  .tag0 = 60,
					  .nb = NB };

static void expect_in(const char *out, const char *what, const char *whose)
{
	if (!strstr(out, what))
		t_fail("no \"%s\" in %s:\n%s", what, whose, out);
}

/* TIER_STATS' cold counts once the cache settled, the invariant, and
 * what kvmmctl metrics and status (text and --json) say of them. */
static void expect_cold(const char *sock, uint64_t recovered, uint64_t cold,
			uint64_t admitted, uint64_t evicted, uint64_t dropped)
{
	static char out[1 << 20];
	struct kvmm_tier_stats_reply ts;
	char want[256];

	cc_settled_stats(sock, &ts);
	t_assert_eq(ts.size, sizeof(ts));
	cc_cold_check(&ts, recovered, cold, admitted, evicted, dropped);

	t_assert_eq(td_kvmmctl(sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "\nkvmm_cache_cold_blocks %llu\n",
		 (unsigned long long)cold);
	expect_in(out, want, "kvmmctl metrics");
	snprintf(want, sizeof(want), "\nkvmm_cache_cold_admitted_total %llu\n",
		 (unsigned long long)admitted);
	expect_in(out, want, "kvmmctl metrics");
	snprintf(want, sizeof(want), "\nkvmm_cache_cold_evicted_total %llu\n",
		 (unsigned long long)evicted);
	expect_in(out, want, "kvmmctl metrics");
	snprintf(want, sizeof(want), "\nkvmm_cache_cold_dropped_total %llu\n",
		 (unsigned long long)dropped);
	expect_in(out, want, "kvmmctl metrics");

	t_assert_eq(td_kvmmctl(sock, "--json status", out, sizeof(out)), 0);
	snprintf(
		want, sizeof(want),
		"\"cold_blocks\":%llu,\"cold_admitted\":%llu,\"cold_evicted\":%llu,\"cold_dropped\":%llu,",
		(unsigned long long)cold, (unsigned long long)admitted,
		(unsigned long long)evicted, (unsigned long long)dropped);
	expect_in(out, want, "kvmmctl --json status");
	t_assert_eq(td_kvmmctl(sock, "status", out, sizeof(out)), 0);
	snprintf(
		want, sizeof(want),
		"recovered: %llu still cold, %llu taken in (an open or a pin), %llu evicted unused, %llu dropped unused\n",
		(unsigned long long)cold, (unsigned long long)admitted,
		(unsigned long long)evicted, (unsigned long long)dropped);
	expect_in(out, want, "kvmmctl status");
}

/* A client of ABI 1.23 gets the 696 bytes of before, one of 1.24 the 728
 * of 1.24 (the cold counts; 1.25's weights after them not sent). */
static void old_client(const char *sock)
{
	struct kvmm_tier_stats_reply r;
	struct cc c;

	t_assert_eq(offsetof(struct kvmm_tier_stats_reply, cold_blocks), 696);
	t_assert_eq(offsetof(struct kvmm_tier_stats_reply, weights), 696 + 32);
	cc_connect_minor(&c, sock, 23);
	memset(&r, 0xa5, sizeof(r));
	t_ok(cc_call(&c, KVMM_CMD_TIER_STATS, NULL, 0, &r, sizeof(r), NULL,
		     NULL));
	cc_disconnect(&c);
	t_assert_eq(r.size, 696);
	t_assert_eq(r.recovered_blocks, 4 * NB);
	t_assert_eq(r.cold_blocks, 0xa5a5a5a5a5a5a5a5ull);
	t_assert_eq(r.cold_admitted, 0xa5a5a5a5a5a5a5a5ull);
	t_assert_eq(r.cold_evicted, 0xa5a5a5a5a5a5a5a5ull);
	t_assert_eq(r.cold_dropped, 0xa5a5a5a5a5a5a5a5ull);

	cc_connect_minor(&c, sock, 24);
	memset(&r, 0xa5, sizeof(r));
	t_ok(cc_call(&c, KVMM_CMD_TIER_STATS, NULL, 0, &r, sizeof(r), NULL,
		     NULL));
	cc_disconnect(&c);
	t_assert_eq(r.size, 696 + 32);
	t_assert_eq(r.cold_blocks, 4 * NB);
	t_assert_eq(r.cold_admitted, 0);
	t_assert_eq(r.weights[0], 0xa5a5a5a5u);
	printf("a 1.23 client: the 696 bytes of before; a 1.24 client: %u\n",
	       r.size);
}

int main(void)
{
	char nvme[256], size[32];
	struct kvmm_admin_cache_drop_reply dr;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts po;
	struct kvmm_conn *c;
	struct td_daemon d;
	uint64_t c1[NB], evicted;

	cc_nvme_path(nvme, sizeof(nvme), "cache-cold-stats");
	t_nvme_require(nvme);
	nt_size_arg(size, sizeof(size), NVME_SLOTS, 4 * CC_PAGE);
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "2M",
			       "--nvme-path",
			       nvme,
			       "--nvme-size",
			       size,
			       "--nvme-save-on-stop",
			       "10000",
			       NULL };

	cc_content_hashes(&old, 1, c1);
	cc_start(&d, args);
	for (int k = 0; k < 4; k++)
		cc_write_content(d.sock, &old, k);
	cc_stop(&d); /* saves the 8 blocks */

	/* 1. recovered, all cold */
	args[12] = NULL; /* from here on without the save */
	cc_start(&d, args);
	expect_cold(d.sock, 4 * NB, 4 * NB, 0, 0, 0);
	old_client(d.sock);

	/* 2. an open reads content 0 up: the policy takes its 2 blocks */
	cc_read_content(d.sock, &old, 0, NB, 2);
	expect_cold(d.sock, 4 * NB, 4 * NB - 2, 2, 0, 0);

	/* 3. a pin takes content 1's first block in, on NVMe */
	c = cc_connect_lib(d.sock, "cold-stats");
	t_assert_eq(cc_pin(c, c1[0], 0, 0, 0, &po), 0);
	t_assert_eq(po.tier, 2);
	expect_cold(d.sock, 4 * NB, 4 * NB - 3, 3, 0, 0);

	/*
	 * 4. 20 new blocks and content 0's 2: 2 on the GPU, 6 in host
	 * memory, 14 on NVMe, where 10 slots are free and the unused cold
	 * blocks give theirs: 4, the oldest written first.  With the
	 * pinned block the policy holds 15 there, its capacity, so it
	 * drops none, and no other slot is held once the cache settled
	 * (content 0's read in step 2 settled, its slots freed): the
	 * newest cold block keeps the 16th slot every run.  (This step
	 * said 4 or 5, after cache-pin-cold's 15 or 16 slots, whose
	 * policy drops blocks too: kvmmd evicted a cold block there for a
	 * slot the policy's drop was about to free, kc_pol_nvme_full().)
	 */
	for (int k = 0; k < 10; k++)
		cc_write_content(d.sock, &fresh, k);
	cc_settled_stats(d.sock, &ts);
	evicted = ts.cold_evicted;
	printf("after 10 new contents: NVMe %llu used, %llu cold evicted\n",
	       (unsigned long long)ts.tiers[2].used_blocks,
	       (unsigned long long)evicted);
	t_assert_eq(evicted, 4 * NB - 4);
	t_assert_eq(ts.tiers[2].used_blocks, NVME_SLOTS);
	expect_cold(d.sock, 4 * NB, 1, 3, evicted, 0);

	/* 5. an operator's drop of the NVMe tier: what was left cold is
	 * dropped cold, the pinned block kept */
	dr = cd_kvmmctl(d.sock, "--tier nvme");
	t_assert_eq(dr.kept_pinned, 1);
	expect_cold(d.sock, 4 * NB, 0, 3, evicted, 1);

	kvmm_disconnect(c);
	cc_stop(&d);
	unlink(nvme);
	return 0;
}
