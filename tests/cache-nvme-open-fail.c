// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * An NVMe tier that cannot open when the block size becomes known (the
 * first publish, without --cache-block-pages): here a --nvme-size too
 * small for one slot of the first region's blocks, which the start cannot
 * judge.  The whole cache was off for good then (the first publish failed,
 * every later one with EIO) and kvmmctl status and the metrics showed
 * nothing wrong.  Now the cache runs on the GPU and host tiers without the
 * NVMe tier: every publish is cached, blocks pushed off the GPU come back
 * from the host tier, and TIER_STATS (nvme_open_error), kvmmctl status
 * and the metrics say the NVMe tier failed and why.  A size that holds no
 * slot is a failure no wait mends (-EINVAL; -ENOSPC until 1.15, which
 * now means a full disk, waited out): tried once, never again (with waits
 * of 20 ms, over 400 ms), one ERR line, nvme_open_retry_ms UINT64_MAX,
 * `+Inf` in the metrics.
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#include <errno.h>

#define NB 3

static const struct cc_contents contents = { .base = 0x320000,
					     .tag0 = 600,
					     .nb = NB };

int main(void)
{
	static char out[1 << 16];
	char nvme[256], want[128];
	/* 64 KiB hold no slot of a 256 KiB block (4 pages of 64 KiB) */
	const char *args[] = { "--host-mem",  "2M",  "--nvme-path",	   nvme,
			       "--nvme-size", "64K", "--cache-gpu-blocks", "3",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	const char *p;
	int lines = 0;

	cc_nvme_path(nvme, sizeof(nvme), "open-fail");
	cc_start_with_delay(&d, (const char **)args,
			    "KVMMD_TEST_CACHE_RETRY_MS", 20);
	for (int k = 0; k < 3; k++)
		cc_write_content(d.sock, &contents, k);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.publishes, 3 * NB);
	t_assert_eq(ts.nvme_open_error, EINVAL);
	t_assert_eq(ts.nvme_open_attempts, 1);
	t_assert_eq(ts.nvme_open_last_error, EINVAL);
	t_assert_eq(ts.nvme_open_retry_ms, UINT64_MAX);
	t_assert_eq(ts.cache_open_error, 0);
	t_assert_eq(ts.tiers[2].capacity_blocks, 0);
	t_assert(ts.tiers[1].capacity_blocks > 0);
	t_assert_eq(ts.tiers[1].used_blocks, 2 * NB);
	/* content 0 went down to the host tier and comes back from it */
	cc_read_content(d.sock, &contents, 0, NB, 1);

	/* 20 times the first wait: no attempt came */
	usleep(400000);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.nvme_open_attempts, 1);
	t_assert_eq(ts.nvme_open_error, EINVAL);

	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (!strstr(out, "tier nvme    FAILED to open: Invalid argument"))
		printf("%s", out);
	t_assert(
		strstr(out,
		       "tier nvme    FAILED to open: Invalid argument, which no "
		       "wait mends (attempt 1; the cache runs without it") !=
		NULL);
	t_assert(strstr(out, "cache        OFF") == NULL);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "kvmm_cache_tier_open_error{tier=\"nvme\"} %d\n", EINVAL);
	t_assert(strstr(out, want) != NULL);
	t_assert(strstr(out, "kvmm_cache_nvme_open_retry_seconds +Inf\n"));
	t_assert(strstr(out, "kvmm_cache_nvme_open_attempts_total 1\n"));
	t_assert(
		strstr(out, "kvmm_cache_tier_open_error{tier=\"cache\"} 0\n") !=
		NULL);
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	t_assert(
		strstr(out, "\"cache_open_error\":0,\"nvme_open_error\":22,") !=
		NULL);
	t_assert(strstr(
		out,
		"\"nvme_open_attempts\":1,\"nvme_open_last_error\":22,\"nvme_open_retry_ms\":null,"));
	t_ok(td_stop_log(&d, out, sizeof(out)));
	for (p = out; (p = strstr(p, "which no wait mends")); p++)
		lines++;
	if (lines != 1)
		t_fail("%d lines say no wait mends it:\n%s", lines, out);
	unlink(nvme);
	printf("nvme open failure ok\n");
	return 0;
}
