// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * An NVMe tier whose writes keep failing loses no block whose host copy
 * is good, and is taken out of service for writes.  A real kvmmd (lru, 8
 * cached GPU blocks, 6 policy host slots, an NVMe file: cr_start()), its
 * migration engine failing host->NVMe writes with -EIO
 * (KVMMD_TEST_MIGRATE_FAIL=host-nvme:N+ or N-M), real writer and reader
 * processes:
 *   - every write fails: content 0 (8 blocks) pushed down by 7 blocks of
 *     content 1.  Block 0's write fails, it goes back to the host tier,
 *     whose LRU block (1) is written instead and fails, and so on: after
 *     4 failures in a row (blocks 0-3, each back on host:
 *     nvme_write_returns 4, migrations_failed 4) the tier is out of
 *     service for writes (nvme_write_outs 1, nvme_write_error EIO, a
 *     retry wait > 0), and the next host victim (block 4, the policy's
 *     LRU) is dropped instead of written: the only drop (tiers[1].drops
 *     1), 14 blocks cached, none on NVMe.  Blocks 0-3 and 5-7 open
 *     byte-identical in another process; block 4 is a miss.  kvmmctl
 *     status says "OUT of service for writes: Input/output error",
 *     --json and the metrics have the fields, the log one ERR line;
 *   - writes 1-4 fail, then work: the same until the tier is out; after
 *     the wait (KVMMD_TEST_CACHE_RETRY_MS=100) the next move down (a
 *     publish of content 2 pushes a host victim down) is written, works,
 *     and the tier takes writes again (nvme_write_error 0, one INFO
 *     line, the block on NVMe), status says "takes writes (out of
 *     service 1 times; 4 failed writes ...)"; everything cached opens
 *     byte-identical.
 * Each case ends with nothing leaked (cc_settled_stats(), the pool holds
 * the cached GPU blocks only).
 */
#include <errno.h>

#include "tests/cache-restore-common.h"
#include "tests/lib/metrics.h"

#define NVME_SLOTS 40

static void start(struct cr_env *env, const char *spec, const char *retry_ms)
{
	setenv("KVMMD_TEST_MIGRATE_FAIL", spec, 1);
	setenv("KVMMD_TEST_CACHE_RETRY_MS", retry_ms, 1);
	cr_start(env, NVME_SLOTS, 0);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	unsetenv("KVMMD_TEST_CACHE_RETRY_MS");
}

/* How many times what is in kvmmd's log. */
static int log_count(struct cr_env *env, const char *what)
{
	static char log[1 << 20];
	const char *p = log;
	int n = 0;

	t_assert(td_read_log(&env->d, log, sizeof(log)) > 0);
	while ((p = strstr(p, what))) {
		n++;
		p++;
	}
	return n;
}

static void check_clean(struct cr_env *env, struct kvmm_tier_stats_reply *ts)
{
	struct kvmm_status_reply st;

	cc_settled_stats(env->d.sock, ts);
	for (int i = 0; i < 1000; i++) {
		t_ok(td_status(&env->d, &st));
		if (st.sessions <= 1)
			break;
		usleep(10000);
	}
	t_assert_eq(st.pages_allocated, ts->tiers[0].used_blocks * CC_PPB);
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.pages_revoking, 0);
}

/*
 * Content 0 pushed down by 7 blocks of content 1 with the first four
 * writes failing: blocks 0-3 back on host, the tier out, block 4 dropped.
 */
static void four_fail(struct cr_env *env, struct kvmm_tier_stats_reply *ts)
{
	cr_write_blocks(env->d.sock, 0, CR_NB);
	cr_write_blocks(env->d.sock, 1, 7);
	check_clean(env, ts);
	printf("GPU %llu, host %llu, NVMe %llu blocks; drops %llu/%llu/%llu; writes failed %llu, back on host %llu, out %llu (errno %llu, retry %llu ms)\n",
	       (unsigned long long)ts->tiers[0].used_blocks,
	       (unsigned long long)ts->tiers[1].used_blocks,
	       (unsigned long long)ts->tiers[2].used_blocks,
	       (unsigned long long)ts->tiers[0].drops,
	       (unsigned long long)ts->tiers[1].drops,
	       (unsigned long long)ts->tiers[2].drops,
	       (unsigned long long)ts->migrations_failed,
	       (unsigned long long)ts->nvme_write_returns,
	       (unsigned long long)ts->nvme_write_outs,
	       (unsigned long long)ts->nvme_write_error,
	       (unsigned long long)ts->nvme_write_retry_ms);
	t_assert_eq(ts->migrations_failed, KVMM_NVME_WRITE_FAILS_OUT);
	t_assert_eq(ts->nvme_write_returns, KVMM_NVME_WRITE_FAILS_OUT);
	t_assert_eq(ts->nvme_write_outs, 1);
	t_assert_eq(ts->nvme_write_error, EIO);
	t_assert_eq(ts->tiers[2].demotions_in, KVMM_NVME_WRITE_FAILS_OUT);
	t_assert_eq(ts->nvme_admission_rejects, 0);
	/* one drop, the policy's host victim, not a block whose write
	 * failed */
	t_assert_eq(ts->tiers[1].drops, 1);
	t_assert_eq(cr_drops(ts), 1);
	t_assert_eq(cr_cached(ts), CR_NB + 7 - 1);
	t_assert_eq(ts->tiers[0].used_blocks, 8);
	t_assert_eq(ts->tiers[1].used_blocks, 6);
	t_assert_eq(ts->tiers[2].used_blocks, 0);
	t_assert_eq(
		log_count(
			env,
			"is out of service for writes: 4 writes in a row failed, the last with Input/output error"),
		1);
}

/* Every write fails: the tier stays out; nothing whose host copy was
 * good is lost but the policy's victim. */
static void all_fail(void)
{
	struct kvmm_tier_stats_reply ts;
	struct cr_env env;
	char *out;

	start(&env, "host-nvme:1+", "60000");
	four_fail(&env, &ts);
	t_assert(ts.nvme_write_retry_ms > 0 && ts.nvme_write_retry_ms <= 60000);
	out = tm_kvmmctl(env.d.sock, "status");
	t_assert_has(
		out,
		"tier nvme    OUT of service for writes: Input/output error (writes failed in a row; out 1 times; a write tries it again in ");
	free(out);
	out = tm_kvmmctl(env.d.sock, "status --json");
	t_assert_has(
		out,
		"\"nvme_write_returns\":4,\"nvme_write_outs\":1,\"nvme_write_error\":5,");
	free(out);
	out = tm_kvmmctl(env.d.sock, "metrics");
	t_assert_has(out, "\nkvmm_cache_nvme_write_returns_total 4\n");
	t_assert_has(out, "\nkvmm_cache_nvme_write_outs_total 1\n");
	t_assert_has(out, "\nkvmm_cache_nvme_write_error 5\n");
	free(out);
	/* blocks 0-3 from host, block 4 a miss, 5-6 host, 7 GPU */
	cr_open_from(env.d.sock, 0, 0, CR_NB, 4);
	cr_open_from(env.d.sock, 0, 5, 3, 3);
	check_clean(&env, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 0);
	/* the tier stays out: the content 1 blocks the opens pushed down
	 * were dropped, none written */
	t_assert_eq(ts.migrations_failed, KVMM_NVME_WRITE_FAILS_OUT);
	t_assert_eq(ts.nvme_write_outs, 1);
	t_assert_eq(ts.tiers[2].demotions_in, KVMM_NVME_WRITE_FAILS_OUT);
	cr_stop(&env);
}

/* Writes 1-4 fail, then work: the tier is out, and back at its next
 * move down once the wait is over. */
static void back_in(void)
{
	struct kvmm_tier_stats_reply ts;
	struct cr_env env;
	char *out;

	start(&env, "host-nvme:1-4", "100");
	four_fail(&env, &ts);
	usleep(250 * 1000); /* past the 100 ms wait */
	cc_settled_stats(env.d.sock, &ts);
	t_assert_eq(ts.nvme_write_retry_ms, 0);
	t_assert_eq(ts.nvme_write_error, EIO);
	/* one more GPU block: a GPU victim to host, a host victim to NVMe */
	cr_write_blocks(env.d.sock, 2, 1);
	check_clean(&env, &ts);
	t_assert_eq(ts.nvme_write_error, 0);
	t_assert_eq(ts.nvme_write_retry_ms, 0);
	t_assert_eq(ts.nvme_write_outs, 1);
	t_assert_eq(ts.migrations_failed, KVMM_NVME_WRITE_FAILS_OUT);
	t_assert_eq(ts.tiers[2].demotions_in, KVMM_NVME_WRITE_FAILS_OUT + 1);
	t_assert_eq(ts.tiers[2].used_blocks, 1);
	t_assert_eq(cr_drops(&ts), 1);
	t_assert_eq(cr_cached(&ts), CR_NB + 7 + 1 - 1);
	t_assert_eq(log_count(&env, "takes writes again: a write worked"), 1);
	out = tm_kvmmctl(env.d.sock, "status");
	t_assert_has(
		out,
		"tier nvme    takes writes (out of service 1 times; 4 failed writes went back to the host tier)");
	free(out);
	/* content 0's block 5 went on to NVMe (the host LRU once 0-3 came
	 * back and 4 was dropped): 0-3 open from host, 4 is the miss, 5
	 * comes from NVMe */
	cr_open_from(env.d.sock, 0, 0, CR_NB, 4);
	cr_open_from(env.d.sock, 0, 5, 3, 3);
	cr_open_from(env.d.sock, 2, 0, 1, 1);
	check_clean(&env, &ts);
	t_assert_eq(ts.tiers[2].hits, 1);
	t_assert_eq(ts.nvme_write_error, 0);
	cr_stop(&env);
}

int main(void)
{
	all_fail();
	back_in();
	printf("failed NVMe writes ok\n");
	return 0;
}
