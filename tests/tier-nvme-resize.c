// SPDX-License-Identifier: MIT
/*
 * A tier on a block device that shrinks and grows again (--nvme-size
 * smaller, then larger, or the device itself resized) keeps its format
 * id, so the slots past the smaller end keep their headers: after the
 * grow they must not come back.  Their blocks were evicted by the shrink,
 * and their generations are larger than the ones written since (the next
 * generation only continued after the slots the small tier kept), so a
 * stale copy of a block written again would win over the new one and
 * take its order (restarts evict recovered blocks oldest first).
 *
 * On a loop device over a file (a regular file is truncated to the tier
 * size, which zeroes what it cuts):
 *   1. 16 slots, blocks 0-15 in slots 0-15, generations 1-16;
 *   2. opened with 8 slots: blocks 0-7 recovered; block 0 freed, block 12
 *      written again (slot 0, generation 9);
 *   3. opened with 16 slots again: only the 8 slots the last run had are
 *      recovered, block 12 is the one in slot 0 with generation 9, the
 *      next generation is 10, blocks 8-15 are gone;
 *   4. two new blocks written, reopened with 16 slots: 10 blocks, still
 *      none of the old 8-15 (their headers were cleared at the grow, not
 *      only passed over once).
 * Skips (77) where no loop device can be set up.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define PAYLOAD (16 * 1024)
#define BIG 16
#define SMALL 8

static unsigned char *data; /* BIG + 2 payloads */

static uint64_t hash_of(int i)
{
	return 0x5e00 + i;
}

static struct tier_nvme_io block(int i)
{
	return (struct tier_nvme_io){ .hash = hash_of(i),
				      .layout_id = 3,
				      .buf = data + (size_t)i * PAYLOAD,
				      .length = PAYLOAD };
}

static const char *backing_path; /* where a probe may go (a skip) */

static struct tier_nvme *open_tier(const char *dev, uint32_t nslots)
{
	struct tier_nvme_config cfg = {
		.path = dev,
		.capacity_bytes = NT_CAPACITY(nslots, PAYLOAD),
		.payload_bytes = PAYLOAD,
	};
	struct tier_nvme *t = nt_open(cfg, backing_path, NULL);
	struct tier_nvme_stats st;

	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.capacity_slots, nslots);
	return t;
}

/* Block i is in the tier, in slot (if not -1), with its bytes. */
static void has_block(struct tier_nvme *t, int i, int slot)
{
	static unsigned char *buf;

	if (!buf)
		buf = t_page_alloc(PAYLOAD);
	t_ok(nt_read_check(t, hash_of(i), slot, buf, data + (size_t)i * PAYLOAD,
			   PAYLOAD));
}

/* A loop device over backing, its path in dev; its fd (-1: skip). */
static int loop_attach(const char *backing, char *dev, size_t len)
{
	/* gone with the test's last fd of it, even when the test fails */
	struct loop_config lc = { .block_size = 4096,
				  .info.lo_flags = LO_FLAGS_AUTOCLEAR };
	int ctl, n, fd, bfd;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		printf("/dev/loop-control: %s\n", strerror(errno));
		return -1;
	}
	n = ioctl(ctl, LOOP_CTL_GET_FREE);
	close(ctl);
	if (n < 0) {
		printf("LOOP_CTL_GET_FREE: %s\n", strerror(errno));
		return -1;
	}
	snprintf(dev, len, "/dev/loop%d", n);
	fd = open(dev, O_RDWR | O_CLOEXEC);
	bfd = open(backing, O_RDWR | O_CLOEXEC);
	t_assert(bfd >= 0);
	if (fd < 0) {
		printf("%s: %s\n", dev, strerror(errno));
		close(bfd);
		return -1;
	}
	lc.fd = (uint32_t)bfd;
	if (ioctl(fd, LOOP_CONFIGURE, &lc)) {
		printf("LOOP_CONFIGURE %s: %s\n", dev, strerror(errno));
		close(fd);
		close(bfd);
		return -1;
	}
	close(bfd); /* the loop device holds it */
	return fd;
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct tier_nvme_io io[BIG + 2];
	struct tier_nvme_stats st;
	struct tier_nvme *t;
	char backing[256], dev[64];
	uint32_t slot;
	int lfd, fd;

	snprintf(backing, sizeof(backing), "%s/kvmm-tier-nvme-resize-%d",
		 dir ? dir : "/var/tmp", getpid());
	backing_path = backing;
	fd = open(backing, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	t_assert(fd >= 0);
	t_ok(ftruncate(fd, NT_CAPACITY(BIG, PAYLOAD)));
	close(fd);
	lfd = loop_attach(backing, dev, sizeof(dev));
	if (lfd < 0) {
		unlink(backing);
		t_skip("no loop device (root and /dev/loop-control needed)");
	}
	data = t_page_alloc((BIG + 2) * PAYLOAD);
	for (int i = 0; i < BIG + 2; i++)
		nt_fill(data + (size_t)i * PAYLOAD, PAYLOAD, 300 + i);

	/* 1. */
	t = open_tier(dev, BIG);
	for (int i = 0; i < BIG; i++)
		io[i] = block(i);
	t_assert_eq(tier_nvme_write_batch(t, io, BIG), 0);
	for (int i = 0; i < BIG; i++) {
		t_assert_eq(io[i].slot, i);
		t_assert_eq(tier_nvme_slot_generation(t, i), i + 1);
	}
	tier_nvme_close(t);

	/* 2. */
	t = open_tier(dev, SMALL);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, SMALL);
	t_assert_eq(tier_nvme_lookup(t, hash_of(12), NULL, NULL, NULL),
		    -ENOENT);
	t_ok(tier_nvme_free(t, 0));
	io[12] = block(12);
	t_assert_eq(tier_nvme_write_batch(t, &io[12], 1), 0);
	t_assert_eq(io[12].slot, 0);
	t_assert_eq(tier_nvme_slot_generation(t, 0), SMALL + 1);
	tier_nvme_close(t);

	/* 3. */
	t = open_tier(dev, BIG);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, SMALL);
	t_assert_eq(st.header_failures, 0);
	has_block(t, 12, 0);
	t_assert_eq(tier_nvme_slot_generation(t, 0), SMALL + 1);
	for (int i = 1; i < SMALL; i++)
		has_block(t, i, i);
	for (int i = SMALL; i < BIG; i++)
		if (i != 12)
			t_assert_eq(tier_nvme_lookup(t, hash_of(i), NULL, NULL,
						     NULL),
				    -ENOENT);
	t_assert_eq(tier_nvme_next_generation(t), SMALL + 2);

	/* 4. */
	io[BIG] = block(BIG);
	io[BIG + 1] = block(BIG + 1);
	t_assert_eq(tier_nvme_write_batch(t, &io[BIG], 2), 0);
	tier_nvme_close(t);
	t = open_tier(dev, BIG);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, SMALL + 2);
	has_block(t, 12, 0);
	has_block(t, BIG, -1);
	has_block(t, BIG + 1, -1);
	for (int i = SMALL; i < BIG; i++)
		if (i != 12)
			t_assert_eq(tier_nvme_lookup(t, hash_of(i), &slot, NULL,
						     NULL),
				    -ENOENT);
	tier_nvme_close(t);

	close(lfd); /* LO_FLAGS_AUTOCLEAR detaches it */
	unlink(backing);
	free(data);
	printf("nvme resize ok\n");
	return 0;
}
