// SPDX-License-Identifier: MIT
/*
 * timeout: 180
 * An NVMe tier full of blocks a restart recovered (cold) whose writes
 * fail (Documentation/tiers.md, "Cold blocks the policy cannot keep"):
 * a write evicts a cold block for its slot only while the tier's last
 * write worked, so a failing device costs the recovered blocks no more
 * than the writes that started before its first failure was known.
 *
 * kvmmd (lru, 2 GPU blocks, 6 host, a 16-slot NVMe tier) saves 14
 * contents of one block at a stop.  The next kvmmd recovers the 14,
 * cold, with the tier's 2 other slots held back
 * (KVMMD_TEST_NVME_SLOTS_HELD=2: no slot free), every host -> NVMe write
 * failing with -EIO (KVMMD_TEST_MIGRATE_FAIL=host-nvme:1+), each one
 * taking 1.5 s (KVMMD_TEST_NVME_WRITE_DELAY_MS) and no try of the tier
 * once it is out of service (KVMMD_TEST_CACHE_RETRY_MS=600000):
 *   1. 8 new contents fill the GPU and host tiers: nothing written;
 *   2. a 9th sends a host victim down: its write evicts the oldest cold
 *      block for a slot (the tier's last write had not failed), and
 *      fails; its block goes back to the host tier, whose next victim's
 *      write takes the slot it freed;
 *   3. while that write runs (one failure in a row, the tier not yet out
 *      of service), 2 more contents send 2 host victims down.  Their
 *      writes wait in line for the slot the running one gives back, and
 *      evict nothing (before 7 December each evicted a cold block: 3
 *      evicted in all);
 *   4. settled: 6 writes failed, the 4th took the tier out of service
 *      (nvme_write_outs 1), the cold counts 13 cold, 1 evicted, none
 *      admitted or dropped (recovered = cold + admitted + evicted +
 *      dropped), and the 13 still on NVMe (PREFIX_QUERY), where an open
 *      reads one byte-identical.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <errno.h>

#include "tests/lib/nvme_layout.h"
#include "tests/cache-common.h"
#include "tests/lib/nvme_probe.h"

#define NVME_SLOTS 16
#define NOLD 14
#define WRITE_MS "1500"

static const struct cc_contents old = { .base = 0xc01dfa0,
					.tag0 = 20,
					.nb = 1 };
static const struct cc_contents fresh = { .base = 0xf7efa00,
					  .tag0 = 120,
					  .nb = 1 };

static void tier_stats(const char *sock, struct kvmm_tier_stats_reply *ts)
{
	struct kvmm_conn *c;

	t_ok(kc_connect_admin(sock, &c));
	t_ok(kc_request(c, KVMM_CMD_TIER_STATS, NULL, 0, ts, sizeof(*ts),
			NULL));
	kvmm_disconnect(c);
}

/* TIER_STATS once failed writes reached n (at most 30 s). */
static void wait_failed(const char *sock, uint64_t n,
			struct kvmm_tier_stats_reply *ts)
{
	for (int i = 0; i < 3000; i++) {
		tier_stats(sock, ts);
		if (ts->migrations_failed >= n)
			return;
		usleep(10000);
	}
	t_fail("after 30 s: %llu failed migrations, not %llu",
	       (unsigned long long)ts->migrations_failed,
	       (unsigned long long)n);
}

/* TIER_STATS once nothing moves: the failed writes run one at a time,
 * 1.5 s each, longer than cc_settled_stats() waits (at most 60 s). */
static void settle(const char *sock, struct kvmm_tier_stats_reply *ts)
{
	for (int i = 0; i < 6000; i++) {
		tier_stats(sock, ts);
		if (!ts->migrations_in_flight)
			break;
		usleep(10000);
	}
	cc_settled_stats(sock, ts);
}

/* How many of the recovered contents PREFIX_QUERY finds on NVMe. */
static int on_nvme(struct kvmm_region *r)
{
	int n = 0;

	for (int k = 0; k < NOLD; k++) {
		uint64_t h;
		uint8_t t;

		cc_content_hashes(&old, k, &h);
		n += kvmm_prefix_query(r, &h, 1, &t, 0) == 1 &&
		     t == KVMM_QUERY_NVME;
	}
	return n;
}

int main(void)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_tier_stats_reply ts;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	char nvme[256], size[32];
	uint64_t h;
	uint8_t t;
	int k;

	cc_nvme_path(nvme, sizeof(nvme), "cache-cold-write-fail");
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

	cc_start(&d, args);
	for (k = 0; k < NOLD; k++)
		cc_write_content(d.sock, &old, k);
	cc_stop(&d); /* saves the 14 blocks */

	args[12] = NULL; /* this kvmmd saves nothing */
	setenv("KVMMD_TEST_MIGRATE_FAIL", "host-nvme:1+", 1);
	setenv("KVMMD_TEST_NVME_SLOTS_HELD", "2", 1);
	setenv("KVMMD_TEST_NVME_WRITE_DELAY_MS", WRITE_MS, 1);
	setenv("KVMMD_TEST_CACHE_RETRY_MS", "600000", 1);
	cc_start(&d, args);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	unsetenv("KVMMD_TEST_NVME_SLOTS_HELD");
	unsetenv("KVMMD_TEST_NVME_WRITE_DELAY_MS");
	unsetenv("KVMMD_TEST_CACHE_RETRY_MS");
	cc_settled_stats(d.sock, &ts);
	cc_cold_check(&ts, NOLD, NOLD, 0, 0, 0);
	t_assert_eq(ts.tiers[2].used_blocks, NOLD);

	/* 1. GPU and host full, nothing written */
	for (k = 0; k < 8; k++)
		cc_write_content(d.sock, &fresh, k);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks + ts.tiers[1].used_blocks, 8);
	t_assert_eq(ts.migrations_failed, 0);
	cc_cold_check(&ts, NOLD, NOLD, 0, 0, 0);

	/* 2. a host victim's write: the oldest cold block's slot, failed */
	cc_write_content(d.sock, &fresh, 8);
	wait_failed(d.sock, 1, &ts);

	/* 3. two more victims while the next write runs */
	cc_write_content(d.sock, &fresh, 9);
	cc_write_content(d.sock, &fresh, 10);
	tier_stats(d.sock, &ts);
	printf("after the 2 victims: %llu writes failed, out of service %llu times, %llu cold evicted\n",
	       (unsigned long long)ts.migrations_failed,
	       (unsigned long long)ts.nvme_write_outs,
	       (unsigned long long)ts.cold_evicted);
	/* they went down while the tier still took writes: else their
	 * moves were refused, and this run cannot tell */
	t_assert_eq(ts.nvme_write_outs, 0);
	t_assert_eq(ts.cold_evicted, 1); /* 3 before 7 December */

	/* 4. settled */
	settle(d.sock, &ts);
	printf("settled: %llu writes failed (%llu back to host), out of service %llu times, drops %llu/%llu/%llu\n",
	       (unsigned long long)ts.migrations_failed,
	       (unsigned long long)ts.nvme_write_returns,
	       (unsigned long long)ts.nvme_write_outs,
	       (unsigned long long)ts.tiers[0].drops,
	       (unsigned long long)ts.tiers[1].drops,
	       (unsigned long long)ts.tiers[2].drops);
	cc_cold_check(&ts, NOLD, NOLD - 1, 0, 1, 0);
	t_assert_eq(ts.nvme_write_outs, 1);
	/* w1, its host victim's, the 2 victims', and the victims of the
	 * first 3 failures' returns; the 4th's was refused */
	t_assert_eq(ts.migrations_failed, 6);
	t_assert_eq(ts.tiers[2].used_blocks, NOLD - 1);
	t_assert_eq(ts.tiers[2].drops, 1); /* the cold one */

	c = cc_connect_lib(d.sock, "cold-write-fail");
	t_ok(kvmm_region_create(c, &ro, &r));
	t_assert_eq(on_nvme(r), NOLD - 1);
	cc_content_hashes(&old, 0, &h); /* the oldest written: evicted */
	t_assert_eq(kvmm_prefix_query(r, &h, 1, &t, 0), 0);
	kvmm_region_destroy(r);
	kvmm_disconnect(c);
	cc_read_content(d.sock, &old, NOLD - 1, 1, 2);
	settle(d.sock, &ts);
	cc_cold_check(&ts, NOLD, NOLD - 2, 1, 1, 0);
	cc_stop(&d);
	unlink(nvme);
	printf("a failing NVMe tier full of recovered blocks: 1 evicted (the first write's), 13 kept\n");
	return 0;
}
