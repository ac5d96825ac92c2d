// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A set-up of the cache that fails for a reason no wait mends (here
 * ENOTSUP, what a backend without async copies answers, injected with
 * KVMMD_TEST_CACHE_OPEN_FAIL=ENOTSUP:1 at the set-up's end) is not tried
 * again: the cache stays off until kvmmd restarts, and says so apart from
 * a shortage.  The waits are shortened (KVMMD_TEST_CACHE_RETRY_MS=10), so
 * a retry, were there one, would have come many times over.
 *
 *   - every publish fails with EIO, the attempts stay 1, TIER_STATS
 *     cache_open_retry_ms is UINT64_MAX (null in status --json);
 *   - kvmmctl status says `cache        OFF for good: ...`, the metrics
 *     kvmm_cache_open_retry_seconds +Inf, the log one ERR line that says
 *     no wait mends it;
 *   - a prefix open is answered, and finds nothing.
 */
#include "tests/cache-common.h"

#define NB 2

int main(void)
{
	static char out[1 << 16];
	const char *args[] = { "--host-mem", "2M", NULL };
	struct kvmm_prefix_open_reply prep;
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	const uint64_t h[NB] = { 0x900d1, 0x900d2 };
	uint32_t ids[NB * CC_PPB], pids[NB * CC_PPB];
	struct td_daemon d;
	struct cc c;
	uint32_t seq;
	int r;

	setenv("KVMMD_TEST_CACHE_OPEN_FAIL", "ENOTSUP:1", 1);
	setenv("KVMMD_TEST_CACHE_RETRY_MS", "10", 1);
	r = td_start(&d, args);
	unsetenv("KVMMD_TEST_CACHE_OPEN_FAIL");
	unsetenv("KVMMD_TEST_CACHE_RETRY_MS");
	if (r)
		t_fail("kvmmd did not start: %d", r);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, NB * CC_TPB, ids);
	for (int i = 0; i < 5; i++) {
		t_assert_eq(cc_publish(&c, seq, 0, h, NB, &rep), -EIO);
		cc_tier_stats(&c, &ts);
		t_assert_eq(ts.cache_open_attempts, 1);
		t_assert_eq(ts.cache_open_error, ENOTSUP);
		t_assert_eq(ts.cache_open_last_error, ENOTSUP);
		t_assert_eq(ts.cache_open_retry_ms, UINT64_MAX);
		usleep(50000); /* five times the first wait of a shortage */
	}
	cc_prefix(&c, h, NB, &prep, pids);
	t_assert_eq(prep.nr_blocks, 0);
	cc_seq_close(&c, prep.seq_id, pids, 0);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.cache_open_attempts, 1);

	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (!strstr(out, "cache        OFF for good: setting up the tiers "
			 "failed: Operation not supported, which no wait "
			 "mends (attempt 1;"))
		t_fail("status:\n%s", out);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	t_assert(strstr(out, "kvmm_cache_open_retry_seconds +Inf\n") != NULL);
	t_assert(strstr(out, "kvmm_cache_open_attempts_total 1\n") != NULL);
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	t_assert(strstr(out, "\"cache_open_attempts\":1,") != NULL);
	t_assert(strstr(out, "\"cache_open_retry_ms\":null,") != NULL);

	cc_seq_close(&c, seq, ids, NB * CC_PPB);
	cc_disconnect(&c);
	t_assert(td_read_log(&d, out, sizeof(out)) > 0);
	t_assert_eq(t_count(out, "cache: setting up the tiers failed"), 1);
	t_assert_eq(t_count(out, "which no wait mends); the cache is off for "
				 "good, until kvmmd restarts"),
		    1);
	cc_stop(&d);
	printf("set-up failed with ENOTSUP once: off for good, 5 publishes EIO, no other attempt\n");
	return 0;
}
