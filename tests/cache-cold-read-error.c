// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * A block a restart recovered from NVMe (cold: outside the policy) whose
 * NVMe reads fail (a bad CRC: at the first; I/O errors: at the second in
 * a row) leaves the cache unused: one of TIER_STATS' cold_dropped (ABI
 * 1.24; tiers.md, "What became of the recovered blocks"), neither
 * evicted nor admitted, and its tenant's row counts it dropped;
 * recovered_blocks = cold + admitted + evicted + dropped holds through
 * each step.  One an open reads up with no GPU room is admitted.
 *
 * kvmmd (the default policy, 2 GPU blocks, 6 host, a 16-slot NVMe tier)
 * saves 4 contents of one block at a stop; a new kvmmd on the same file
 * recovers them: 4 cold, root's row 4 on NVMe.
 *   1. content 0's payload has a byte flipped on disk: its open finds
 *      nothing (the CRC check fails, checksum_failures 1) and the tier
 *      drops the slot at once: cold 3, dropped 1; a later open is a
 *      plain miss;
 *   2. the file is cut short in the payload of the highest slot of the
 *      other three (content V): V's first open finds nothing and keeps
 *      it (migrations_failed 1, still cold); the second gives it up
 *      (nvme_read_error_drops 1): cold 2, dropped 2; the third tries
 *      nothing;
 *   3. the file mended, 2 new blocks fill the GPU tier and a client pins
 *      both: an open of a cold content reads it up (its bytes, from
 *      NVMe), and the policy, with no other GPU victim, takes it in as
 *      its own victim, straight down to host memory: cold 1, admitted
 *      1, still cached (a later open finds it in host memory).  This is
 *      what an open that reads a cold block up with no GPU room comes
 *      to: the policy reports the admission (kc_move()) before any drop
 *      of it, so such a block is admitted, and a drop after that is the
 *      policy's; kvmmd frees one unadmitted only when the policy's call
 *      fails without it (-ENOMEM), which no test can drive;
 *   4. the pins gone, the last cold content is read up and taken in:
 *      cold 0, admitted 2, dropped 2.
 * Root's row in ADMIN_TENANTS counts each drop (dropped 1, then 2) and
 * its NVMe blocks follow.
 * Fails if kc_free() counted such a block evicted (cold_evicted 1 at
 * step 1) or admitted (cold_admitted 1 at step 1).
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <fcntl.h>

#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-common.h"
#include "tests/cache-uids.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NCONTENTS 4
#define NVME_SLOTS 16

static const struct cc_contents old = { .base = 0xc0de500,
					.tag0 = 70,
					.nb = 1 };
static const struct cc_contents fresh = { .base = 0xf2e5500,
					  .tag0 = 90,
					  .nb = 1 };

/* The slot content k's block was saved in (its header on disk). */
static int slot_of(int fd, int k)
{
	struct tier_nvme_slot_header hd;
	uint64_t h;

	cc_content_hashes(&old, k, &h);
	for (int i = 0; i < NVME_SLOTS; i++) {
		t_assert_eq(pread(fd, &hd, sizeof(hd),
				  NT_SLOT_OFFSET(i, NCA_BLOCK_BYTES)),
			    (ssize_t)sizeof(hd));
		if (hd.magic == TIER_NVME_SLOT_MAGIC && hd.hash == h)
			return i;
	}
	t_fail("content %d: no slot on disk", k);
	return -1;
}

/* A prefix open of content k in this process: how many blocks it found
 * (the bytes checked), and from NVMe how many. */
static uint32_t open_old(const char *sock, int k, uint32_t *from_nvme)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CC_PPB];
	uint64_t h;
	struct cc c;

	cc_content_hashes(&old, k, &h);
	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, &h, 1, &rep, ids);
	if (rep.nr_blocks)
		cc_check(&c, ids, rep.nr_blocks, old.tag0 + k);
	cc_seq_close(&c, rep.seq_id, ids, rep.nr_blocks * CC_PPB);
	cc_disconnect(&c);
	if (from_nvme)
		*from_nvme = rep.from_nvme;
	return rep.nr_blocks;
}

/*
 * TIER_STATS' cold counts once the cache settled (and the invariant),
 * and root's row: its blocks cached on NVMe, and dropped.
 */
static void expect_cold(const char *sock, struct kvmm_tier_stats_reply *ts,
			uint64_t cold, uint64_t admitted, uint64_t dropped,
			uint64_t nvme)
{
	struct kvmm_tenants_reply *r;
	const struct kvmm_tenant_info *t;

	cc_settled_stats(sock, ts);
	printf("NVMe %llu used\n",
	       (unsigned long long)ts->tiers[2].used_blocks);
	cc_cold_check(ts, NCONTENTS, cold, admitted, 0, dropped);
	t_assert_eq(ts->tiers[2].used_blocks, nvme);

	r = cu_tenants(sock);
	t = cu_tenant(r, 0);
	printf("root: cached %llu/%llu/%llu, admitted %llu, dropped %llu\n",
	       (unsigned long long)t->cached_blocks[0],
	       (unsigned long long)t->cached_blocks[1],
	       (unsigned long long)t->cached_blocks[2],
	       (unsigned long long)t->admitted_blocks,
	       (unsigned long long)t->dropped_blocks);
	t_assert_eq(t->cached_blocks[2], nvme);
	t_assert_eq(t->dropped_blocks, dropped);
	t_assert_eq(t->admitted_blocks - t->dropped_blocks,
		    t->cached_blocks[0] + t->cached_blocks[1] +
			    t->cached_blocks[2]);
	free(r);
}

int main(void)
{
	struct kvmm_tier_stats_reply ts;
	const char *const *args;
	struct kvmm_pin_opts po;
	struct kvmm_conn *pins[2];
	int fd, slot[NCONTENTS], victim = 1, spare;
	uint64_t hf[2], failed;
	struct td_daemon d;
	struct nca_args a;
	uint32_t nvme_from;
	unsigned char byte;
	char nvme[256];
	off_t off;

	cc_nvme_path(nvme, sizeof(nvme), "cache-cold-read-error");
	t_nvme_require(nvme);
	args = nca_save_args(&a, nvme, 2, NVME_SLOTS, "10000", 0);
	cc_start(&d, args);
	for (int k = 0; k < NCONTENTS; k++)
		cc_write_content(d.sock, &old, k);
	cc_stop(&d); /* saved to NVMe */

	fd = open(nvme, O_RDWR | O_CLOEXEC);
	t_assert(fd >= 0);
	for (int k = 0; k < NCONTENTS; k++)
		slot[k] = slot_of(fd, k);
	cc_start(&d, args);
	expect_cold(d.sock, &ts, 4, 0, 0, 4);
	t_assert_eq(ts.checksum_failures, 0);

	/* 1. a bad CRC: dropped at the first read */
	off = (off_t)NT_PAYLOAD_OFFSET(slot[0], NCA_BLOCK_BYTES) + 100;
	t_assert_eq(pread(fd, &byte, 1, off), 1);
	byte ^= 0x5a;
	t_assert_eq(pwrite(fd, &byte, 1, off), 1);
	t_ok(fsync(fd));
	t_assert_eq(open_old(d.sock, 0, NULL), 0);
	expect_cold(d.sock, &ts, 3, 0, 1, 3);
	t_assert_eq(ts.checksum_failures, 1);
	t_assert_eq(ts.tiers[2].drops, 1);
	t_assert_eq(open_old(d.sock, 0, NULL), 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.checksum_failures, 1); /* nothing read */
	printf("1. a bad CRC: dropped cold at the first read\n");

	/* 2. reads that keep failing: the file cut short in the payload
	 * of the highest slot of the 3 left */
	for (int k = 2; k < NCONTENTS; k++)
		if (slot[k] > slot[victim])
			victim = k;
	t_ok(ftruncate(fd,
		       (off_t)NT_PAYLOAD_OFFSET(slot[victim], NCA_BLOCK_BYTES) +
			       4096));
	failed = ts.migrations_failed;
	t_assert_eq(open_old(d.sock, victim, NULL), 0);
	expect_cold(d.sock, &ts, 3, 0, 1, 3); /* kept for another try */
	t_assert_eq(ts.migrations_failed, failed + 1);
	t_assert_eq(ts.nvme_read_error_drops, 0);
	t_assert_eq(open_old(d.sock, victim, NULL), 0);
	expect_cold(d.sock, &ts, 2, 0, 2, 2); /* given up */
	t_assert_eq(ts.migrations_failed, failed + 2);
	t_assert_eq(ts.nvme_read_error_drops, 1);
	t_assert_eq(ts.tiers[2].drops, 2);
	t_assert_eq(open_old(d.sock, victim, NULL), 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.migrations_failed, failed + 2); /* nothing tried */
	t_ok(ftruncate(fd, (off_t)NT_CAPACITY(NVME_SLOTS, NCA_BLOCK_BYTES)));
	close(fd);
	printf("2. reads that kept failing: content %d dropped cold at the second\n",
	       victim);

	/* 3. read up with the GPU tier's 2 blocks pinned: the policy takes
	 * it all the same, as its own victim, straight down to host */
	spare = victim == 1 ? 2 : 1;
	for (int k = 0; k < 2; k++) {
		/* a session each: the pin quota is a quarter of the GPU
		 * tier, at least 1 */
		pins[k] = cc_connect_lib(d.sock, "cold-read-error");
		cc_write_content(d.sock, &fresh, k);
		cc_content_hashes(&fresh, k, &hf[k]);
		t_assert_eq(cc_pin(pins[k], hf[k], 0, 0, 0, &po), 0);
		t_assert_eq(po.tier, 0);
	}
	t_assert_eq(open_old(d.sock, spare, &nvme_from), 1);
	t_assert_eq(nvme_from, 1);
	expect_cold(d.sock, &ts, 1, 1, 2, 1);
	t_assert_eq(ts.tiers[1].used_blocks, 1);
	cc_read_content(d.sock, &old, spare, 1, 1); /* kept, in host memory */
	printf("3. read up with the GPU pinned full: content %d admitted, sent down\n",
	       spare);

	/* 4. the pins gone: the last one read up is taken in */
	kvmm_disconnect(pins[0]);
	kvmm_disconnect(pins[1]);
	for (int k = 1; k < NCONTENTS; k++)
		if (k != victim && k != spare)
			cc_read_content(d.sock, &old, k, 1, 2);
	expect_cold(d.sock, &ts, 0, 2, 2, 0);
	cc_stop(&d);
	unlink(nvme);
	return 0;
}
