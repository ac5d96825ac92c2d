// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A block on NVMe whose reads keep failing becomes a miss: kvmmd tries
 * its restore again once, then the tier drops the slot and the cache
 * forgets the block, instead of failing a restore, and cutting the prefix
 * short, on every open.
 *
 * A content of 2 blocks is saved to NVMe at a stop; a new kvmmd recovers
 * it, then the tier file is cut short under it (ftruncate to the
 * superblock), so each read of a block comes back short (-EIO):
 *   - open 1: both restores fail (migrations_failed +2), nothing found,
 *     the blocks stay on NVMe;
 *   - open 2: they fail again and are dropped: NVMe holds none;
 *   - open 3: a plain miss, no restore tried (migrations_failed
 *     unchanged).
 * The file mended, the content published again is saved at the next stop
 * and read back from NVMe, byte-identical, by a third kvmmd.
 */
#include <fcntl.h>

#include "tests/cache-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 2
#define NVME_SLOTS 16

static const struct cc_contents content = { .base = 0xe1000,
					    .tag0 = 30,
					    .nb = NB };

/* A prefix open of the content: how many blocks it found. */
static uint32_t open_content(const char *sock)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[NB * CC_PPB];
	uint64_t h[NB];
	struct cc c;

	cc_content_hashes(&content, 0, h);
	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, h, NB, &rep, ids);
	cc_seq_close(&c, rep.seq_id, ids, rep.nr_blocks * CC_PPB);
	cc_disconnect(&c);
	return rep.nr_blocks;
}

int main(void)
{
	struct kvmm_tier_stats_reply ts;
	const char *const *args;
	struct td_daemon d;
	struct nca_args a;
	uint64_t failed;
	char nvme[256];
	off_t bytes;
	int fd;

	cc_nvme_path(nvme, sizeof(nvme), "cache-nvme-read-error");
	t_nvme_require(nvme);
	bytes = NT_CAPACITY(NVME_SLOTS, NCA_BLOCK_BYTES);
	args = nca_save_args(&a, nvme, 2, NVME_SLOTS, "10000", 0);

	cc_start(&d, args);
	cc_write_content(d.sock, &content, 0);
	cc_stop(&d); /* saved to NVMe */

	cc_start(&d, args);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, NB);
	t_assert_eq(ts.tiers[2].used_blocks, NB);
	fd = open(nvme, O_RDWR | O_CLOEXEC);
	t_assert(fd >= 0);
	t_ok(ftruncate(fd, 4096)); /* every slot's read comes back short */

	t_assert_eq(open_content(d.sock), 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.migrations_failed, NB);
	t_assert_eq(ts.tiers[2].used_blocks, NB); /* kept for another try */
	t_assert_eq(ts.nvme_read_error_drops, 0);
	t_assert_eq(ts.tiers[2].drops, 0);

	t_assert_eq(open_content(d.sock), 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.migrations_failed, 2 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, 0); /* dropped */
	t_assert_eq(ts.checksum_failures, 0);
	/* counted as such and as the NVMe tier's drops (ABI 1.13) */
	t_assert_eq(ts.nvme_read_error_drops, NB);
	t_assert_eq(ts.tiers[2].drops, NB);
	failed = ts.migrations_failed;

	t_assert_eq(open_content(d.sock), 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.migrations_failed, failed); /* nothing tried */
	t_assert_eq(ts.tiers[2].used_blocks, 0);
	{
		char log[65536];

		t_assert(td_read_log(&d, log, sizeof(log)) > 0);
		t_assert_eq(t_count(log, "reads in a row failed"), NB);
	}

	/* the disk mended: the content is cached and saved again */
	t_ok(ftruncate(fd, bytes));
	close(fd);
	cc_write_content(d.sock, &content, 0);
	cc_stop(&d);
	cc_start(&d, args);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, NB);
	cc_read_content(d.sock, &content, 0, NB, 2);
	cc_stop(&d);
	unlink(nvme);
	printf("nvme read errors: two tries, then a miss\n");
	return 0;
}
