// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * One size's NVMe partition that cannot open, the other's open: each
 * size's own metric families say which (kvmm_size_nvme_open_*{size}),
 * where the all-sizes ones (kvmm_cache_tier_open_error{tier="nvme"},
 * kvmm_cache_nvme_open_*) show only the first size that has an error.
 * --cache-block-pages 2,4 with --nvme-size 512K: a partition of 256 KiB
 * holds one slot of 128 KiB blocks (2 pages of 64 KiB) and none of 256
 * KiB ones.  The file's directory is made after the start (at start a
 * partition that cannot open stops the start): the first size's retries
 * claim the file, partition 0 (2 pages) opens and joins its cache, and
 * partition 1 (4 pages) fails with EINVAL, which no wait mends.  Then
 * kvmmctl metrics (and kvmmd's own exporter, the same formatter) has
 * kvmm_size_nvme_open_error{size="4"} 22 and retry +Inf, size="2" 0,
 * its last error the ENOENT it waited out; kvmmctl status says it under
 * `size 4` alone.  Before 7 December there were no such families.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT io_uring).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/cache-multi-size-common.h"
#include "tests/lib/metrics.h"
#include "tests/lib/nvme_probe.h"

/* Wait (at most 15 s) for the 2-page partition to join and the 4-page
 * one to fail for good. */
static void wait_settled(const char *sock, struct kvmm_tier_stats_reply *a,
			 struct kvmm_tier_stats_reply *b)
{
	uint64_t t0 = cc_now_ms();

	for (;;) {
		ms_size_stats(sock, 2, a);
		ms_size_stats(sock, 4, b);
		if (a->tiers[2].capacity_blocks && b->nvme_open_error == EINVAL)
			return;
		if (cc_now_ms() - t0 > 15000)
			t_fail("not settled in 15 s: 2 pages %llu slots, error %llu; 4 pages error %llu",
			       (unsigned long long)a->tiers[2].capacity_blocks,
			       (unsigned long long)a->nvme_open_error,
			       (unsigned long long)b->nvme_open_error);
		usleep(50000);
	}
}

int main(void)
{
	static char out[1 << 15], mout[1 << 17], log_buf[1 << 17];
	static struct tm_expo k;
	struct kvmm_tier_stats_reply a, b;
	char nvme[256], dir[300], file[320], line[512];
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "2,4",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "4M",
			       "--nvme-path",
			       file,
			       "--nvme-size",
			       "512K",
			       NULL };
	struct td_daemon d;
	const char *p2, *p4, *q;

	ms_res_init();
	cc_nvme_path(nvme, sizeof(nvme), "multi-size-nvme-open");
	if (!t_nvme_usable(nvme))
		t_skip("no O_DIRECT io_uring I/O in %s", nvme);
	unlink(nvme);
	snprintf(dir, sizeof(dir), "%s.d", nvme);
	snprintf(file, sizeof(file), "%s/tier", dir);
	cc_start_with_delay(&d, args, "KVMMD_TEST_CACHE_RETRY_MS", 100);
	t_ok(mkdir(dir, 0700));
	wait_settled(d.sock, &a, &b);
	t_assert_eq(a.tiers[2].capacity_blocks, 1);
	t_assert_eq(a.nvme_open_error, 0);
	t_assert_eq(b.tiers[2].capacity_blocks, 0);
	t_assert_eq(b.nvme_open_retry_ms, UINT64_MAX);
	snprintf(
		line, sizeof(line),
		"tier_nvme: %s (partition 1 of 2): 262144 bytes hold no slot of 266240 bytes",
		file);
	t_assert(td_read_log(&d, log_buf, sizeof(log_buf)) > 0);
	t_assert_eq(t_count(log_buf, line), 1);

	t_assert_eq(td_kvmmctl(d.sock, "metrics", mout, sizeof(mout)), 0);
	tm_parse(mout, &k);
	/* the sums: the 4-page size's error, the first that has one */
	t_assert_eq(tm_u64(&k, "kvmm_cache_tier_open_error", "tier=\"nvme\""),
		    EINVAL);
	/* each size's own */
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_open_error", "size=\"4\""),
		    EINVAL);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_open_error", "size=\"2\""), 0);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_open_last_error", "size=\"4\""),
		    EINVAL);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_open_last_error", "size=\"2\""),
		    ENOENT);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_open_attempts_total",
			   "size=\"4\""),
		    b.nvme_open_attempts);
	t_assert(b.nvme_open_attempts >= 1);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_open_attempts_total",
			   "size=\"2\""),
		    a.nvme_open_attempts);
	if (strcmp(tm_get(&k, "kvmm_size_nvme_open_retry_seconds",
			  "size=\"4\""),
		   "+Inf") ||
	    strcmp(tm_get(&k, "kvmm_size_nvme_open_retry_seconds",
			  "size=\"2\""),
		   "0.000"))
		t_fail("kvmm_size_nvme_open_retry_seconds:\n%s", mout);
	t_assert_eq(tm_u64(&k, "kvmm_size_nvme_write_error", "size=\"4\""), 0);
	t_assert_eq(tm_u64(&k, "kvmm_size_tier_capacity_blocks",
			   "size=\"2\",tier=\"nvme\""),
		    1);

	/* kvmmctl status: under size 4 alone */
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	p2 = strstr(out, "\nsize 2 ");
	p4 = strstr(out, "\nsize 4 ");
	if (!p2 || !p4 || p2 > p4 ||
	    !strstr(p4,
		    "\n  tier nvme    FAILED to open: Invalid argument, which no wait mends") ||
	    ((q = strstr(p2, "\n  tier nvme    FAILED")) && q < p4))
		t_fail("kvmmctl status:\n%s", out);
	cc_stop(&d);
	unlink(file);
	rmdir(dir);
	printf("one size's partition out: its own families say so, the other's 0\n");
	return 0;
}
