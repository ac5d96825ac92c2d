// SPDX-License-Identifier: MIT
/*
 * Two valid headers naming one hash: freeing a slot only updates memory,
 * so a block evicted and later written again to another slot is on disk
 * twice when the tier stops.  A restart must serve the newer copy, give
 * the older one's slot back (not leak it for the run), and never hand
 * out the newer one's slot to another block:
 *   1. hash H written (copy 1, slot 0), a filler (slot 1), both freed, H
 *      written again (copy 2, slot 1: the slot freed last is reused
 *      first); the copies' bytes differ only so the test can tell them
 *      apart (a hash names one content);
 *   2. reopened: one slot recovered, H in slot 1 with generation 3, read
 *      back as copy 2; the other 7 slots all take new blocks (slot 0
 *      among them), slot 1 none, a ninth finds the tier full;
 *   3. reopened again: all 8 recovered and read back byte-identical;
 *   4. the same two copies, copy 2's write cut short (the second half of
 *      its payload is still the filler's): reopened, H is copy 2 by its
 *      header and its read fails the CRC (-EBADMSG), never served; then H
 *      is a miss (the older copy's slot was given back at recovery: a
 *      block lost, never a wrong one), and all 8 slots are free.
 * tier-nvme-recovery.c covers one copy per hash; tier-nvme-resize.c stale
 * copies past the last run's end, which are cleared instead.
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
#define NSLOTS 8
#define H 0xd0b1e
#define FILLER 0xf111e
#define OTHER(i) (0x07e0 + (uint64_t)(i))

/* copy 1, copy 2, the filler, then one payload per other block */
enum { COPY1, COPY2, FILL, OTHERS };
static unsigned char *data;

static unsigned char *payload(int i)
{
	return data + (size_t)i * PAYLOAD;
}

static struct tier_nvme *open_tier(const char *path, bool reformat)
{
	return nt_open_slots(path, NSLOTS, PAYLOAD, 0, reformat);
}

/* Write one block, payload data_i; returns its slot. */
static uint32_t write_one(struct tier_nvme *t, uint64_t hash, int data_i)
{
	return nt_write(t, hash, 4, 0, payload(data_i), PAYLOAD);
}

/* hash reads back as payload data_i from slot (0), or the read's error. */
static int read_one(struct tier_nvme *t, uint64_t hash, uint32_t slot,
		    int data_i)
{
	static unsigned char *buf;

	if (!buf)
		buf = t_page_alloc(PAYLOAD);
	return nt_read_check(t, hash, slot, buf, payload(data_i), PAYLOAD);
}

/* H twice on disk, copy 1 in slot 0 and copy 2 in slot 1 (step 1). */
static void two_copies(const char *path)
{
	struct tier_nvme *t = open_tier(path, true);

	t_assert_eq(write_one(t, H, COPY1), 0);
	t_assert_eq(write_one(t, FILLER, FILL), 1);
	t_ok(tier_nvme_free(t, 0)); /* evictions: memory only */
	t_ok(tier_nvme_free(t, 1));
	t_assert_eq(write_one(t, H, COPY2), 1);
	t_assert_eq(tier_nvme_slot_generation(t, 1), 3);
	tier_nvme_close(t);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct tier_nvme_stats st;
	struct tier_nvme *t;
	uint32_t slots[NSLOTS];
	char path[256];

	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-dup-%d",
		 dir ? dir : "/var/tmp", getpid());
	data = t_page_alloc((size_t)(OTHERS + NSLOTS) * PAYLOAD);
	for (int i = 0; i < OTHERS + NSLOTS; i++)
		nt_fill(payload(i), PAYLOAD, 1000 + i);

	/* 1, 2 */
	two_copies(path);
	t = open_tier(path, false);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, 1);
	t_assert_eq(st.used_slots, 1);
	t_assert_eq(st.header_failures, 0);
	t_assert_eq(tier_nvme_slot_generation(t, 1), 3);
	t_assert_eq(tier_nvme_slot_state(t, 0), TIER_SLOT_FREE);
	t_assert_eq(read_one(t, H, 1, COPY2), 0);
	t_assert_eq(tier_nvme_next_generation(t), 4);
	for (int i = 0; i < NSLOTS - 1; i++) {
		slots[i] = write_one(t, OTHER(i), OTHERS + i);
		t_assert(slots[i] != 1);
	}
	{
		struct tier_nvme_io full = { .hash = OTHER(NSLOTS),
					     .layout_id = 4,
					     .buf = payload(OTHERS),
					     .length = PAYLOAD };

		t_assert_eq(tier_nvme_write_batch(t, &full, 1), 1);
		t_assert_eq(full.result, -ENOSPC);
	}
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, NSLOTS);
	t_assert_eq(read_one(t, H, 1, COPY2), 0);
	tier_nvme_close(t);

	/* 3 */
	t = open_tier(path, false);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, NSLOTS);
	t_assert_eq(read_one(t, H, 1, COPY2), 0);
	for (int i = 0; i < NSLOTS - 1; i++)
		t_assert_eq(read_one(t, OTHER(i), slots[i], OTHERS + i), 0);
	tier_nvme_close(t);

	/* 4: copy 2's payload torn, the filler's second half still there */
	two_copies(path);
	t = open_tier(path, false);
	uint64_t half = tier_nvme_slot_offset(t, 1) + TIER_NVME_HEADER_BYTES +
			PAYLOAD / 2;
	tier_nvme_close(t);
	{
		int fd = open(path, O_RDWR);

		t_assert(fd >= 0);
		t_assert_eq(pwrite(fd, payload(FILL) + PAYLOAD / 2, PAYLOAD / 2,
				   (off_t)half),
			    PAYLOAD / 2);
		t_ok(fsync(fd));
		close(fd);
	}
	t = open_tier(path, false);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, 1);
	t_assert_eq(tier_nvme_slot_generation(t, 1), 3);
	t_assert_eq(read_one(t, H, 1, COPY2), -EBADMSG);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.checksum_failures, 1);
	t_assert_eq(st.reads, 0);
	t_assert_eq(tier_nvme_lookup(t, H, NULL, NULL, NULL), -ENOENT);
	t_assert_eq(st.used_slots, 0);
	tier_nvme_close(t);

	unlink(path);
	free(data);
	printf("two copies of a hash: the newer recovered, the older's slot reused, a torn newer one never served\n");
	return 0;
}
