// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A set-up of the cache that fails for a shortage is tried again once it
 * has passed, not left off until kvmmd restarts.  The shortage is a real
 * one: kvmmd's RLIMIT_NOFILE lowered from outside (prlimit, as an
 * operator's tooling or a too-tight LimitNOFILE= does) to the fds it
 * holds, after a client has connected and filled a sequence, so the
 * first publish's set-up cannot make the migration engine's eventfd.
 *
 *   - the publish fails with EIO; TIER_STATS (on the client's own
 *     connection: a new one needs an fd) says EMFILE, attempt 1, and the
 *     next attempt within 1 s; publishes when the waits are over, the
 *     limit still low, are attempts 2 and 3, which fail too and wait 2
 *     and 4 s (4 s leave the status checks below room on a loaded
 *     machine);
 *   - kvmmd holds the same fds and threads after each failed attempt;
 *   - the limit raised, a publish before the wait is over still fails
 *     (EIO) without an attempt, and kvmmctl status says `cache OFF: ...
 *     (attempt 3; retry in N s ...` and the metrics the errno and the
 *     attempts;
 *   - once the wait is over the next publish sets the cache up (attempt
 *     4) and caches every block; a prefix open from another process
 *     shares them, byte-identical; status says it was set up at attempt
 *     4, the errno gauge is 0 again and the last error stays.
 */
#include "tests/cache-open-common.h"

#include <sys/resource.h>

#define NB 3
#define TAG 7

static const struct cc_contents contents = { .base = 0x0e7f11e,
					     .tag0 = TAG,
					     .nb = NB };

static void expect_off(struct cc *c, uint64_t attempts, uint64_t max_ms,
		       struct kvmm_tier_stats_reply *ts)
{
	cc_tier_stats(c, ts);
	t_assert_eq(ts->cache_open_error, EMFILE);
	t_assert_eq(ts->cache_open_last_error, EMFILE);
	t_assert_eq(ts->cache_open_attempts, attempts);
	if (!ts->cache_open_retry_ms || ts->cache_open_retry_ms > max_ms)
		t_fail("the next attempt in %llu ms, expected 1 to %llu",
		       (unsigned long long)ts->cache_open_retry_ms,
		       (unsigned long long)max_ms);
	t_assert_eq(ts->tiers[0].capacity_blocks, 0); /* no tier set up */
	t_assert_eq(ts->publishes, 0);
}

int main(void)
{
	static char out[1 << 16];
	const char *args[] = { "--host-mem", "2M", "--cache-gpu-blocks", "8",
			       NULL };
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	struct rlimit old, low;
	struct co_usage u0, u;
	uint32_t ids[NB * CC_PPB];
	uint64_t h[NB];
	struct td_daemon d;
	struct cc c;
	uint32_t seq;
	char want[160];

	cc_start(&d, args);
	cc_content_hashes(&contents, 0, h);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, NB * CC_TPB, ids);
	cc_fill(&c, ids, NB, TAG);

	if (prlimit(d.pid, RLIMIT_NOFILE, NULL, &old)) {
		printf("skip: prlimit on kvmmd (pid %d): %s\n", (int)d.pid,
		       strerror(errno));
		cc_stop(&d);
		return 77;
	}
	co_usage(d.pid, &u0);
	low = old;
	low.rlim_cur = (rlim_t)u0.lowest_free_fd; /* no fd left to make */
	t_ok(prlimit(d.pid, RLIMIT_NOFILE, &low, NULL) ? -errno : 0);

	t_assert_eq(cc_publish(&c, seq, 0, h, NB, &rep), -EIO);
	expect_off(&c, 1, 1000, &ts);
	co_usage(d.pid, &u);
	t_assert_eq(u.fds, u0.fds);
	t_assert_eq(u.threads, u0.threads);

	/* due: attempts 2 and 3 meet the same limit, each waiting twice as
	 * long as the one before */
	for (int k = 2; k <= 3; k++) {
		co_wait_due(&c, &ts);
		t_assert_eq(cc_publish(&c, seq, 0, h, NB, &rep), -EIO);
		expect_off(&c, k, 1000u << (k - 1), &ts);
		co_usage(d.pid, &u);
		t_assert_eq(u.fds, u0.fds);
		t_assert_eq(u.threads, u0.threads);
	}

	/* the shortage is over, the wait is not: no attempt yet */
	t_ok(prlimit(d.pid, RLIMIT_NOFILE, &old, NULL) ? -errno : 0);
	t_assert_eq(cc_publish(&c, seq, 0, h, NB, &rep), -EIO);
	expect_off(&c, 3, 4000, &ts);
	t_assert(ts.cache_open_retry_ms > 2000); /* status comes first */
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (!strstr(out, "cache        OFF: setting up the tiers failed: Too "
			 "many open files (attempt 3; retry in "))
		t_fail("status:\n%s", out);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "kvmm_cache_tier_open_error{tier=\"cache\"} %d\n", EMFILE);
	t_assert(strstr(out, want) != NULL);
	t_assert(strstr(out, "kvmm_cache_open_attempts_total 3\n") != NULL);
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "\"cache_open_attempts\":3,\"cache_open_last_error\":%d,",
		 EMFILE);
	t_assert(strstr(out, want) != NULL);

	co_wait_due(&c, &ts);
	t_ok(cc_publish(&c, seq, 0, h, NB, &rep));
	t_assert_eq(rep.published, NB);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.cache_open_error, 0);
	t_assert_eq(ts.cache_open_last_error, EMFILE);
	t_assert_eq(ts.cache_open_attempts, 4);
	t_assert_eq(ts.cache_open_retry_ms, 0);
	t_assert_eq(ts.publishes, NB);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	co_usage(d.pid, &u);
	/* the engine's eventfd and its two workers, now it has them */
	t_assert_eq(u.fds, u0.fds + 1);
	t_assert_eq(u.threads, u0.threads + 2);

	/* another client shares the blocks, as they were written */
	cc_read_content(d.sock, &contents, 0, NB, 0);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (!strstr(out, "cache        set up at attempt 4 (the one before "
			 "failed: Too many open files)"))
		t_fail("status:\n%s", out);
	t_assert(strstr(out, "cache        OFF") == NULL);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	t_assert(strstr(out, "kvmm_cache_tier_open_error{tier=\"cache\"} 0\n"));
	snprintf(want, sizeof(want), "kvmm_cache_open_last_error %d\n", EMFILE);
	t_assert(strstr(out, want) != NULL);

	cc_seq_close(&c, seq, ids, NB * CC_PPB);
	cc_disconnect(&c);
	t_assert_eq(td_read_log(&d, out, sizeof(out)) > 0, 1);
	t_assert_eq(t_count(out,
			    "cache: setting up the tiers failed (attempt "),
		    3);
	t_assert_eq(t_count(out, "cache: the tiers are set up at attempt 4 "
				 "(the last one failed: Too many open files)"),
		    1);
	cc_stop(&d);
	printf("set-up failed 3 times under RLIMIT_NOFILE %d (kvmmd: %d fds, %ld threads, unchanged), worked at attempt 4 once raised\n",
	       u0.lowest_free_fd, u0.fds, u0.threads);
	return 0;
}
