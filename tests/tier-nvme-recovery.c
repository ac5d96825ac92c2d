// SPDX-License-Identifier: MIT
/*
 * NVMe tier restart recovery: reopening the file rebuilds the index from
 * the slot headers (same slots, hashes, lengths, layouts, bytes), new
 * writes after a reopen do not overwrite recovered blocks, a flipped
 * payload byte is caught by the CRC32C on read (-EBADMSG, counted, the
 * block is gone afterwards: a miss, never served), a damaged header is
 * dropped and counted at recovery, and a change of geometry or an explicit
 * reformat starts empty.
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

static unsigned char *data;

/* Always the file of PAYLOAD-byte slots: opened with another payload, it
 * is that one's to refuse. */
static struct tier_nvme *open_tier(const char *path, size_t payload,
				   bool reformat)
{
	struct tier_nvme_config cfg = {
		.path = path,
		.capacity_bytes = NT_CAPACITY(NSLOTS, PAYLOAD),
		.payload_bytes = payload,
		.reformat = reformat,
	};

	return nt_open(cfg, NULL, NULL);
}

static int count_cb(void *arg, uint32_t slot, uint64_t hash, uint64_t len,
		    uint64_t layout, uint32_t tenant)
{
	(*(int *)arg)++;
	t_assert_eq(len, PAYLOAD);
	t_assert_eq(layout, 40 + (hash & 0xff));
	/* the tenant the header names, given to the cache */
	t_assert_eq(tenant, 2000 + (hash & 0xff));
	return 0;
}

/* Block i reads back whole and in its layout id (40 + i).  Its own, not
 * nt_read_check(): that helper does not see the io the read filled in. */
static void read_ok(struct tier_nvme *t, int i, unsigned char *buf)
{
	struct tier_nvme_io io = { .hash = 0x5000 + i, .buf = buf };

	t_ok(tier_nvme_lookup(t, io.hash, &io.slot, NULL, NULL));
	memset(buf, 0, PAYLOAD);
	t_assert_eq(tier_nvme_read_batch(t, &io, 1), 0);
	t_assert_eq(io.layout_id, 40 + i);
	t_assert(memcmp(buf, data + (size_t)i * PAYLOAD, PAYLOAD) == 0);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char path[256];
	struct tier_nvme *t;
	struct tier_nvme_stats st;
	struct tier_nvme_io io[NSLOTS];
	uint32_t slots[NSLOTS];
	unsigned char *buf = NULL;
	int n;

	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-rec-%d",
		 dir ? dir : "/var/tmp", getpid());
	data = t_page_alloc(NSLOTS * PAYLOAD);
	buf = t_page_alloc(PAYLOAD);

	t = open_tier(path, PAYLOAD, false);
	for (int i = 0; i < 5; i++) {
		nt_fill(data + i * PAYLOAD, PAYLOAD, 77 + i);
		io[i] = (struct tier_nvme_io){ .hash = 0x5000 + i,
					       .layout_id = 40 + i,
					       .tenant = 2000 + i,
					       .buf = data + i * PAYLOAD,
					       .length = PAYLOAD };
	}
	t_assert_eq(tier_nvme_write_batch(t, io, 5), 0);
	for (int i = 0; i < 5; i++)
		slots[i] = io[i].slot;
	tier_nvme_close(t);

	/* 1. restart: index rebuilt from headers */
	t = open_tier(path, PAYLOAD, false);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, 5);
	t_assert_eq(st.used_slots, 5);
	t_assert_eq(st.header_failures, 0);
	n = 0;
	t_ok(tier_nvme_foreach(t, count_cb, &n));
	t_assert_eq(n, 5);
	for (int i = 0; i < 5; i++) {
		uint32_t s;

		t_ok(tier_nvme_lookup(t, 0x5000 + i, &s, NULL, NULL));
		t_assert_eq(s, slots[i]);
		read_ok(t, i, buf);
	}
	/* new writes land in free slots, not over recovered ones */
	for (int i = 5; i < NSLOTS; i++) {
		nt_fill(data + i * PAYLOAD, PAYLOAD, 77 + i);
		io[i] = (struct tier_nvme_io){ .hash = 0x5000 + i,
					       .layout_id = 40 + i,
					       .buf = data + i * PAYLOAD,
					       .length = PAYLOAD };
	}
	t_assert_eq(tier_nvme_write_batch(t, io + 5, NSLOTS - 5), 0);
	for (int i = 5; i < NSLOTS; i++)
		for (int j = 0; j < 5; j++)
			t_assert(io[i].slot != slots[j]);
	for (int i = 5; i < NSLOTS; i++)
		slots[i] = io[i].slot;
	tier_nvme_close(t);

	/* 2. corrupt one payload byte of block 2 and one header byte of
	 * block 6 while the tier is closed */
	t = open_tier(path, PAYLOAD, false);
	uint64_t off2 = tier_nvme_slot_offset(t, slots[2]);
	uint64_t off6 = tier_nvme_slot_offset(t, slots[6]);
	tier_nvme_close(t);
	nt_flip_byte(path, off2 + TIER_NVME_HEADER_BYTES + 12345);
	nt_flip_byte(path, off6 + 40); /* inside the hash field */

	t = open_tier(path, PAYLOAD, false);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, NSLOTS - 1);
	t_assert_eq(st.header_failures, 1);
	t_assert_eq(tier_nvme_lookup(t, 0x5006, NULL, NULL, NULL), -ENOENT);
	/* block 2 is indexed (its header is fine) but never served */
	struct tier_nvme_io bad = { .hash = 0x5002, .buf = buf };
	t_ok(tier_nvme_lookup(t, bad.hash, &bad.slot, NULL, NULL));
	t_assert_eq(tier_nvme_read_batch(t, &bad, 1), 1);
	t_assert_eq(bad.result, -EBADMSG);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.checksum_failures, 1);
	t_assert_eq(st.reads, 0);
	t_assert_eq(tier_nvme_lookup(t, 0x5002, NULL, NULL, NULL), -ENOENT);
	t_assert_eq(tier_nvme_read_batch(t, &bad, 1), 1);
	t_assert_eq(bad.result, -ENOENT);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, NSLOTS - 2);
	/* the others are intact */
	for (int i = 0; i < NSLOTS; i++)
		if (i != 2 && i != 6)
			read_ok(t, i, buf);
	/* the corrupt block can be written again and then served */
	io[2].result = 1;
	t_assert_eq(tier_nvme_write_batch(t, &io[2], 1), 0);
	read_ok(t, 2, buf);
	tier_nvme_close(t);

	/* 3. the rewritten block 2 survives another restart */
	t = open_tier(path, PAYLOAD, false);
	read_ok(t, 2, buf);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, NSLOTS - 1);
	tier_nvme_close(t);

	/* 4. another geometry, or a reformat, starts empty */
	t = open_tier(path, PAYLOAD / 2, false);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, 0);
	t_assert_eq(st.used_slots, 0);
	tier_nvme_close(t);
	t = open_tier(path, PAYLOAD, false);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, 0);
	tier_nvme_close(t);
	t = open_tier(path, PAYLOAD, false);
	io[0].result = 1;
	t_assert_eq(tier_nvme_write_batch(t, &io[0], 1), 0);
	tier_nvme_close(t);
	t = open_tier(path, PAYLOAD, true);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, 0);
	tier_nvme_close(t);

	unlink(path);
	free(data);
	free(buf);
	printf("nvme recovery ok\n");
	return 0;
}
