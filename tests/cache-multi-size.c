// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * One kvmmd caches the blocks of several models (a draft beside its
 * target, two models on one GPU), one cache a block size (pages per
 * block, 2 x a model's layers), KD_CACHE_SIZES (4) at most:
 *   - --cache-block-pages 4,2 --host-mem 4M: both sizes' tiers open at
 *     start (two log lines), each with half of --host-mem (8 slots of 256
 *     KiB, 16 of 128 KiB: the host tiers' slots together are no more than
 *     --host-mem; TIER_STATS' host capacity is their sum);
 *   - per size, in processes of their own: two contents of 2 blocks
 *     written through the mapped pages and published (each size's GPU
 *     keeps 2 blocks, --cache-gpu-blocks being per size: the first content
 *     goes to host memory); readers in other processes prefix-open both,
 *     the second shared from the GPU, the first restored from host
 *     memory, every byte the writer's; a size's hashes are not found in a
 *     region of the other size; TIER_STATS sums the sizes (8 publishes,
 *     4 hits from each tier);
 *   - a region of a third size (6 pages) is served without the cache:
 *     -EOPNOTSUPP and one WARN naming both sizes;
 *   - TIER_STATS of one size (ABI 1.21): each size's publishes, used
 *     blocks, demotions and hits move with its own model's traffic only,
 *     the two add up to the sum, a tier's block_bytes is the size's own,
 *     the reply names both sizes (4 first); a size not cached is -ENOENT;
 *   - kvmmctl status shows the sums, then each size's block (text and
 *     --json); kvmmd's metrics and kvmmctl metrics each size's too
 *     (size="4", size="2");
 *   - a pin of a block of each size holds that block's bytes (ADMIN_STATUS
 *     and kvmmctl sessions: 256 + 128 KiB, then 128 KiB once the larger is
 *     unpinned);
 *   - kvmmctl cache-drop drops both sizes' blocks, one reply with the
 *     sums; the blocks are gone;
 *   - the pool is one: the 2-page model's cached blocks in every page, an
 *     extend of the 4-page model demotes them to host memory (parked
 *     while the copies run), and they come back byte-identical;
 *   - without --cache-block-pages the first four sizes to publish are
 *     cached, the first with the host tier (its slots alone in TIER_STATS),
 *     and a fifth is refused with the WARN;
 *   - the NVMe tier of each named size: tests/cache-multi-size-nvme.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cache-multi-size-common.h"
#include "tests/lib/metrics.h"

/* The bytes of the host tiers' slots the log says were cut (one
 * "tier_host: N slots of B bytes" line a tier), and how many tiers. */
static uint64_t ms_host_bytes(const char *log, int *ntiers)
{
	const char *p = log;
	uint64_t sum = 0;

	*ntiers = 0;
	while ((p = strstr(p, "tier_host: "))) {
		unsigned long long n, b;

		p += strlen("tier_host: ");
		if (sscanf(p, "%llu slots of %llu bytes", &n, &b) != 2)
			continue;
		sum += n * b;
		(*ntiers)++;
	}
	return sum;
}

/*
 * TIER_STATS of the cache of blocks of `pages` alone (ms_size_stats()),
 * whose reply names the sizes cached either way: 4 and 2 here.
 */
static void named_size_stats(const char *sock, uint32_t pages,
			     struct kvmm_tier_stats_reply *ts)
{
	ms_size_stats(sock, pages, ts);
	t_assert_eq(ts->nr_sizes, 2);
	t_assert_eq(ts->sizes[0], 4); /* the first named first */
	t_assert_eq(ts->sizes[1], 2);
}

/*
 * Each size's TIER_STATS against the sum's: every counter of a tier
 * (but the NVMe tier's, the first size's file) and the publishes are
 * the two sizes' added up, and a tier's block_bytes is each size's own.
 */
static void ms_sizes_add_up(const char *sock)
{
	struct kvmm_tier_stats_reply sum, a, b;

	named_size_stats(sock, 4, &a);
	named_size_stats(sock, 2, &b);
	cc_settled_stats(sock, &sum);
	t_assert_eq(sum.block_pages, 0);
	t_assert_eq(sum.nr_sizes, 2);
	t_assert_eq(a.publishes + b.publishes, sum.publishes);
	t_assert_eq(a.prefix_blocks_hit + b.prefix_blocks_hit,
		    sum.prefix_blocks_hit);
	for (int t = 0; t < 2; t++) {
		t_assert_eq(a.tiers[t].used_blocks + b.tiers[t].used_blocks,
			    sum.tiers[t].used_blocks);
		t_assert_eq(a.tiers[t].capacity_blocks +
				    b.tiers[t].capacity_blocks,
			    sum.tiers[t].capacity_blocks);
		t_assert_eq(a.tiers[t].hits + b.tiers[t].hits,
			    sum.tiers[t].hits);
		t_assert_eq(a.tiers[t].demotions_in + b.tiers[t].demotions_in,
			    sum.tiers[t].demotions_in);
		t_assert_eq(a.tiers[t].block_bytes, 4 * CC_PAGE);
		t_assert_eq(b.tiers[t].block_bytes, 2 * CC_PAGE);
	}
}

static void named_sizes(void)
{
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4,2",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "4M",
			       "--metrics-listen",
			       "127.0.0.1:0",
			       "--pin-quota",
			       "4",
			       NULL };
	struct kvmm_admin_cache_drop_reply dr;
	static struct tm_expo e;
	struct tm_resp mr;
	struct kvmm_tier_stats_reply ts;
	static char log[1 << 16];
	static char out[8192];
	const uint32_t layers[2] = { 2, 1 };
	struct td_daemon d;
	int ntiers;

	cc_start(&d, args);
	t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
	/* both sizes' tiers opened at start, before any client */
	t_assert_eq(t_count(log,
			    "cache: blocks of 4 pages (--cache-block-pages)"),
		    1);
	t_assert_eq(t_count(log,
			    "cache: blocks of 2 pages (--cache-block-pages)"),
		    1);
	/* half of --host-mem each, no more than it together */
	t_assert_eq(t_count(log, "tier_host: 8 slots of 262144 bytes"), 1);
	t_assert_eq(t_count(log, "tier_host: 16 slots of 131072 bytes"), 1);
	t_assert(ms_host_bytes(log, &ntiers) <= 4ull << 20);
	t_assert_eq(ntiers, 2);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].capacity_blocks, 8 + 16);
	t_assert_eq(ts.tiers[0].capacity_blocks, 2 + 2);

	/* each size's own TIER_STATS: nothing yet; no cache of 6 pages */
	{
		struct kvmm_tier_stats_reply one;
		struct kvmm_conn *c;

		named_size_stats(d.sock, 2, &one);
		t_assert_eq(one.tiers[1].capacity_blocks, 16);
		t_assert_eq(one.publishes, 0);
		t_ok(kc_connect_admin(d.sock, &c));
		t_assert_eq(kvmm_tier_stats_size(c, 6, &one, sizeof(one)),
			    -ENOENT);
		kvmm_disconnect(c);
	}
	for (int i = 0; i < 2; i++) {
		struct kvmm_tier_stats_reply own, other;

		for (int k = 0; k < 2; k++) {
			ms_write(d.sock, layers[i], k);
			t_assert_eq(res->status, 0);
			t_assert_eq(res->published, NB);
		}
		/* this model's traffic moved its size's figures alone */
		named_size_stats(d.sock, 2 * layers[i], &own);
		named_size_stats(d.sock, 2 * layers[1 - i], &other);
		t_assert_eq(own.publishes, 2 * NB);
		t_assert_eq(own.tiers[0].used_blocks, NB);
		t_assert_eq(own.tiers[1].used_blocks, NB);
		t_assert_eq(own.tiers[1].demotions_in, NB);
		t_assert_eq(other.publishes, i ? 2 * NB : 0);
		t_assert_eq(other.tiers[0].used_blocks, i ? NB : 0);
		t_assert_eq(other.tiers[1].demotions_in, i ? NB : 0);
	}
	ms_sizes_add_up(d.sock);
	/* each size's GPU holds its second content, its host its first */
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.publishes, 4 * NB);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[1].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[1].demotions_in, 2 * NB);
	for (int i = 0; i < 2; i++) {
		struct kvmm_tier_stats_reply own, other;

		ms_expect_read(d.sock, layers[i], 1, 0); /* shared */
		ms_expect_read(d.sock, layers[i], 0, 1); /* restored */
		/* the other size's blocks are not this size's */
		ms_read(d.sock, layers[i], layers[1 - i], 0);
		t_assert_eq(res->found, 0);
		/* the hits are this size's; the other's move with its own
		 * reads only (the second model's, after this one's) */
		named_size_stats(d.sock, 2 * layers[i], &own);
		named_size_stats(d.sock, 2 * layers[1 - i], &other);
		t_assert_eq(own.tiers[0].hits, NB);
		t_assert_eq(own.tiers[1].hits, NB);
		t_assert_eq(own.tiers[1].promotions_out, NB);
		t_assert_eq(other.tiers[0].hits, i ? NB : 0);
		t_assert_eq(other.tiers[1].hits, i ? NB : 0);
	}
	ms_sizes_add_up(d.sock);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].hits, 2 * NB);
	t_assert_eq(ts.tiers[1].hits, 2 * NB);
	t_assert_eq(ts.tiers[1].promotions_out, 2 * NB);
	t_assert(ts.tiers[1].used_blocks <= 8 + 16);

	/* a third size: not cached, said once */
	ms_write(d.sock, 3, 0);
	t_assert_eq(res->status, -EOPNOTSUPP);
	ms_write(d.sock, 3, 1);
	t_assert_eq(res->status, -EOPNOTSUPP);
	t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
	t_assert_eq(
		t_count(log,
			"has blocks of 6 pages, the cache's have 4,2 (--cache-block-pages): its blocks are not cached"),
		2); /* one region each */
	t_assert_eq(t_count(log, "its blocks are not cached"), 2);

	/* kvmmctl status shows the sums, then each size's block */
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	t_assert(
		strstr(out, "\ntier host    4/24 blocks, 4 hits, 8 in, 4 out"));
	t_assert(strstr(out, "\nsizes        2 block sizes cached"));
	t_assert(strstr(
		out,
		"\nsize 4       262144 bytes a block, weight 1 of 2; 4 published, 4 prefix blocks hit of 6 asked, 1 misses, 0 demotions queued\n"
		"  tier gpu     2/2 blocks, 2 hits, 0 in, 0 out, 0 dropped\n"
		"  tier host    2/8 blocks, 2 hits, 4 in, 2 out, 0 dropped"));
	t_assert(strstr(
		out,
		"\nsize 2       131072 bytes a block, weight 1 of 2; 4 published, 4 prefix blocks hit of 6 asked, 1 misses, 0 demotions queued\n"
		"  tier gpu     2/2 blocks, 2 hits, 0 in, 0 out, 0 dropped\n"
		"  tier host    2/16 blocks, 2 hits, 4 in, 2 out, 0 dropped"));
	t_assert_eq(td_kvmmctl(d.sock, "--json status", out, sizeof(out)), 0);
	t_assert(strstr(
		out,
		",\"sizes\":[{\"block_pages\":4,\"weight\":1,\"weights_total\":2,\"demotions_queued\":0,\"publishes\":4,"));
	t_assert(strstr(
		out,
		"},{\"block_pages\":2,\"weight\":1,\"weights_total\":2,\"demotions_queued\":0,\"publishes\":4,"));
	t_assert(strstr(out,
			"\"host\":{\"capacity_blocks\":16,\"used_blocks\":2,"
			"\"block_bytes\":131072,"));
	/* kvmmctl metrics: the per-size families of kvmmd's own, the same
	 * values (both read each size's TIER_STATS) */
	{
		static struct tm_expo k;
		static char mout[1 << 17];

		t_assert_eq(td_kvmmctl(d.sock, "metrics", mout, sizeof(mout)),
			    0);
		tm_parse(mout, &k);
		t_assert_eq(tm_u64(&k, "kvmm_size_tier_capacity_blocks",
				   "size=\"2\",tier=\"host\""),
			    16);
		t_assert_eq(tm_u64(&k, "kvmm_size_tier_hits_total",
				   "size=\"4\",tier=\"gpu\""),
			    NB);
		t_assert_eq(tm_u64(&k, "kvmm_size_publishes_total",
				   "size=\"2\""),
			    2 * NB);
	}
	/* kvmmd's metrics each size's, labelled by its pages a block */
	tm_scrape(tm_port(&d), &mr);
	tm_parse(mr.body, &e);
	t_assert_eq(tm_u64(&e, "kvmm_tier_capacity_blocks", "tier=\"host\""),
		    24);
	t_assert_eq(tm_u64(&e, "kvmm_size_tier_capacity_blocks",
			   "size=\"4\",tier=\"host\""),
		    8);
	t_assert_eq(tm_u64(&e, "kvmm_size_tier_capacity_blocks",
			   "size=\"2\",tier=\"host\""),
		    16);
	t_assert_eq(tm_u64(&e, "kvmm_size_tier_block_bytes",
			   "size=\"2\",tier=\"gpu\""),
		    131072);
	for (int i = 0; i < 2; i++) {
		char l[64];

		snprintf(l, sizeof(l), "size=\"%u\"", 2 * layers[i]);
		t_assert_eq(tm_u64(&e, "kvmm_size_publishes_total", l), 2 * NB);
		snprintf(l, sizeof(l), "size=\"%u\",tier=\"host\"",
			 2 * layers[i]);
		t_assert_eq(tm_u64(&e, "kvmm_size_tier_hits_total", l), NB);
		t_assert_eq(tm_u64(&e, "kvmm_size_tier_used_blocks", l), NB);
	}
	tm_resp_free(&mr);

	/* a pin of a block of each size holds each its own bytes: 256 KiB
	 * and 128 KiB, where kvmmd counted every pin at the first size's */
	{
		struct kvmm_block_pin bp = { .size = sizeof(bp) };
		struct kvmm_block_pin_reply pr;
		struct kvmm_status_reply st;
		uint64_t h[NB];
		struct cc c;

		cc_connect(&c, d.sock);
		for (int i = 0; i < 2; i++) {
			ms_region(&c, layers[i]);
			ms_hashes(layers[i], 1, h);
			bp.hash = h[0];
			t_ok(cc_call(&c, KVMM_CMD_BLOCK_PIN, &bp, sizeof(bp),
				     &pr, sizeof(pr), NULL, NULL));
		}
		t_ok(cc_call(&c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
			     sizeof(st), NULL, NULL));
		t_assert_eq(st.pins, 2);
		t_assert_eq(st.pinned_bytes, 262144 + 131072);
		t_assert_eq(td_kvmmctl(d.sock, "sessions --json", out,
				       sizeof(out)),
			    0);
		t_assert(strstr(out, "\"pinned_bytes\": 393216") ||
			 strstr(out, "\"pinned_bytes\":393216"));
		/* the 256 KiB block's pin gone: the 128 KiB one's left */
		{
			struct kvmm_block_unpin bu = { .size = sizeof(bu) };

			ms_hashes(layers[0], 1, h);
			bu.hash = h[0];
			t_ok(cc_call(&c, KVMM_CMD_BLOCK_UNPIN, &bu, sizeof(bu),
				     NULL, 0, NULL, NULL));
		}
		t_ok(cc_call(&c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
			     sizeof(st), NULL, NULL));
		t_assert_eq(st.pins, 1);
		t_assert_eq(st.pinned_bytes, 131072);
		cc_disconnect(&c);
	}

	/* a drop of every tier: both sizes' blocks, one reply */
	cc_settled_stats(d.sock, &ts);
	dr = cd_kvmmctl(d.sock, "");
	cd_expect(&dr, ts.tiers[0].used_blocks, ts.tiers[1].used_blocks, 0, 0,
		  0, 0);
	t_assert_eq(dr.dropped[0] + dr.dropped[1], 4 * NB);
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 2; k++) {
			ms_read(d.sock, layers[i], layers[i], k);
			t_assert_eq(res->found, 0);
		}
	cc_stop(&d);
	printf("two named sizes: both cached, demoted and restored, dropped\n");
}

/*
 * The pool is one for every size: with the 2-page size's cached blocks
 * in all 32 pages, the 4-page model's extend demotes the other size's
 * least recently used blocks (and parks while their copies run), and
 * they come back from host memory byte-identical.
 */
static void pool_pressure(void)
{
	const char *args[] = { "--gpu-mem",
			       "2M",
			       "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4,2",
			       "--cache-gpu-blocks",
			       "16",
			       "--host-mem",
			       "4M",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;

	cc_start(&d, args);
	for (int k = 0; k < 8; k++) {
		ms_write(d.sock, 1, k);
		t_assert_eq(res->published, NB);
	}
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 8 * NB); /* the whole pool */
	t_assert_eq(ts.pressure_reclaims, 0);
	ms_write(d.sock, 2, 0);
	t_assert_eq(res->status, 0);
	t_assert_eq(res->published, NB);
	cc_settled_stats(d.sock, &ts);
	/* 8 pages: 4 blocks of the other size moved to host memory */
	t_assert_eq(ts.pressure_reclaims, 4);
	t_assert_eq(ts.tiers[1].used_blocks, 4);
	ms_expect_read(d.sock, 1, 0, 1);
	ms_expect_read(d.sock, 2, 0, 0);
	cc_stop(&d);
	printf("pool pressure: the other size's blocks demoted for an extend\n");
}

static void unnamed_sizes(void)
{
	const char *args[] = { "--cache-policy", "lru", "--host-mem", "1M",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	static char log[1 << 16];
	struct td_daemon d;

	cc_start(&d, args);
	for (uint32_t layers = 1; layers <= 5; layers++) {
		ms_write(d.sock, layers, 0);
		t_assert_eq(res->status, layers < 5 ? 0 : -EOPNOTSUPP);
		t_assert_eq(res->published, layers < 5 ? NB : 0);
	}
	for (uint32_t layers = 1; layers < 5; layers++)
		ms_expect_read(d.sock, layers, 0, 0);
	t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
	t_assert_eq(
		t_count(log,
			"cache: blocks of 2 pages (the first region to use the cache)"),
		1);
	for (uint32_t ppb = 4; ppb <= 8; ppb += 2) {
		char line[96];

		snprintf(
			line, sizeof(line),
			"cache: blocks of %u pages (the first region of a new size)",
			ppb);
		t_assert_eq(t_count(log, line), 1);
	}
	t_assert_eq(
		t_count(log,
			"has blocks of 10 pages, the cache's have 2,4,6,8 (the first regions to use it, sizes at most 4): its blocks are not cached"),
		1);
	/* only the first size has the host tier (1 MiB: 8 slots of 128
	 * KiB) */
	t_assert_eq(t_count(log, "tier_host: "), 1);
	t_assert_eq(t_count(log, "tier_host: 8 slots of 131072 bytes"), 1);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].capacity_blocks, 8);
	t_assert_eq(ts.publishes, 4 * NB);
	t_assert_eq(ts.tiers[0].used_blocks, 4 * NB);
	t_assert_eq(ts.tiers[0].hits, 4 * NB);
	cc_stop(&d);
	printf("unnamed: four sizes cached, the fifth refused\n");
}

/*
 * Without --cache-gpu-blocks each named size caches at most its share of
 * half the pool (64 MiB of 64 KiB pages: 512 pages), by its weight as
 * --host-mem: 4,2 gives 256 pages each (64 blocks of 4 pages, 128 of 2),
 * 4:3,2:1 gives 384 and 128 (96 and 64).  Until 7 December the GPU was
 * split equally whatever the weights.
 */
static void gpu_shares(void)
{
	static const struct {
		const char *sizes;
		uint64_t gpu4, gpu2;
	} runs[] = { { "4,2", 64, 128 }, { "4:3,2:1", 96, 64 } };

	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		const char *args[] = { "--cache-policy",
				       "lru",
				       "--cache-block-pages",
				       runs[i].sizes,
				       "--host-mem",
				       "4M",
				       NULL };
		struct kvmm_tier_stats_reply a, b, sum;
		static char log[1 << 16];
		struct td_daemon d;

		cc_start(&d, args);
		ms_size_stats(d.sock, 4, &a);
		ms_size_stats(d.sock, 2, &b);
		t_assert_eq(a.tiers[0].capacity_blocks, runs[i].gpu4);
		t_assert_eq(b.tiers[0].capacity_blocks, runs[i].gpu2);
		cc_settled_stats(d.sock, &sum);
		t_assert_eq(sum.tiers[0].capacity_blocks,
			    runs[i].gpu4 + runs[i].gpu2);
		t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
		t_assert_eq(
			t_count(log,
				"a share of 3/4 of --host-mem, the NVMe file and half the GPU pool); GPU 96,"),
			i == 1);
		cc_stop(&d);
		printf("--cache-block-pages %s: GPU %llu blocks of 4 pages, %llu of 2\n",
		       runs[i].sizes, (unsigned long long)runs[i].gpu4,
		       (unsigned long long)runs[i].gpu2);
	}
}

int main(void)
{
	ms_res_init();
	named_sizes();
	pool_pressure();
	unnamed_sizes();
	gpu_shares();
	return 0;
}
