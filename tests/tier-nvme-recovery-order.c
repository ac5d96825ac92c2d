// SPDX-License-Identifier: MIT
/*
 * NVMe tier restart recovery finds every written slot whatever order its
 * header reads complete in.  A tier of NSLOTS slots, queue depth 4, is
 * written NWRITTEN blocks; a copy of its file keeps the superblock and
 * every other slot of those, the rest never written (holes: their reads
 * finish at once, before the reads that go to the disk, so completions
 * come out of order).  Reopened ROUNDS times, the copy must recover
 * exactly the slots it kept each time, every one with its hash, layout
 * and bytes, and no damaged header.
 * Before the fix a header read went into buffer (slot % queue depth):
 * a read submitted when an earlier one completed out of order shared its
 * buffer with one still in flight, so a written slot could be parsed from
 * a never-written one's zeros (skipped as "never written", its block
 * lost and its slot handed out again) or from another slot's header
 * (counted as damaged).  Found by tests/daemon-fuzz.c (a restarted kvmmd
 * recovered 49-51 of the 52-54 blocks its NVMe tier held).
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

#define PAYLOAD (16 * 1024)
#define NSLOTS 256
#define NWRITTEN 48
#define ROUNDS 8

static struct tier_nvme *open_tier(const char *path)
{
	return nt_open_slots(path, NSLOTS, PAYLOAD, 4, false);
}

/* A copy of the tier's file: its superblock and the even slots (header
 * and payload), holes elsewhere. */
static void copy_some(struct tier_nvme *t, const char *from, const char *to)
{
	size_t stride = NT_SLOT_BYTES(PAYLOAD);
	unsigned char *b = malloc(stride);
	int in = open(from, O_RDONLY), out;

	t_assert(b && in >= 0);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	t_assert(out >= 0);
	t_ok(ftruncate(out, NT_CAPACITY(NSLOTS, PAYLOAD)));
	t_assert_eq(pread(in, b, NT_SUPERBLOCK_BYTES, 0), NT_SUPERBLOCK_BYTES);
	t_assert_eq(pwrite(out, b, NT_SUPERBLOCK_BYTES, 0),
		    NT_SUPERBLOCK_BYTES);
	for (uint32_t s = 0; s < NSLOTS; s += 2) {
		off_t off = (off_t)tier_nvme_slot_offset(t, s);

		t_assert_eq(pread(in, b, stride, off), (ssize_t)stride);
		t_assert_eq(pwrite(out, b, stride, off), (ssize_t)stride);
	}
	t_ok(fsync(out));
	close(out);
	close(in);
	free(b);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct tier_nvme_io io[NWRITTEN];
	uint32_t slot_of[NWRITTEN];
	char copy[300];
	struct tier_nvme_stats st;
	unsigned char *data = NULL, *buf = NULL;
	struct tier_nvme *t;
	char path[256];

	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-rec-order-%d",
		 dir ? dir : "/var/tmp", getpid());
	snprintf(copy, sizeof(copy), "%s.copy", path);
	data = t_page_alloc(NWRITTEN * PAYLOAD);
	buf = t_page_alloc(PAYLOAD);

	t = open_tier(path);
	for (int i = 0; i < NWRITTEN; i++) {
		nt_fill(data + (size_t)i * PAYLOAD, PAYLOAD, 1000 + i);
		io[i] = (struct tier_nvme_io){ .hash = 0x7000 + i,
					       .layout_id = 3,
					       .buf = data +
						      (size_t)i * PAYLOAD,
					       .length = PAYLOAD };
	}
	t_assert_eq(tier_nvme_write_batch(t, io, NWRITTEN), 0);
	for (int i = 0; i < NWRITTEN; i++)
		slot_of[i] = io[i].slot;
	copy_some(t, path, copy);
	tier_nvme_close(t);
	unlink(path);

	for (int round = 0; round < ROUNDS; round++) {
		t = open_tier(copy);
		tier_nvme_get_stats(t, &st);
		if (st.recovered_slots != NWRITTEN / 2 || st.header_failures)
			t_fail("round %d: recovered %llu of %d slots, %llu damaged headers",
			       round, (unsigned long long)st.recovered_slots,
			       NWRITTEN / 2,
			       (unsigned long long)st.header_failures);
		for (int i = 0; i < NWRITTEN; i++) {
			struct tier_nvme_io r = { .hash = 0x7000 + i,
						  .buf = buf };

			if (slot_of[i] % 2) {
				t_assert_eq(tier_nvme_lookup(t, r.hash, &r.slot,
							     NULL, NULL),
					    -ENOENT);
				continue;
			}
			t_ok(tier_nvme_lookup(t, r.hash, &r.slot, NULL, NULL));
			t_assert_eq(r.slot, slot_of[i]);
			memset(buf, 0, PAYLOAD);
			t_assert_eq(tier_nvme_read_batch(t, &r, 1), 0);
			t_assert_eq(r.layout_id, 3);
			t_assert(memcmp(buf, data + (size_t)i * PAYLOAD,
					PAYLOAD) == 0);
		}
		tier_nvme_close(t);
	}
	unlink(copy);
	free(buf);
	free(data);
	printf("recovered %d of %d slots %d times, in any completion order\n",
	       NWRITTEN / 2, NSLOTS, ROUNDS);
	return T_PASS;
}
