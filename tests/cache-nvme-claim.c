// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * kvmmd claims its NVMe file at start, before the socket accepts, also
 * without --cache-block-pages (the shipped config), when the tier itself
 * opens only at the first publish.  It used to take the file's lock then:
 * a second kvmmd on the same file started and took it, and the first's
 * first publish failed (EBUSY) and left the cache off for good.
 *
 *   - a kvmmd without --cache-block-pages holds the file from its start:
 *     a second one (with --cache-block-pages) refuses to start, naming
 *     the file; the first's publish then opens the tier and reaches NVMe;
 *   - the lock is the one the tier keeps: still held after the first
 *     publish, and after the tier, opened at start for the blocks of the
 *     last run (2 pages), is closed and formatted anew for the first
 *     region's (4 pages);
 *   - once the holder stops, the file is free at once;
 *   - blocks saved at a stop: the next start's status, before any region,
 *     says how many the NVMe tier holds and of what size.
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#include <errno.h>

#define NB 3

static const struct cc_contents contents = { .base = 0x310000,
					     .tag0 = 500,
					     .nb = NB };

static char log_buf[1 << 16];

/* A second kvmmd on the same file: refused, the log says why. */
static void second_refused(const char *path)
{
	const char *args[] = { "--cache-block-pages",
			       "4",
			       "--host-mem",
			       "2M",
			       "--nvme-path",
			       path,
			       "--nvme-size",
			       "4M",
			       NULL };
	struct td_daemon d2;
	int r = td_start(&d2, args);

	if (!r) {
		td_stop(&d2);
		t_fail("a second kvmmd started on %s", path);
	}
	t_assert_eq(r, -ECHILD);
	t_assert(td_read_log(&d2, log_buf, sizeof(log_buf)) >= 0);
	if (!strstr(log_buf, "is in use by another NVMe tier (process "))
		td_dump_log(&d2);
	t_assert(strstr(log_buf, "is in use by another NVMe tier (process ") !=
		 NULL);
	t_assert(strstr(log_buf, path) != NULL);
	unlink(d2.log);
	rmdir(d2.dir);
}

int main(void)
{
	char nvme[256];
	const char *lazy[] = { "--host-mem",  "2M", "--nvme-path",	  nvme,
			       "--nvme-size", "4M", "--cache-gpu-blocks", "3",
			       NULL };
	const char *two[] = { "--host-mem",  "2M", "--nvme-path",	  nvme,
			      "--nvme-size", "4M", "--cache-block-pages", "2",
			      NULL };
	const char *save[] = {
		"--host-mem",  "2M", "--nvme-path",	    nvme,
		"--nvme-size", "4M", "--nvme-save-on-stop", "5000",
		NULL
	};
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;

	cc_nvme_path(nvme, sizeof(nvme), "claim");

	/* the shipped setup: no --cache-block-pages */
	cc_start(&d, lazy);
	second_refused(nvme);
	for (int k = 0; k < 4; k++)
		cc_write_content(d.sock, &contents, k);
	cc_settled_stats(d.sock, &ts);
	/* the tier opened at the publish, on the file claimed at start */
	t_assert(ts.tiers[2].capacity_blocks > 0);
	t_assert_eq(ts.migrations_failed, 0);
	second_refused(nvme);
	cc_stop(&d);

	/* blocks of 2 pages on disk: opened at start for them, then closed
	 * and formatted anew at the first publish of 4-page blocks */
	cc_start(&d, two);
	cc_stop(&d);
	cc_start(&d, lazy);
	t_assert(td_read_log(&d, log_buf, sizeof(log_buf)) >= 0);
	t_assert(strstr(log_buf, "NVMe tier opened at start for blocks of 2 "
				 "pages") != NULL);
	cc_write_content(d.sock, &contents, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert(td_read_log(&d, log_buf, sizeof(log_buf)) >= 0);
	t_assert(strstr(log_buf, "formatting it anew") != NULL);
	t_assert(ts.tiers[2].capacity_blocks > 0);
	second_refused(nvme);
	cc_stop(&d);

	/* stopped: free at once */
	cc_start(&d, two);
	cc_stop(&d);

	/* blocks saved at a stop come back at the next start: before the
	 * first region, status says what the NVMe tier holds (it said
	 * "block size not known yet" and "0 recovered") */
	cc_start(&d, save);
	cc_write_content(d.sock, &contents, 0);
	cc_settled_stats(d.sock, &ts);
	cc_stop(&d);
	cc_start(&d, lazy);
	t_assert_eq(td_kvmmctl(d.sock, "status", log_buf, sizeof(log_buf)), 0);
	if (!strstr(log_buf, "the NVMe tier holds 3 blocks of 4 pages from "
			     "the last run"))
		printf("%s", log_buf);
	t_assert(strstr(log_buf, "the NVMe tier holds 3 blocks of 4 pages "
				 "from the last run") != NULL);
	t_assert(strstr(log_buf, "3 recovered") != NULL);
	cc_stop(&d);
	unlink(nvme);
	printf("nvme claim ok\n");
	return 0;
}
