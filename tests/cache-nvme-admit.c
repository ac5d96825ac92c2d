// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * NVMe admission by use count, with a real kvmmd (--nvme-admit-uses 2)
 * and client processes: room for 3 cached blocks on the GPU and 6 in
 * host memory; content 0 (three blocks) is published and then used again
 * by a second sequence (two uses), content 1 is published once.  More
 * contents push both out of the host tier: content 0 is written to NVMe
 * and comes back byte-identical; contents 1 and 2 are dropped instead
 * (counted in nvme_admission_rejects) and are misses.
 */
#include <sys/wait.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_layout.h"

#define NB 3

static const struct cc_contents contents = { .base = 0x200000,
					     .tag0 = 300,
					     .nb = NB };

int main(void)
{
	char nvme[256], size[NT_SIZE_ARG_LEN];
	struct td_daemon d;
	struct kvmm_tier_stats_reply ts;

	cc_nvme_path(nvme, sizeof(nvme), "cache-admit");
	/* block = 4 pages of 64 KiB; NVMe 7 slots */
	nt_size_arg(size, sizeof(size), 7, 4 * CC_PAGE);
	const char *args[] = { "--cache-gpu-blocks", "3",  "--host-mem",  "2M",
			       "--nvme-path",	     nvme, "--nvme-size", size,
			       "--nvme-admit-uses",  "2",  NULL };
	cc_start(&d, args);

	cc_write_content(d.sock, &contents, 0);
	/* the second use, from the GPU */
	cc_read_content(d.sock, &contents, 0, NB, 0);
	cc_write_content(d.sock, &contents, 1); /* used once */
	for (int k = 2; k < 6; k++)
		cc_write_content(d.sock, &contents, k);
	cc_settled_stats(d.sock, &ts);
	/* GPU: 5; host: 3, 4; content 0 on NVMe; 1 and 2 (used once)
	 * dropped when they left the host tier */
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, NB);
	t_assert_eq(ts.nvme_admission_rejects, 2 * NB);
	t_assert_eq(ts.tiers[1].drops, 2 * NB);
	t_assert_eq(ts.tiers[2].drops, 0);
	t_assert_eq(ts.migrations_failed, 0);

	/* byte-identical from NVMe */
	cc_read_content(d.sock, &contents, 0, NB, 2);
	cc_read_content(d.sock, &contents, 1, 0, -1); /* not kept anywhere */
	cc_read_content(d.sock, &contents, 2, 0, -1);
	/* content 0 back on the GPU pushed 5 to host and 3 out (rejected) */
	cc_read_content(d.sock, &contents, 3, 0, -1);
	/* still in host memory */
	cc_read_content(d.sock, &contents, 4, NB, -1);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].promotions_out, NB);
	t_assert_eq(ts.tiers[2].hits, NB);
	t_assert_eq(ts.tiers[1].promotions_out, NB);
	t_assert_eq(ts.nvme_admission_rejects, 3 * NB);

	cc_stop(&d);
	unlink(nvme);
	printf("nvme admission ok\n");
	return 0;
}
