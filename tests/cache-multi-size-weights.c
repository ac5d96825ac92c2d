// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * Each cached block size's weight on the wire (ABI 1.25: TIER_STATS'
 * weights[], beside sizes[]; tiers.md, "Shares by weight"), and where
 * an operator reads it:
 *   1. --cache-block-pages 4:3,2:1 --host-mem 4M: TIER_STATS (744 bytes)
 *      lists sizes 4 and 2 with weights 3 and 1, the rest 0, in the sum
 *      and in each size's reply alike; their host tiers hold 12 slots of
 *      256 KiB and 8 of 128 KiB (3/4 and 1/4 of 4 MiB); kvmmctl status
 *      says "weight 3 of 4" and "weight 1 of 4" on each size's line,
 *      --json "weight" and "weights_total" in each size's object, and
 *      kvmmctl metrics and kvmmd's own exporter
 *      kvmm_size_weight{size="4"} 3 and {size="2"} 1;
 *   2. 2:1,4:3: the same weights, in the list's order (2 first);
 *   3. 4,2: weights 1 and 1 ("weight 1 of 2");
 *   4. 4 alone: nr_sizes 1, weights 1, 0, 0, 0; kvmmctl shows no size
 *      block (one size: the sums are its own), so no weight, and no
 *      kvmm_size_weight family; 4:5 alone: weight 5, as given;
 *   5. no --cache-block-pages, a model of 4 pages and one of 2
 *      publishing: both sizes cached, weights 0 and 0 (they share by no
 *      weight), kvmmctl status "not shared by weight" on each line,
 *      --json "weight":0;
 *   6. kvmmd playing 1.24 (KVMMD_TEST_ABI_MINOR=24) with 4:3,2:1: its
 *      728 bytes end before the weights (none sent), and
 *      kvmmctl status (text, --json), kvmmctl metrics and kvmmd's
 *      exporter show none; a client whose HELLO says 1.24 gets the 728
 *      bytes of a 1.25 kvmmd, its kvmmctl no weight either.
 * Fails on a kvmmd that sends no weights (728 bytes, or zeros) or puts
 * one beside the wrong size, and on a kvmmctl that shows none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/cache-multi-size-common.h"
#include "tests/lib/metrics.h"

#define TS_SIZE_1_24 offsetof(struct kvmm_tier_stats_reply, weights)

static char out[1 << 17];

/* TIER_STATS summed and of each size: sizes[] and weights[] as want,
 * nr of them, 0 past nr; the reply's whole 744 bytes. */
static void expect_weights(const char *sock, uint32_t nr, const uint32_t *sizes,
			   const uint32_t *weights)
{
	struct kvmm_tier_stats_reply ts;

	t_assert_eq(sizeof(ts), 744);
	for (uint32_t k = 0; k <= nr; k++) {
		if (k == 0)
			cc_settled_stats(sock, &ts);
		else
			ms_size_stats(sock, sizes[k - 1], &ts);
		t_assert_eq(ts.size, sizeof(ts));
		t_assert_eq(ts.nr_sizes, nr);
		for (uint32_t i = 0; i < KVMM_TIER_STATS_SIZES; i++) {
			t_assert_eq(ts.sizes[i], i < nr ? sizes[i] : 0);
			if (ts.weights[i] != (i < nr ? weights[i] : 0))
				t_fail("TIER_STATS of %u pages (0: the sum): weights[%u] %u, expected %u",
				       k ? sizes[k - 1] : 0, i, ts.weights[i],
				       i < nr ? weights[i] : 0);
		}
	}
}

/* `what` is in out exactly `times` times, else the test fails */
static void expect_out(const char *cmd, const char *what, int times)
{
	if (t_count(out, what) != times)
		t_fail("kvmmctl %s: \"%s\" %d times, expected %d:\n%s", cmd,
		       what, t_count(out, what), times, out);
}

/*
 * kvmmctl status (text, --json) and metrics, and kvmmd's exporter (port
 * > 0): each of the nr sizes with its weight of sum, or (sum 0) no
 * weight anywhere.
 */
static void expect_shown(const char *sock, int port, uint32_t nr,
			 const uint32_t *sizes, const uint32_t *weights,
			 uint32_t sum)
{
	static struct tm_expo k, e;
	struct tm_resp mr;
	char want[160], label[32];

	t_assert_eq(td_kvmmctl(sock, "status", out, sizeof(out)), 0);
	expect_out("status", ", weight ", sum && nr > 1 ? (int)nr : 0);
	for (uint32_t i = 0; sum && nr > 1 && i < nr; i++) {
		snprintf(want, sizeof(want),
			 "\nsize %-7u %u bytes a block, weight %u of %u; ",
			 sizes[i], sizes[i] * CC_PAGE, weights[i], sum);
		expect_out("status", want, 1);
	}
	t_assert_eq(td_kvmmctl(sock, "--json status", out, sizeof(out)), 0);
	expect_out("--json status", "\"weight\":", sum && nr > 1 ? (int)nr : 0);
	expect_out("--json status",
		   "\"weights_total\":", sum && nr > 1 ? (int)nr : 0);
	for (uint32_t i = 0; sum && nr > 1 && i < nr; i++) {
		snprintf(
			want, sizeof(want),
			"{\"block_pages\":%u,\"weight\":%u,\"weights_total\":%u,",
			sizes[i], weights[i], sum);
		expect_out("--json status", want, 1);
	}
	t_assert_eq(td_kvmmctl(sock, "metrics", out, sizeof(out)), 0);
	tm_parse(out, &k);
	if (port > 0) {
		tm_scrape(port, &mr);
		t_assert_eq(mr.code, 200);
		tm_parse(mr.body, &e);
		tm_resp_free(&mr);
	}
	for (uint32_t i = 0; i < nr; i++) {
		snprintf(label, sizeof(label), "size=\"%u\"", sizes[i]);
		if (!sum || nr < 2) {
			t_assert(!tm_value(&k, "kvmm_size_weight", label));
			t_assert(port <= 0 ||
				 !tm_value(&e, "kvmm_size_weight", label));
			continue;
		}
		t_assert_eq(tm_u64(&k, "kvmm_size_weight", label), weights[i]);
		if (port > 0)
			t_assert_eq(tm_u64(&e, "kvmm_size_weight", label),
				    weights[i]);
	}
	expect_out("metrics", "# TYPE kvmm_size_weight gauge\n", sum && nr > 1);
}

/* kvmmd with --cache-block-pages `sizes`, --host-mem 4M and its own
 * metrics exporter. */
static void start(struct td_daemon *d, const char *sizes)
{
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       sizes,
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "4M",
			       "--metrics-listen",
			       "127.0.0.1:0",
			       NULL };

	cc_start(d, args);
}

static void weighted(void)
{
	static const uint32_t sizes[] = { 4, 2 }, weights[] = { 3, 1 };
	static const uint32_t rsizes[] = { 2, 4 }, rweights[] = { 1, 3 };
	struct kvmm_tier_stats_reply a, b;
	struct td_daemon d;

	start(&d, "4:3,2:1");
	expect_weights(d.sock, 2, sizes, weights);
	/* the shares the weights gave: 3 MiB and 1 MiB of host memory */
	ms_size_stats(d.sock, 4, &a);
	ms_size_stats(d.sock, 2, &b);
	t_assert_eq(a.tiers[1].capacity_blocks, 12);
	t_assert_eq(b.tiers[1].capacity_blocks, 8);
	expect_shown(d.sock, tm_port(&d), 2, sizes, weights, 4);
	cc_stop(&d);
	printf("4:3,2:1: weights 3 and 1 on the wire, host 12 and 8 slots; kvmmctl 'weight 3 of 4', 'weight 1 of 4'\n");

	start(&d, "2:1,4:3");
	expect_weights(d.sock, 2, rsizes, rweights);
	expect_shown(d.sock, tm_port(&d), 2, rsizes, rweights, 4);
	cc_stop(&d);
	printf("2:1,4:3: weights 1 and 3, the list's order\n");
}

static void equal(void)
{
	static const uint32_t sizes[] = { 4, 2 }, weights[] = { 1, 1 };
	static const uint32_t one_size[] = { 4 }, one_weight[] = { 1 };
	static const uint32_t five[] = { 5 };
	struct td_daemon d;

	start(&d, "4,2");
	expect_weights(d.sock, 2, sizes, weights);
	expect_shown(d.sock, tm_port(&d), 2, sizes, weights, 2);
	cc_stop(&d);
	printf("4,2: weights 1 and 1, 'weight 1 of 2'\n");

	start(&d, "4");
	expect_weights(d.sock, 1, one_size, one_weight);
	expect_shown(d.sock, tm_port(&d), 1, one_size, one_weight, 1);
	cc_stop(&d);
	printf("4: one size, weight 1; no size block, no kvmm_size_weight\n");

	/* one size named with a weight: sent as given (it has all anyway) */
	start(&d, "4:5");
	expect_weights(d.sock, 1, one_size, five);
	cc_stop(&d);
	printf("4:5: one size, weight 5 as given\n");
}

/* Without --cache-block-pages: the sizes the models' regions brought. */
static void unnamed(void)
{
	static const uint32_t sizes[] = { 4, 2 }, weights[] = { 0, 0 };
	const char *args[] = { "--cache-policy", "lru", "--host-mem", "4M",
			       NULL };
	struct td_daemon d;

	cc_start(&d, args);
	for (uint32_t layers = 2; layers >= 1; layers--) {
		ms_write(d.sock, layers, 0);
		t_assert_eq(res->status, 0);
		t_assert_eq(res->published, NB);
	}
	expect_weights(d.sock, 2, sizes, weights);
	/* kvmmctl says they share by no weight, on each size's line */
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	expect_out("status", ", weight ", 0);
	expect_out(
		"status",
		"\nsize 4       262144 bytes a block, not shared by weight; ",
		1);
	expect_out(
		"status",
		"\nsize 2       131072 bytes a block, not shared by weight; ",
		1);
	t_assert_eq(td_kvmmctl(d.sock, "--json status", out, sizeof(out)), 0);
	expect_out("--json status", "\"weight\":0,\"weights_total\":0,", 2);
	cc_stop(&d);
	printf("no --cache-block-pages, sizes 4 and 2 from regions: weights 0 and 0, 'not shared by weight'\n");
}

/* A 1.24 client of this kvmmd: the 728 bytes of before; kvmmctl as one
 * shows no weight. */
static void old_client(void)
{
	static const uint32_t sizes[] = { 4, 2 }, weights[] = { 3, 1 };
	struct kvmm_tier_stats_reply r;
	struct td_daemon d;
	struct cc old;

	start(&d, "4:3,2:1");
	cc_connect_minor(&old, d.sock, 24);
	memset(&r, 0xa5, sizeof(r));
	t_ok(cc_call(&old, KVMM_CMD_TIER_STATS, NULL, 0, &r, sizeof(r), NULL,
		     NULL));
	t_assert_eq(r.size, TS_SIZE_1_24);
	t_assert_eq(r.size, 728);
	t_assert_eq(r.nr_sizes, 2);
	t_assert_eq(r.weights[0], 0xa5a5a5a5u); /* not sent */
	cc_disconnect(&old);
	t_ok(setenv("KVMM_TEST_HELLO_MINOR", "24", 1));
	expect_shown(d.sock, 0, 2, sizes, weights, 0);
	t_ok(unsetenv("KVMM_TEST_HELLO_MINOR"));
	/* as itself again: the weights */
	expect_shown(d.sock, 0, 2, sizes, weights, 4);
	cc_stop(&d);
	printf("a 1.24 client of 1.25: 728 bytes, no weight in kvmmctl\n");
}

/* kvmmd playing 1.24: its reply ends before the weights. */
static void old_daemon(void)
{
	static const uint32_t sizes[] = { 4, 2 }, weights[] = { 3, 1 };
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;

	t_ok(setenv("KVMMD_TEST_ABI_MINOR", "24", 1));
	start(&d, "4:3,2:1");
	t_ok(unsetenv("KVMMD_TEST_ABI_MINOR"));
	memset(&ts, 0xa5, sizeof(ts));
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.size, TS_SIZE_1_24);
	t_assert_eq(ts.nr_sizes, 2);
	t_assert_eq(ts.sizes[0], 4);
	t_assert_eq(ts.weights[0], 0xa5a5a5a5u); /* not sent */
	t_assert_eq(ts.weights[1], 0xa5a5a5a5u);
	expect_shown(d.sock, tm_port(&d), 2, sizes, weights, 0);
	cc_stop(&d);
	printf("kvmmd playing 1.24: 728 bytes, no weight in kvmmctl or the exporters\n");
}

int main(void)
{
	ms_res_init();
	weighted();
	equal();
	unnamed();
	old_client();
	old_daemon();
	return 0;
}
