// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Demotion and restore through every tier with a real kvmmd, several
 * client processes and a daemon restart:
 *   - four contents of three blocks each are written and published by
 *     writer processes; with room for 3 cached blocks on the GPU and 6 in
 *     host memory, the oldest are demoted GPU -> host -> NVMe (never
 *     dropped while a lower tier has room), and no tier ever holds more
 *     than its capacity;
 *   - reader processes open sequences on those hashes and get the blocks
 *     back from host and from NVMe, byte-identical, into fresh pages;
 *   - after a restart of the daemon on the same NVMe file, a new client
 *     hits the blocks that were on NVMe;
 *   - a payload byte flipped in the file makes that block a miss (counted
 *     as a checksum failure), never served.
 */
#include <fcntl.h>
#include <sys/wait.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_cache_args.h"

#define NCONTENT 5
#define NB 3

static const struct cc_contents contents = { .base = 0x100000,
					     .tag0 = 100,
					     .nb = NB };

static void stats(const char *sock, struct kvmm_tier_stats_reply *ts)
{
	cc_settled_stats(sock, ts);
	for (int t = 0; t < 3; t++)
		if (ts->tiers[t].used_blocks > ts->tiers[t].capacity_blocks)
			t_fail("tier %d holds %llu > capacity %llu", t,
			       (unsigned long long)ts->tiers[t].used_blocks,
			       (unsigned long long)ts->tiers[t].capacity_blocks);
}

int main(void)
{
	struct kvmm_tier_stats_reply ts;
	const char *const *args;
	struct td_daemon d;
	struct nca_args a;
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-tiers");
	/* block = 4 pages of 64 KiB (the first region's); host 8 slots
	 * (policy: 6); NVMe 7 (6); a restart finds what the tiers had put
	 * on NVMe, nothing more (cache-save-on-stop tests the save at a
	 * stop) */
	args = nca_save_args(&a, nvme, 3, NCA_NVME_SLOTS, "0",
			     NCA_BLOCK_UNNAMED);
	cc_start(&d, args);

	for (int k = 0; k < 4; k++)
		cc_write_content(d.sock, &contents, k);
	stats(d.sock, &ts);
	/* 3 on the GPU (content 3), 6 in host (1, 2), 3 on NVMe (0) */
	t_assert_eq(ts.tiers[0].used_blocks, 3);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	t_assert_eq(ts.tiers[2].used_blocks, 3);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops + ts.tiers[2].drops,
		    0);
	t_assert_eq(ts.migrations_failed, 0);

	cc_read_content(d.sock, &contents, 3, NB, 0); /* GPU */
	cc_read_content(d.sock, &contents, 2, NB, 1); /* host -> new pages */
	cc_read_content(d.sock, &contents, 0, NB, 2); /* NVMe -> new pages */
	stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].promotions_out, NB);
	t_assert_eq(ts.tiers[2].promotions_out, NB);
	t_assert(ts.tiers[2].bytes_in >= NB * CC_PPB * CC_PAGE);

	/* push more down so NVMe holds content 1 and 3 or so; then note
	 * what is on NVMe, restart, and read it from a new daemon */
	cc_write_content(d.sock, &contents, 4);
	stats(d.sock, &ts);
	uint64_t on_nvme = ts.tiers[2].used_blocks;
	t_assert(on_nvme >= NB);
	cc_stop(&d);

	cc_start(&d, args);
	{
		struct cc c;

		cc_connect(&c, d.sock);
		cc_region(&c);
		/* the cache opens its tiers on first use: a miss does it */
		struct kvmm_prefix_open_reply rep;
		uint64_t none = 0x77;
		uint32_t ids[1];
		cc_prefix(&c, &none, 1, &rep, ids);
		t_assert_eq(rep.nr_blocks, 0);
		cc_tier_stats(&c, &ts);
		cc_disconnect(&c);
	}
	t_assert_eq(ts.recovered_blocks, on_nvme);
	/* content 1 went host -> NVMe when content 4 came in */
	cc_read_content(d.sock, &contents, 1, NB, 2);

	/* corrupt: flip a payload byte of every slot of the file, restart */
	cc_stop(&d);
	{
		int fd = open(nvme, O_RDWR);
		unsigned char ch;

		t_assert(fd >= 0);
		for (int i = 0; i < NCA_NVME_SLOTS; i++) {
			off_t off = NT_PAYLOAD_OFFSET(i, NCA_BLOCK_BYTES) + 777;

			t_assert_eq(pread(fd, &ch, 1, off), 1);
			ch ^= 0x20;
			t_assert_eq(pwrite(fd, &ch, 1, off), 1);
		}
		close(fd);
	}
	cc_start(&d, args);
	{
		struct cc c;
		struct kvmm_prefix_open_reply rep;
		uint64_t h[NB];
		uint32_t ids[NB * CC_PPB];
		int hit_any = 0;

		cc_connect(&c, d.sock);
		cc_region(&c);
		for (int k = 0; k < NCONTENT; k++) {
			cc_content_hashes(&contents, k, h);
			cc_prefix(&c, h, NB, &rep, ids);
			hit_any += rep.nr_blocks;
			cc_seq_close(&c, rep.seq_id, ids,
				     rep.nr_blocks * CC_PPB);
		}
		cc_tier_stats(&c, &ts);
		cc_disconnect(&c);
		t_assert_eq(hit_any, 0); /* every slot was damaged */
		t_assert(ts.checksum_failures >= 1);
		t_assert(ts.recovered_blocks >= 1);
		/* each slot a bad CRC dropped took its block with it: an
		 * NVMe drop (ABI 1.13), not a read-error drop.  Counted
		 * once the loop has settled the failed restore, while the
		 * tier counts the failure as the read ends: compare them
		 * with no restore left in flight (a live snapshot once
		 * read 5 failures against 4 drops) */
		cc_settled_stats(d.sock, &ts);
		t_assert(ts.tiers[2].drops >= 1);
		t_assert_eq(ts.tiers[2].drops, ts.checksum_failures);
		t_assert_eq(ts.nvme_read_error_drops, 0);
	}
	cc_stop(&d);
	unlink(nvme);
	printf("tiers ok\n");
	return 0;
}
