// SPDX-License-Identifier: MIT
/*
 * A --host-mem that holds no block of the first region's size (192 KiB
 * against blocks of 4 pages of 64 KiB) is no host tier, and so no NVMe
 * tier, whose I/O goes through host slots.  The start cannot know the
 * block size without --cache-block-pages (192 KiB holds the smallest
 * block, 2 pages): the first region's publish says it at WARN, naming
 * the NVMe tier too (it said only "no host tier" at start, for a tier
 * below 2 pages, and nothing here), and the empty file the start made
 * for the tier is removed (it was left behind, 0 bytes).  A file that was
 * there before kvmmd stays.  The blocks stay cached on the GPU.
 * (A --host-mem below the smallest block with --nvme-path is refused at
 * start: tests/kvmmd-option-errors.sh.)
 */
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

static const struct cc_contents contents = { .base = 0x5a0000,
					     .tag0 = 70,
					     .nb = 2 };

static char log_buf[1 << 16];

static void run(const char *nvme, bool made)
{
	const char *args[] = { "--host-mem",  "192K", "--nvme-path", nvme,
			       "--nvme-size", "4M",   NULL };
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	struct stat st;
	char want[512];

	cc_start(&d, args);
	t_ok(stat(nvme, &st)); /* claimed at start */
	t_assert_eq(st.st_size, 0);
	cc_write_content(d.sock, &contents, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].capacity_blocks, 0);
	t_assert_eq(ts.tiers[2].capacity_blocks, 0);
	cc_read_content(d.sock, &contents, 0, contents.nb, 0);
	t_assert(td_read_log(&d, log_buf, sizeof(log_buf)) >= 0);
	snprintf(
		want, sizeof(want),
		"WARN  kvmmd[%d]: cache: --host-mem 196608 holds no block of the first region's size (262144 bytes): no host tier, so no NVMe tier either (--nvme-path %s: blocks reach it through the host tier); the cache keeps blocks on the GPU only",
		(int)d.pid, nvme);
	if (!strstr(log_buf, want))
		t_fail("no '%s' in:\n%s", want, log_buf);
	if (made)
		t_assert(stat(nvme, &st) && errno == ENOENT);
	else
		t_ok(stat(nvme, &st));
	cc_stop(&d);
}

int main(void)
{
	char nvme[256];
	int fd;

	cc_nvme_path(nvme, sizeof(nvme), "host-too-small");
	unlink(nvme);
	t_nvme_require(nvme);
	run(nvme, true);
	/* the operator's empty file: kept */
	fd = open(nvme, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	t_assert(fd >= 0);
	close(fd);
	run(nvme, false);
	unlink(nvme);
	printf("host tier too small ok\n");
	return 0;
}
