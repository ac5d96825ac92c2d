// SPDX-License-Identifier: MIT
/*
 * The NVMe tier on a file system without O_DIRECT (tmpfs before Linux 6.6)
 * fails to open with -EOPNOTSUPP and leaves nothing behind but the empty
 * file; where the kernel does support O_DIRECT on tmpfs the tier works.
 * Either way the outcome is a clear answer, not an I/O error later.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_layout.h"
#include "tests/lib/nvme_probe.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

int main(void)
{
	struct statfs sfs;
	char path[128];
	struct tier_nvme *t = NULL;
	int r;

	if (statfs("/dev/shm", &sfs) || sfs.f_type != TMPFS_MAGIC)
		t_skip("no tmpfs at /dev/shm to try");
	snprintf(path, sizeof(path), "/dev/shm/kvmm-tier-nvme-tmpfs-%d",
		 getpid());
	struct tier_nvme_config cfg = {
		.size = sizeof(cfg),
		.path = path,
		.capacity_bytes = NT_CAPACITY(2, 65536),
		.payload_bytes = 65536,
	};
	r = tier_nvme_open(&cfg, &t);
	if (r == 0) {
		unsigned char *buf = NULL;
		struct tier_nvme_io io = { .hash = 1, .length = 65536 };

		buf = t_page_alloc(65536);
		memset(buf, 0x5a, 65536);
		io.buf = buf;
		t_assert_eq(tier_nvme_write_batch(t, &io, 1), 0);
		memset(buf, 0, 65536);
		t_assert_eq(tier_nvme_read_batch(t, &io, 1), 0);
		t_assert_eq(buf[65535], 0x5a);
		tier_nvme_close(t);
		free(buf);
		printf("this kernel supports O_DIRECT on tmpfs; tier works there\n");
	} else {
		/* a machine without io_uring cannot say either way */
		if (r != -EOPNOTSUPP)
			t_nvme_skip_if_unsupported(r, path);
		t_assert_eq(r, -EOPNOTSUPP);
		t_assert(t == NULL);
		printf("tmpfs refused with -EOPNOTSUPP as expected\n");
	}
	unlink(path);
	return 0;
}
