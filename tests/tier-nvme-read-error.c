// SPDX-License-Identifier: MIT
/*
 * A slot whose reads fail with an I/O error is kept for another try once
 * and dropped when its reads fail twice in a row (NVME_READ_FAILURES_MAX),
 * as a slot that fails its CRC is: a block the disk cannot give back
 * becomes a miss instead of a restore that fails on every open.
 *
 * The error is a real one from the kernel: the tier file is cut short
 * (ftruncate from another fd, under the open tier) in the middle of the
 * block's payload, so its O_DIRECT read through the ring comes back
 * short, which the engine turns into -EIO, as it does a failed I/O (the
 * kernel here has no device-mapper for a dm-error target).  Putting the
 * file's tail back makes the block readable again, byte-identical: a
 * transient error loses nothing, and a good read starts the count again.
 * After the drop the read says so (io.dropped), the slot is free (used
 * slots, lookup, a second read -ENOENT), counted (read_errors,
 * read_error_drops), and the block can be written and read again.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define NSLOTS 4
#define NBLOCKS 3
#define FILE_BYTES NT_CAPACITY(NSLOTS, PAYLOAD)

static unsigned char *data; /* NBLOCKS payloads */
/* a read buffer with 4 KiB of headroom in front (header in line) */
static unsigned char *rbuf;

/* Read block i from its slot; returns the io (result, dropped).  Its
 * own, not nt_read_check(): the slot is given, not looked up (a dropped
 * block's is gone), and headroom reads the header in line. */
static struct tier_nvme_io read_block(struct tier_nvme *t, int i, uint32_t slot,
				      bool headroom)
{
	struct tier_nvme_io io = { .hash = 0xe10 + i,
				   .slot = slot,
				   .buf = rbuf + 4096,
				   .headroom = headroom,
				   .dropped = true /* must be cleared */ };

	memset(rbuf, 0, 4096 + PAYLOAD);
	(void)tier_nvme_read_batch(t, &io, 1);
	return io;
}

static void read_ok(struct tier_nvme *t, int i, uint32_t slot, bool headroom)
{
	struct tier_nvme_io io = read_block(t, i, slot, headroom);

	t_assert_eq(io.result, 0);
	t_assert(!io.dropped);
	t_assert(memcmp(rbuf + 4096, data + (size_t)i * PAYLOAD, PAYLOAD) == 0);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct tier_nvme_config cfg = { .size = sizeof(cfg),
					.capacity_bytes = FILE_BYTES,
					.payload_bytes = PAYLOAD };
	struct tier_nvme_io io[NBLOCKS], r;
	struct tier_nvme_stats st;
	struct tier_nvme *t;
	unsigned char *tail;
	uint64_t cut, tail_len;
	char path[256];
	uint32_t slot;
	int fd;

	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-rerr-%d",
		 dir ? dir : "/var/tmp", getpid());
	cfg.path = path;
	data = t_page_alloc(NBLOCKS * PAYLOAD);
	rbuf = t_page_alloc(4096 + PAYLOAD);
	t = nt_open(cfg, NULL, NULL);
	for (int i = 0; i < NBLOCKS; i++) {
		nt_fill(data + (size_t)i * PAYLOAD, PAYLOAD, 500 + i);
		io[i] = (struct tier_nvme_io){ .hash = 0xe10 + i,
					       .layout_id = 7,
					       .buf = data +
						      (size_t)i * PAYLOAD,
					       .length = PAYLOAD };
	}
	t_assert_eq(tier_nvme_write_batch(t, io, NBLOCKS), 0);
	/* the block in the highest slot loses the tail of its payload */
	slot = io[NBLOCKS - 1].slot;
	for (int i = 0; i < NBLOCKS - 1; i++)
		t_assert(io[i].slot < slot);
	cut = tier_nvme_slot_offset(t, slot) + TIER_NVME_HEADER_BYTES +
	      PAYLOAD / 2;
	tail_len = FILE_BYTES - cut;
	tail = malloc(tail_len);
	t_assert(tail);
	fd = open(path, O_RDWR | O_CLOEXEC); /* buffered: not the tier's fd */
	t_assert(fd >= 0);
	t_assert_eq(pread(fd, tail, tail_len, (off_t)cut), (ssize_t)tail_len);
	read_ok(t, NBLOCKS - 1, slot, true);

	/* 1. one failed read: kept, READY, readable once the tail is back */
	t_ok(ftruncate(fd, (off_t)cut));
	r = read_block(t, NBLOCKS - 1, slot, true);
	t_assert_eq(r.result, -EIO);
	t_assert(!r.dropped);
	t_assert_eq(tier_nvme_slot_state(t, slot), TIER_SLOT_READY);
	t_ok(tier_nvme_lookup(t, 0xe10 + NBLOCKS - 1, NULL, NULL, NULL));
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.read_errors, 1);
	t_assert_eq(st.read_error_drops, 0);
	t_assert_eq(pwrite(fd, tail, tail_len, (off_t)cut), (ssize_t)tail_len);
	t_ok(fsync(fd));
	read_ok(t, NBLOCKS - 1, slot, false); /* header apart this time */

	/* 2. the good read started the count again: one more failure is
	 * still kept, the one after it drops the slot */
	t_ok(ftruncate(fd, (off_t)cut));
	r = read_block(t, NBLOCKS - 1, slot, false);
	t_assert_eq(r.result, -EIO);
	t_assert(!r.dropped);
	t_assert_eq(tier_nvme_slot_state(t, slot), TIER_SLOT_READY);
	r = read_block(t, NBLOCKS - 1, slot, true);
	t_assert_eq(r.result, -EIO); /* the read's own error */
	t_assert(r.dropped);
	t_assert_eq(tier_nvme_slot_state(t, slot), TIER_SLOT_FREE);
	t_assert_eq(tier_nvme_lookup(t, 0xe10 + NBLOCKS - 1, NULL, NULL, NULL),
		    -ENOENT);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.read_errors, 3);
	t_assert_eq(st.read_error_drops, 1);
	t_assert_eq(st.checksum_failures, 0);
	t_assert_eq(st.used_slots, NBLOCKS - 1);
	t_assert_eq(st.ready_slots, NBLOCKS - 1);
	r = read_block(t, NBLOCKS - 1, slot, true);
	t_assert_eq(r.result, -ENOENT); /* a miss, no I/O */
	t_assert(!r.dropped);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.read_errors, 3);

	/* the other blocks were never touched */
	for (int i = 0; i < NBLOCKS - 1; i++)
		read_ok(t, i, io[i].slot, i & 1);

	/* 3. the disk mended, the block is written again and served */
	t_assert_eq(pwrite(fd, tail, tail_len, (off_t)cut), (ssize_t)tail_len);
	t_ok(fsync(fd));
	io[NBLOCKS - 1].result = 1;
	t_assert_eq(tier_nvme_write_batch(t, &io[NBLOCKS - 1], 1), 0);
	read_ok(t, NBLOCKS - 1, io[NBLOCKS - 1].slot, true);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, NBLOCKS);
	tier_nvme_close(t);

	close(fd);
	unlink(path);
	free(tail);
	free(data);
	free(rbuf);
	printf("nvme read errors ok\n");
	return 0;
}
