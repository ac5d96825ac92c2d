// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * A failed set-up of the cache takes down everything it built, and the
 * attempt that works finds what is on disk.  The set-up is made to fail
 * at its very end (KVMMD_TEST_CACHE_OPEN_FAIL=ENOMEM:12, after the host
 * tier, the NVMe tier's blocks in the index, the policy, the migration
 * engine's two workers and its eventfd in the loop), 12 times, with the
 * waits between attempts shortened (KVMMD_TEST_CACHE_RETRY_MS=10: 10 ms,
 * doubling to 600 ms).  The daemon has an NVMe tier holding 4 blocks a
 * previous run saved at its stop, opened at start.
 *
 *   - every attempt is counted (TIER_STATS cache_open_attempts), each
 *     publish fails with EIO, the waits grow;
 *   - from the 2nd failure to the 12th kvmmd holds the same fds (as
 *     before the first), the same threads (the workers joined), and its
 *     memory (VmRSS, VmSize) does not grow with the attempts (not under
 *     ASan, whose freed memory is held in quarantine: its leak check at
 *     the stop sees a leak there);
 *   - the 13th attempt works: the publish caches its blocks, the NVMe
 *     blocks count once as recovered (not once per attempt) and both
 *     saved contents come back from NVMe, byte-identical, in another
 *     process; the new content is shared from the GPU;
 *   - kvmmd then holds one fd and two threads more (the engine's).
 */
#include "tests/cache-open-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 2
#define FAILS 12
#define SAVED 2 /* contents saved on NVMe by the first kvmmd */

#if defined(__SANITIZE_ADDRESS__)
#define CO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CO_ASAN 1
#endif
#endif
#ifndef CO_ASAN
#define CO_ASAN 0
#endif

static const struct cc_contents contents = { .base = 0x0e7d0e,
					     .tag0 = 40,
					     .nb = NB };

int main(void)
{
	static char log[1 << 16];
	struct nca_args first, unnamed;
	const char *const *args;
	char nvme[256];
	struct kvmm_block_publish_reply rep;
	struct kvmm_tier_stats_reply ts;
	struct co_usage u0, u2 = { 0 }, u;
	uint32_t ids[NB * CC_PPB];
	uint64_t h[NB], last_wait = 0;
	struct td_daemon d;
	struct cc c;
	uint32_t seq;
	int r;

	cc_nvme_path(nvme, sizeof(nvme), "open-retry-undo");
	t_nvme_require(nvme);
	/* the block size unnamed: the first publish sets the tiers up */
	args = nca_save_args(&unnamed, nvme, 2, 16, NULL, NCA_BLOCK_UNNAMED);

	/* a run that leaves SAVED contents on NVMe at its stop */
	cc_start(&d, nca_save_args(&first, nvme, 2, 16, "10000", 0));
	for (int k = 0; k < SAVED; k++)
		cc_write_content(d.sock, &contents, k);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(t_count(log, "cache: stopping: 4 blocks written to NVMe"),
		    1);

	setenv("KVMMD_TEST_CACHE_OPEN_FAIL", "ENOMEM:12", 1);
	setenv("KVMMD_TEST_CACHE_RETRY_MS", "10", 1);
	r = td_start(&d, args);
	unsetenv("KVMMD_TEST_CACHE_OPEN_FAIL");
	unsetenv("KVMMD_TEST_CACHE_RETRY_MS");
	if (r)
		t_fail("kvmmd did not start: %d", r);
	cc_content_hashes(&contents, SAVED, h);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, NB * CC_TPB, ids);
	cc_fill(&c, ids, NB, contents.tag0 + SAVED);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.recovered_blocks, SAVED * NB); /* opened at start */
	t_assert_eq(ts.cache_open_attempts, 0);
	co_usage(d.pid, &u0);

	for (int i = 1; i <= FAILS; i++) {
		co_wait_due(&c, &ts);
		t_assert_eq(cc_publish(&c, seq, 0, h, NB, &rep), -EIO);
		cc_tier_stats(&c, &ts);
		t_assert_eq(ts.cache_open_attempts, i);
		t_assert_eq(ts.cache_open_error, ENOMEM);
		t_assert_eq(ts.cache_open_last_error, ENOMEM);
		/* 10 ms, doubling, at most 600 ms */
		t_assert(ts.cache_open_retry_ms <= 600);
		t_assert(ts.cache_open_retry_ms + 5 >= last_wait ||
			 ts.cache_open_retry_ms > 500);
		last_wait = ts.cache_open_retry_ms;
		/* the tier's own count before the set-up, every time */
		t_assert_eq(ts.recovered_blocks, SAVED * NB);
		t_assert_eq(ts.publishes, 0);
		co_usage(d.pid, &u);
		if (u.fds != u0.fds || u.threads != u0.threads)
			t_fail("after attempt %d: %d fds, %ld threads; %d and %ld before the first",
			       i, u.fds, u.threads, u0.fds, u0.threads);
		if (i == 2)
			u2 = u;
	}
	printf("after %d failed set-ups: %d fds, %ld threads (as before the first); VmRSS %ld KiB, VmSize %ld KiB (%ld and %ld after the 2nd)\n",
	       FAILS, u.fds, u.threads, u.rss_kib, u.size_kib, u2.rss_kib,
	       u2.size_kib);
	if (!CO_ASAN) {
		/* one attempt builds a few hundred KiB (policy, slot tables,
		 * the engine's page map) and reserves 64 MiB of addresses */
		t_assert(u.rss_kib - u2.rss_kib < 1024);
		t_assert(u.size_kib - u2.size_kib < 1024);
	}

	co_wait_due(&c, &ts);
	t_ok(cc_publish(&c, seq, 0, h, NB, &rep));
	t_assert_eq(rep.published, NB);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.cache_open_attempts, FAILS + 1);
	t_assert_eq(ts.cache_open_error, 0);
	t_assert_eq(ts.cache_open_last_error, ENOMEM);
	t_assert_eq(ts.recovered_blocks, SAVED * NB);
	t_assert_eq(ts.tiers[2].used_blocks, SAVED * NB);
	co_usage(d.pid, &u);
	t_assert_eq(u.fds, u0.fds + 1);
	t_assert_eq(u.threads, u0.threads + 2);
	for (int k = 0; k < SAVED; k++)
		cc_read_content(d.sock, &contents, k, NB, 2);
	cc_read_content(d.sock, &contents, SAVED, NB, 0);

	cc_seq_close(&c, seq, ids, NB * CC_PPB);
	cc_disconnect(&c);
	t_assert(td_read_log(&d, log, sizeof(log)) > 0);
	t_assert_eq(t_count(log,
			    "cache: setting up the tiers failed (attempt "),
		    FAILS);
	t_assert_eq(t_count(log, "cache: the tiers are set up at attempt 13"),
		    1);
	cc_stop(&d);
	unlink(nvme);
	printf("set up at attempt %d; the %d NVMe blocks saved before came back\n",
	       FAILS + 1, SAVED * NB);
	return 0;
}
