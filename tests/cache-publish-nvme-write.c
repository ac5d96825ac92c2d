// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * A publish of content whose cached block is being written to the NVMe
 * tier promotes it, as it does once the write has ended: a real kvmmd
 * (lru, 2 GPU blocks, 1 host block in the policy's count, an NVMe file of
 * 7 slots, nothing saved at the stop) whose host -> NVMe writes each wait
 * WRITE_MS (KVMMD_TEST_NVME_WRITE_DELAY_MS), and real client processes.
 * Blocks A, B, C, D, one at a time, put A's write in flight (B in host
 * memory, C and D on the GPU); an operator drops the GPU and host tiers
 * (C, D, B); while A's write runs (the NVMe tier's bytes_in still 0) a
 * client publishes A from pages of its own:
 *   - the reply says published 1, promoted 1; a new process's open shares
 *     those very pages from the GPU (same page ids, same bytes, no
 *     restore).  E, F and G then push A down again while its old write
 *     still runs: the new write waits for it (no second write in flight,
 *     though a worker is free) and lands in a slot of its own once the
 *     old one ended and its slot was freed: the NVMe tier holds one slot
 *     (A's), the host E's, the GPU F and G; the counters are exact (two
 *     writes' bytes_in, demotions_in 2, promotions_by_publish 1, nothing
 *     failed, no block dropped but the operator's three) and nothing
 *     leaks (the pool holds the 2 GPU blocks' pages).  A restart on the
 *     file recovers one block, A, which opens from NVMe byte-identical;
 *   - a drop of the GPU tier while A's old write runs keeps A (busy: its
 *     old write's slot is not a stale copy yet); once it ended, A's old
 *     slot is a stale copy of A's that the next drop of A invalidates
 *     (nvme_stale_invalidated 1), so a restart recovers nothing and A is
 *     a miss.  Without that drop the restart finds A's header: the same
 *     bytes, recovered as the old NVMe copy of any block restored to the
 *     GPU is (Documentation/tiers.md).
 * Before 6 December the publish was a duplicate while the write ran and
 * A stayed on NVMe, so the next open reloaded it.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include "tests/cache-drop-common.h"
#include "tests/cache-publish-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define WRITE_MS 3000
#define TA 81
#define BLOCK ((uint64_t)CC_PPB * CC_PAGE)

static const uint64_t ha[1] = { 0xde1a0001ull };

static uint64_t h_of(int k)
{
	return 0xde1b0000ull + (uint64_t)k;
}

/* kvmmd on the tier file nvme, its NVMe writes slowed down. */
static void start(struct td_daemon *d, const char *nvme)
{
	char size[NT_SIZE_ARG_LEN];
	const char *args[] = { "--cache-policy", "lru", "--cache-block-pages",
			       "4", "--cache-gpu-blocks", "2",
			       /* 4 slots: 1 in the policy's count */
			       "--host-mem", "1M", "--nvme-path", nvme,
			       "--nvme-size",
			       nt_size_arg(size, sizeof(size), NCA_NVME_SLOTS,
					   NCA_BLOCK_BYTES),
			       "--nvme-save-on-stop", "0", NULL };

	cc_start_with_delay(d, args, "KVMMD_TEST_NVME_WRITE_DELAY_MS",
			    WRITE_MS);
}

/* Block k (k = 0: A) published by a writer process, content TA + k. */
static void publish1(const char *sock, int k)
{
	uint64_t h = k ? h_of(k) : ha[0];

	t_assert_eq(cc_publish_content(sock, &h, 1, TA + k, NULL), 0);
}

/* Wait (10 s) until only n migrations are in flight and the host tier
 * took `host_in` blocks' bytes. */
static void wait_flight(const char *sock, uint64_t n, uint64_t host_in,
			struct kvmm_tier_stats_reply *ts)
{
	for (int i = 0; i < 1000; i++) {
		cp_stats(sock, ts);
		if (ts->migrations_in_flight == n &&
		    ts->tiers[1].bytes_in == host_in * BLOCK)
			return;
		usleep(10000);
	}
	t_fail("in flight %llu, host bytes_in %llu: expected %llu, %llu blocks",
	       (unsigned long long)ts->migrations_in_flight,
	       (unsigned long long)ts->tiers[1].bytes_in, (unsigned long long)n,
	       (unsigned long long)host_in);
}

/* A, B, C, D: A's write runs, B in host memory, C and D on the GPU. */
static void write_a(const char *sock)
{
	struct kvmm_tier_stats_reply ts;

	publish1(sock, 0);
	publish1(sock, 1);
	publish1(sock, 2);
	wait_flight(sock, 0, 1, &ts); /* A's copy to host ended */
	publish1(sock, 3);
	wait_flight(sock, 1, 2, &ts); /* B's too: A's write runs */
	t_assert_eq(ts.tiers[2].demotions_in, 1);
	t_assert_eq(ts.tiers[2].bytes_in, 0);
}

/* A client publishes A while its old write runs: promoted; its page ids
 * to ids. */
static void publish_a(const char *sock, uint32_t *ids)
{
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	struct cc c;
	uint32_t seq;

	cc_connect(&c, sock);
	seq = cp_publish_own(&c, ha, 1, TA, ids, &rep);
	printf("publish during A's NVMe write: published %u promoted %u duplicates %u not cached %u\n",
	       rep.published, rep.promoted, rep.duplicates, rep.not_cached);
	t_assert_eq(rep.published, 1);
	t_assert_eq(rep.promoted, 1);
	t_assert_eq(rep.duplicates + rep.not_cached, 0);
	cc_tier_stats(&c, &ts);
	/* the old write still runs: the publish did not wait for it */
	t_assert_eq(ts.tiers[2].bytes_in, 0);
	t_assert_eq(ts.migrations_in_flight, 1);
	t_assert_eq(ts.tiers[2].promotions_by_publish, 1);
	cc_seq_close(&c, seq, ids, CC_PPB);
	cc_disconnect(&c);
}

/* A new process opens A: from tier `from`, on pages want (NULL: any),
 * content TA. */
static void read_a(const char *sock, int from, const uint32_t *want)
{
	cp_read(sock, ha, 1, TA, from, want, "open of A");
}

/* Nothing leaks (cp_expect_no_leak()), and no slot was refused. */
static void expect_no_leak(struct td_daemon *d,
			   const struct kvmm_tier_stats_reply *ts)
{
	cp_expect_no_leak(d, ts);
	t_assert_eq(ts->lower_free_refused, 0);
}

/* kvmmd on nvme; A's write in flight, C, D and B dropped by an operator,
 * A published meanwhile (promoted) on the pages ids. */
static void promote_during_write(struct td_daemon *d, const char *nvme,
				 uint32_t *ids)
{
	struct kvmm_admin_cache_drop_reply dr;

	start(d, nvme);
	write_a(d->sock);
	dr = cd_kvmmctl(d->sock, "--tier gpu,host"); /* C, D; B */
	cd_expect(&dr, 2, 1, 0, 0, 0, 0);
	publish_a(d->sock, ids);
}

static void promoted_then_written_again(const char *nvme)
{
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[CC_PPB];
	struct td_daemon d;

	promote_during_write(&d, nvme, ids);
	read_a(d.sock, 0, ids);
	/* E, F: A goes to host memory; G: E too, and A on to NVMe, whose
	 * write waits for the old one */
	publish1(d.sock, 4);
	publish1(d.sock, 5);
	publish1(d.sock, 6);
	wait_flight(d.sock, 1, 4, &ts); /* B's, A's, E's copies ended */
	t_assert_eq(ts.tiers[2].demotions_in, 2);
	t_assert_eq(ts.tiers[2].bytes_in, 0); /* the old write runs, alone */
	cc_settled_stats(d.sock, &ts);
	printf("settled: gpu %llu host %llu nvme %llu used; nvme demotions_in %llu bytes_in %llu promotions_by_publish %llu; drops %llu/%llu/%llu; failed %llu\n",
	       (unsigned long long)ts.tiers[0].used_blocks,
	       (unsigned long long)ts.tiers[1].used_blocks,
	       (unsigned long long)ts.tiers[2].used_blocks,
	       (unsigned long long)ts.tiers[2].demotions_in,
	       (unsigned long long)ts.tiers[2].bytes_in,
	       (unsigned long long)ts.tiers[2].promotions_by_publish,
	       (unsigned long long)ts.tiers[0].drops,
	       (unsigned long long)ts.tiers[1].drops,
	       (unsigned long long)ts.tiers[2].drops,
	       (unsigned long long)ts.migrations_failed);
	t_assert_eq(ts.tiers[0].used_blocks, 2); /* F, G */
	t_assert_eq(ts.tiers[1].used_blocks, 1); /* E's slot */
	t_assert_eq(ts.tiers[2].used_blocks, 1); /* A's new slot only */
	t_assert_eq(ts.tiers[2].demotions_in, 2);
	t_assert_eq(ts.tiers[2].bytes_in, 2 * BLOCK); /* both writes ran */
	t_assert_eq(ts.tiers[2].promotions_by_publish, 1);
	t_assert_eq(ts.tiers[2].promotions_out, 0);
	t_assert_eq(ts.tiers[1].demotions_in, 4); /* A, B, A, E */
	t_assert_eq(ts.tiers[1].bytes_in, 4 * BLOCK);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops + ts.tiers[2].drops,
		    3);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(ts.duplicates, 0);
	expect_no_leak(&d, &ts);
	cc_stop(&d);

	/* A alone: its new write took the slot the old one freed (the
	 * tier's free slots are a stack), and a second header of A would be
	 * the older of two copies all the same */
	start(&d, nvme);
	t_assert_eq(cd_recovered(d.sock), 1);
	read_a(d.sock, 2, NULL);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].promotions_out, 1);
	expect_no_leak(&d, &ts);
	cc_stop(&d);
	printf("promoted during its NVMe write; written again after it, recovered once\n");
}

static void stale_copy_dropped(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply dr;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[CC_PPB];
	struct td_daemon d;

	promote_during_write(&d, nvme, ids);
	/* A's old write still runs: A is kept */
	dr = cd_kvmmctl(d.sock, "--tier gpu");
	cd_expect(&dr, 0, 0, 0, 1, 0, 0);
	t_assert_eq(dr.kept_busy, 1);
	cp_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].bytes_in, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].bytes_in, BLOCK); /* it ended */
	t_assert_eq(ts.tiers[2].used_blocks, 0); /* its slot freed */
	t_assert_eq(ts.tiers[0].used_blocks, 1);
	expect_no_leak(&d, &ts);
	dr = cd_kvmmctl(d.sock, "--tier gpu");
	cd_expect(&dr, 1, 0, 0, 0, 0, 0);
	t_assert_eq(dr.nvme_stale_invalidated, 1);
	cc_stop(&d);

	start(&d, nvme);
	t_assert_eq(cd_recovered(d.sock), 0);
	cp_expect_miss(d.sock, ha);
	cc_stop(&d);
	printf("the old write's slot is a stale copy a drop of A invalidates\n");
}

int main(void)
{
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-publish-nvme-write");
	t_nvme_require(nvme);
	promoted_then_written_again(nvme);
	unlink(nvme);
	stale_copy_dropped(nvme);
	unlink(nvme);
	printf("ok: a publish during its block's NVMe write promotes it\n");
	return 0;
}
