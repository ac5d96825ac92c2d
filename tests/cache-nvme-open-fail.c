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
 * and the metrics say the NVMe tier failed and why.
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

	cc_nvme_path(nvme, sizeof(nvme), "open-fail");
	cc_start(&d, args);
	for (int k = 0; k < 3; k++)
		cc_write_content(d.sock, &contents, k);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.publishes, 3 * NB);
	t_assert_eq(ts.nvme_open_error, ENOSPC);
	t_assert_eq(ts.cache_open_error, 0);
	t_assert_eq(ts.tiers[2].capacity_blocks, 0);
	t_assert(ts.tiers[1].capacity_blocks > 0);
	t_assert_eq(ts.tiers[1].used_blocks, 2 * NB);
	/* content 0 went down to the host tier and comes back from it */
	cc_read_content(d.sock, &contents, 0, NB, 1);

	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	if (!strstr(out,
		    "tier nvme    FAILED to open: No space left on device"))
		printf("%s", out);
	t_assert(strstr(out, "tier nvme    FAILED to open: No space left on "
			     "device (the cache runs without it") != NULL);
	t_assert(strstr(out, "cache        OFF") == NULL);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "kvmm_cache_tier_open_error{tier=\"nvme\"} %d\n", ENOSPC);
	t_assert(strstr(out, want) != NULL);
	t_assert(
		strstr(out, "kvmm_cache_tier_open_error{tier=\"cache\"} 0\n") !=
		NULL);
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	t_assert(
		strstr(out, "\"cache_open_error\":0,\"nvme_open_error\":28,") !=
		NULL);
	cc_stop(&d);
	unlink(nvme);
	printf("nvme open failure ok\n");
	return 0;
}
