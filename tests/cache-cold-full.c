// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * A block a restart recovered from NVMe (cold: in the index, outside the
 * policy) that the policy takes in where it cannot keep it as it keeps
 * others (Documentation/tiers.md, "Cold blocks the policy cannot keep"):
 * each time the block is admitted once (TIER_STATS' cold_admitted), never
 * both in the policy and cold, its later fate the policy's, and
 * recovered_blocks = cold + admitted + evicted + dropped at every step.
 *
 * kvmmd (lru, 2 GPU blocks, 6 host, a 16-slot NVMe tier, the policy's
 * capacity there 15, --pin-quota 15) saves 7 contents of 2 blocks at a
 * stop; each case starts a new kvmmd on that file, which recovers the
 * 14, cold.
 *
 * A. The policy's NVMe tier full of pinned blocks: 13 of them pinned
 *    (admitted 13, 1 cold), 5 new contents put 2 blocks on NVMe, which
 *    a second client pins: the tier holds its capacity of 15, pinned,
 *    with 16 slots used, the last cold block keeping the 16th (no cold
 *    block evicted: the policy's tier was not over).  A pin of the cold
 *    one then answers tier 2: admitted (14), the tier one over (16 of
 *    15), nothing dropped (TIER_STATS' NVMe drops 0, 16 slots used).
 *    A new content is then cached as at capacity: the host tier's
 *    victims pass through the NVMe tier, still one over, and are
 *    dropped there (NVMe drops 2).  Before, pol_cache_fits() asked a
 *    tier over its capacity to come back within it for a block to pass
 *    through, so with GPU and host full the new content was not cached
 *    (not_cached 2) while the pins held.  Every
 *    recovered block opens byte-identical from NVMe (no slot was given
 *    to another block).  The pins gone, 10 new contents bring the
 *    tier back within its capacity: the policy drops the recovered blocks
 *    as its own (NVMe drops), the cold counts stay admitted 14, evicted
 *    0, dropped 0.
 * B. The NVMe tier out of service for writes (every host -> NVMe write
 *    fails with -EIO, KVMMD_TEST_MIGRATE_FAIL=host-nvme:1+): a pin of a
 *    cold block needs no write and answers tier 2 (admitted 1); an open
 *    reads a content up (admitted 3); 10 new contents push it down,
 *    4 writes fail and the tier goes out of service (nvme_write_outs 1),
 *    and the host tier's victims are dropped there, that content's
 *    among them: the policy's drops (host drops), the cold counts as
 *    they were (admitted 3), the other 11 still cold and their slots
 *    kept (no cold block evicted for a write that then failed or was
 *    refused), the pinned one still opens from NVMe.
 * C. The GPU and host tiers full of pinned blocks (4 new contents pinned
 *    as they are published): an open reads a cold content up; the policy
 *    takes its 2 blocks in (admitted 2) as its own victims, straight down
 *    past the pinned host tier to NVMe, where they stay cached
 *    (PREFIX_QUERY: NVMe, a second open finds them byte-identical), the
 *    12 others still cold, 14 slots used.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <errno.h>

#include "tests/lib/nvme_layout.h"
#include "tests/cache-common.h"
#include "tests/lib/nvme_probe.h"

#define NB 2
#define NVME_SLOTS 16
#define NOLD 7

static const struct cc_contents old = { .base = 0xc01df00,
					.tag0 = 30,
					.nb = NB };
static const struct cc_contents fresh = { .base = 0xf7ef000,
					  .tag0 = 130,
					  .nb = NB };

/* TIER_STATS once the cache settled: the cold counts and the invariant,
 * the NVMe slots used and the tier's drops. */
static void expect_cold(const char *sock, const char *when,
			struct kvmm_tier_stats_reply *ts, uint64_t cold,
			uint64_t admitted, uint64_t nvme_used)
{
	cc_settled_stats(sock, ts);
	printf("%s: used %llu/%llu/%llu, drops %llu/%llu/%llu\n", when,
	       (unsigned long long)ts->tiers[0].used_blocks,
	       (unsigned long long)ts->tiers[1].used_blocks,
	       (unsigned long long)ts->tiers[2].used_blocks,
	       (unsigned long long)ts->tiers[0].drops,
	       (unsigned long long)ts->tiers[1].drops,
	       (unsigned long long)ts->tiers[2].drops);
	cc_cold_check(ts, NOLD * NB, cold, admitted, 0, 0);
	t_assert_eq(ts->tiers[2].used_blocks, nvme_used);
}

/* What PREFIX_QUERY says of block b of content k: its tier, or -1. */
static int tier_of(struct kvmm_region *r, const struct cc_contents *cs, int k,
		   int b)
{
	uint64_t h[NB];
	uint8_t t[NB];

	cc_content_hashes(cs, k, h);
	return kvmm_prefix_query(r, h, NB, t, 0) > b ? t[b] : -1;
}

static void expect_pins(struct td_daemon *d, uint32_t n)
{
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	t_assert_eq(st.pins, n);
}

/* kvmmd started with args, and its region for PREFIX_QUERY. */
static struct kvmm_conn *start(struct td_daemon *d, const char *const *args,
			       struct kvmm_region **r)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_conn *c;

	cc_start(d, args);
	c = cc_connect_lib(d->sock, "cold-full");
	t_ok(kvmm_region_create(c, &ro, r));
	return c;
}

static void stop(struct td_daemon *d, struct kvmm_conn *c,
		 struct kvmm_region *r)
{
	kvmm_region_destroy(r);
	kvmm_disconnect(c);
	cc_stop(d);
}

/* A. A pin admits a cold block into an NVMe tier full of pinned ones. */
static void pinned_full(const char *const *args)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts po;
	struct kvmm_conn *c, *c2;
	struct kvmm_region *r;
	struct td_daemon d;
	uint64_t all[NOLD * NB], f0[NB];
	int32_t res[NOLD * NB];

	for (int k = 0; k < NOLD; k++)
		cc_content_hashes(&old, k, &all[k * NB]);
	c = start(&d, args, &r);
	expect_cold(d.sock, "A. recovered", &ts, NOLD * NB, 0, NOLD * NB);

	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	t_assert_eq(kvmm_block_pin_many(c, all, NOLD * NB - 1, &po, res),
		    NOLD * NB - 1);
	for (int i = 0; i < NOLD * NB - 1; i++)
		t_assert_eq(res[i], 2);
	expect_cold(d.sock, "A. 13 pinned", &ts, 1, NOLD * NB - 1, NOLD * NB);

	/* 10 new blocks: 8 in GPU and host, 2 (content 0's) on NVMe, in
	 * the 2 free slots: the policy's 15 there, no cold block evicted */
	for (int k = 0; k < 5; k++)
		cc_write_content(d.sock, &fresh, k);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(tier_of(r, &fresh, 0, 0), KVMM_QUERY_NVME);
	t_assert_eq(tier_of(r, &fresh, 0, 1), KVMM_QUERY_NVME);
	c2 = cc_connect_lib(d.sock, "cold-full-2");
	cc_content_hashes(&fresh, 0, f0);
	for (int b = 0; b < NB; b++) {
		t_assert_eq(cc_pin(c2, f0[b], 0, 0, 0, &po), 0);
		t_assert_eq(po.tier, 2);
	}
	expect_cold(d.sock, "A. tier full, pinned", &ts, 1, NOLD * NB - 1,
		    NVME_SLOTS);
	t_assert_eq(ts.tiers[2].drops, 0);

	/* the last cold block: admitted one over, nothing else may go */
	t_assert_eq(cc_pin(c, all[NOLD * NB - 1], 0, 0, 0, &po), 0);
	t_assert_eq(po.tier, 2);
	t_assert_eq(po.pins, NOLD * NB);
	expect_pins(&d, NOLD * NB + NB);
	expect_cold(d.sock, "A. one over", &ts, 0, NOLD * NB, NVME_SLOTS);
	t_assert_eq(ts.tiers[2].drops, 0);
	/* a new content is cached as at capacity: the host tier's victims
	 * pass through the NVMe tier, still one over, and are dropped
	 * there (before: not cached, pol_cache_fits()) */
	t_assert_eq(cc_publish_any(d.sock, &fresh, 5), 0);
	expect_cold(d.sock, "A. a new one cached", &ts, 0, NOLD * NB,
		    NVME_SLOTS);
	t_assert_eq(ts.tiers[2].drops, NB);
	t_assert_eq(tier_of(r, &fresh, 1, 0), -1); /* the LRU content */
	t_assert_eq(tier_of(r, &fresh, 5, 0), KVMM_QUERY_GPU);
	for (int k = 0; k < NOLD; k++)
		cc_read_content(d.sock, &old, k, NB, 2);
	cc_read_content(d.sock, &fresh, 0, NB, 2);
	cc_settled_stats(d.sock, &ts);
	expect_cold(d.sock, "A. all opened", &ts, 0, NOLD * NB,
		    ts.tiers[2].used_blocks);
	/* opened, the pinned blocks stay cached (one may be on the GPU
	 * now, promoted, a new one dropped for it): none was lost */
	for (int k = 0; k < NOLD; k++)
		for (int b = 0; b < NB; b++)
			t_assert(tier_of(r, &old, k, b) >= 0);
	t_assert(ts.tiers[2].drops <= NB + 1);

	/* the pins gone: the recovered blocks are the policy's to drop */
	kvmm_disconnect(c2);
	kvmm_region_destroy(r);
	kvmm_disconnect(c);
	for (int k = 6; k < 16; k++)
		cc_write_content(d.sock, &fresh, k);
	cc_settled_stats(d.sock, &ts);
	expect_cold(d.sock, "A. unpinned, 10 new", &ts, 0, NOLD * NB,
		    ts.tiers[2].used_blocks);
	t_assert(ts.tiers[2].used_blocks <= NVME_SLOTS - 1);
	t_assert(ts.tiers[2].drops >= 20 - NVME_SLOTS);
	cc_read_content(d.sock, &fresh, 15, NB, 0);
	cc_stop(&d);
}

/* B. The NVMe tier out of service for writes. */
static void writes_out(const char *const *args)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts po;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	uint64_t h[NB];

	setenv("KVMMD_TEST_MIGRATE_FAIL", "host-nvme:1+", 1);
	setenv("KVMMD_TEST_CACHE_RETRY_MS", "600000", 1);
	c = start(&d, args, &r);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	unsetenv("KVMMD_TEST_CACHE_RETRY_MS");
	expect_cold(d.sock, "B. recovered", &ts, NOLD * NB, 0, NOLD * NB);

	cc_content_hashes(&old, 0, h);
	t_assert_eq(cc_pin(c, h[0], 0, 0, 0, &po), 0);
	t_assert_eq(po.tier, 2);
	expect_cold(d.sock, "B. pinned", &ts, NOLD * NB - 1, 1, NOLD * NB);
	cc_read_content(d.sock, &old, 1, NB, 2);
	expect_cold(d.sock, "B. read up", &ts, NOLD * NB - 3, 3, NOLD * NB - 2);

	/* each once the copies down the one before ended: a write sent
	 * while another's copy to NVMe was in flight evicted cold blocks
	 * for slots (KVMMD_TEST_NVME_WRITE_DELAY_MS=200: cold 7, evicted 4,
	 * NVMe drops 13 where cold 11, evicted 0 are expected) */
	for (int k = 0; k < 10; k++) {
		cc_write_content(d.sock, &fresh, k);
		cc_settled_stats(d.sock, &ts);
	}
	expect_cold(d.sock, "B. 10 new", &ts, NOLD * NB - 3, 3, NOLD * NB - 2);
	t_assert_eq(ts.nvme_write_outs, 1);
	t_assert_eq(ts.tiers[1].drops, 10 * NB + NB - 8); /* all but 8 */
	t_assert_eq(tier_of(r, &old, 1, 0), -1);
	t_assert_eq(tier_of(r, &old, 0, 0), KVMM_QUERY_NVME);
	for (int k = 2; k < NOLD; k++)
		t_assert_eq(tier_of(r, &old, k, 1), KVMM_QUERY_NVME);
	t_assert_eq(cc_found_on_nvme(d.sock, &old, 0), NB);
	stop(&d, c, r);
}

/* C. An open reads a cold block up with GPU and host pinned full. */
static void read_up_full(const char *const *args)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_pin_opts po;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;

	c = start(&d, args, &r);
	expect_cold(d.sock, "C. recovered", &ts, NOLD * NB, 0, NOLD * NB);
	for (int k = 0; k < 4; k++) {
		uint64_t h[NB];

		cc_write_content(d.sock, &fresh, k);
		cc_content_hashes(&fresh, k, h);
		for (int b = 0; b < NB; b++) {
			t_assert_eq(cc_pin(c, h[b], 0, 0, 0, &po), 0);
			t_assert_eq(po.tier, k ? 1 : 0);
		}
	}
	expect_cold(d.sock, "C. GPU and host pinned", &ts, NOLD * NB, 0,
		    NOLD * NB);
	t_assert_eq(ts.tiers[0].used_blocks, 2);
	t_assert_eq(ts.tiers[1].used_blocks, 6);

	t_assert_eq(cc_found_on_nvme(d.sock, &old, NOLD - 1), NB);
	expect_cold(d.sock, "C. read up", &ts, NOLD * NB - NB, NB, NOLD * NB);
	t_assert_eq(tier_of(r, &old, NOLD - 1, 0), KVMM_QUERY_NVME);
	t_assert_eq(tier_of(r, &old, NOLD - 1, 1), KVMM_QUERY_NVME);
	t_assert_eq(cc_found_on_nvme(d.sock, &old, NOLD - 1), NB);
	expect_cold(d.sock, "C. read again", &ts, NOLD * NB - NB, NB,
		    NOLD * NB);
	stop(&d, c, r);
}

int main(void)
{
	char nvme[256], size[32];
	struct td_daemon d;

	cc_nvme_path(nvme, sizeof(nvme), "cache-cold-full");
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
			       "--pin-quota",
			       "15",
			       "--nvme-path",
			       nvme,
			       "--nvme-size",
			       size,
			       "--nvme-save-on-stop",
			       "10000",
			       NULL };
	void (*cases[])(const char *const *) = { pinned_full, writes_out,
						 read_up_full };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		args[14] = "--nvme-save-on-stop";
		cc_start(&d, args);
		for (int k = 0; k < NOLD; k++)
			cc_write_content(d.sock, &old, k);
		cc_stop(&d); /* saves the 14 blocks */
		args[14] = NULL; /* the case's kvmmd saves nothing */
		cases[i](args);
		unlink(nvme);
	}
	return 0;
}
