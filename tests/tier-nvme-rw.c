// SPDX-License-Identifier: MIT
/*
 * NVMe tier: blocks written in a batch come back byte-identical (also when
 * read in a different order, several in flight, through registered and
 * unregistered memory, with payloads larger than one I/O), a hash already
 * on disk is not written twice, the disk cap is enforced with -ENOSPC,
 * freeing makes room, bad arguments are refused, and the file is
 * preallocated to exactly the configured size.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAYLOAD (192 * 1024)
#define NSLOTS 6

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char path[256];
	unsigned char *region = NULL, *other = NULL, *rd = NULL;
	struct tier_nvme *t;
	struct tier_nvme_stats st;
	struct tier_nvme_io io[NSLOTS + 1];
	struct stat sb;

	if (!dir)
		dir = "/var/tmp";
	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-rw-%d", dir, getpid());
	region = t_page_alloc(NSLOTS * PAYLOAD);
	other = t_page_alloc(2 * PAYLOAD);
	rd = t_page_alloc(NSLOTS * PAYLOAD);
	struct tier_nvme_config cfg = {
		.size = sizeof(cfg),
		.path = path,
		.capacity_bytes = NT_CAPACITY(NSLOTS, PAYLOAD) + 100,
		.payload_bytes = PAYLOAD,
		.queue_depth = 4,
		.io_bytes = 64 * 1024, /* 3 payload I/Os per block */
		.reg_base = region,
		.reg_len = NSLOTS * PAYLOAD,
	};
	t = nt_open(cfg, NULL, NULL);
	t_ok(stat(path, &sb));
	t_assert_eq(sb.st_size, cfg.capacity_bytes);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.capacity_slots, NSLOTS);
	t_assert_eq(st.slot_bytes, NT_SLOT_BYTES(PAYLOAD));
	t_assert(st.registered_buffers);

	/* five blocks from the registered region, one from elsewhere */
	for (int i = 0; i < NSLOTS; i++) {
		unsigned char *p = i < 5 ? region + i * PAYLOAD : other;

		nt_fill(p, PAYLOAD, 1000 + i);
		io[i] = (struct tier_nvme_io){ .hash = 0xabc000 + i,
					       .layout_id = 7,
					       .buf = p,
					       .length = PAYLOAD };
	}
	t_assert_eq(tier_nvme_write_batch(t, io, NSLOTS), 0);
	for (int i = 0; i < NSLOTS; i++) {
		t_assert_eq(io[i].result, 0);
		t_assert_eq(tier_nvme_slot_state(t, io[i].slot),
			    TIER_SLOT_READY);
	}
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.writes, NSLOTS);
	t_assert_eq(st.bytes_written, NSLOTS * PAYLOAD);
	t_assert_eq(st.used_slots, NSLOTS);
	t_assert(st.sqes >= NSLOTS * 4);

	/* full: the cap holds; a known hash is deduplicated, not refused */
	nt_fill(other + PAYLOAD, PAYLOAD, 99);
	io[NSLOTS] = (struct tier_nvme_io){ .hash = 0xdead,
					    .buf = other + PAYLOAD,
					    .length = PAYLOAD };
	t_assert_eq(tier_nvme_write_batch(t, &io[NSLOTS], 1), 1);
	t_assert_eq(io[NSLOTS].result, -ENOSPC);
	struct tier_nvme_io dup = { .hash = 0xabc002,
				    .layout_id = 7,
				    .buf = other + PAYLOAD,
				    .length = PAYLOAD };
	t_assert_eq(tier_nvme_write_batch(t, &dup, 1), 0);
	t_assert_eq(dup.slot, io[2].slot);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.alloc_failures, 1);
	t_assert_eq(st.dedup_hits, 1);
	t_assert_eq(st.writes, NSLOTS);

	/* read back in reverse order, into unregistered memory */
	struct tier_nvme_io rio[NSLOTS];
	for (int i = 0; i < NSLOTS; i++) {
		int j = NSLOTS - 1 - i;
		uint64_t len = 0, layout = 0;
		uint32_t slot;

		t_ok(tier_nvme_lookup(t, io[j].hash, &slot, &len, &layout));
		t_assert_eq(slot, io[j].slot);
		t_assert_eq(len, PAYLOAD);
		t_assert_eq(layout, 7);
		rio[i] = (struct tier_nvme_io){ .hash = io[j].hash,
						.slot = slot,
						.buf = rd + i * PAYLOAD };
	}
	memset(rd, 0, NSLOTS * PAYLOAD);
	t_assert_eq(tier_nvme_read_batch(t, rio, NSLOTS), 0);
	for (int i = 0; i < NSLOTS; i++) {
		int j = NSLOTS - 1 - i;

		t_assert_eq(rio[i].result, 0);
		t_assert_eq(rio[i].length, PAYLOAD);
		t_assert(memcmp(rd + i * PAYLOAD, io[j].buf, PAYLOAD) == 0);
	}
	/* read into the registered region too */
	memset(region, 0, PAYLOAD);
	rio[0] = (struct tier_nvme_io){ .hash = io[5].hash,
					.slot = io[5].slot,
					.buf = region };
	t_assert_eq(tier_nvme_read_batch(t, rio, 1), 0);
	t_assert(memcmp(region, other, PAYLOAD) == 0);

	/* wrong hash for the slot, unknown slot, bad buffers */
	rio[0] = (struct tier_nvme_io){ .hash = 0x1,
					.slot = io[1].slot,
					.buf = rd };
	t_assert_eq(tier_nvme_read_batch(t, rio, 1), 1);
	t_assert_eq(rio[0].result, -ENOENT);
	rio[0] = (struct tier_nvme_io){ .hash = io[1].hash,
					.slot = 99,
					.buf = rd };
	t_assert_eq(tier_nvme_read_batch(t, rio, 1), 1);
	t_assert_eq(rio[0].result, -EINVAL);
	rio[0] = (struct tier_nvme_io){ .hash = io[1].hash,
					.slot = io[1].slot,
					.buf = rd + 1 };
	t_assert_eq(tier_nvme_read_batch(t, rio, 1), 1);
	t_assert_eq(rio[0].result, -EINVAL);
	struct tier_nvme_io big = { .hash = 5,
				    .buf = rd,
				    .length = PAYLOAD + 4096 };
	t_assert_eq(tier_nvme_write_batch(t, &big, 1), 1);
	t_assert_eq(big.result, -EINVAL);

	/* free makes room for the refused block */
	t_ok(tier_nvme_free(t, io[0].slot));
	t_assert_eq(tier_nvme_free(t, io[0].slot), -ENOENT);
	t_assert_eq(tier_nvme_lookup(t, io[0].hash, NULL, NULL, NULL), -ENOENT);
	io[NSLOTS].result = 1;
	t_assert_eq(tier_nvme_write_batch(t, &io[NSLOTS], 1), 0);
	t_assert_eq(io[NSLOTS].slot, io[0].slot);
	rio[0] = (struct tier_nvme_io){ .hash = 0xdead,
					.slot = io[NSLOTS].slot,
					.buf = rd };
	t_assert_eq(tier_nvme_read_batch(t, rio, 1), 0);
	t_assert(memcmp(rd, other + PAYLOAD, PAYLOAD) == 0);

	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, NSLOTS);
	t_assert_eq(st.peak_used_slots, NSLOTS);
	t_assert_eq(st.checksum_failures, 0);
	t_assert_eq(st.read_errors, 0);
	t_assert_eq(st.write_errors, 0);
	tier_nvme_close(t);
	unlink(path);
	free(region);
	free(other);
	free(rd);
	printf("nvme read/write ok\n");
	return 0;
}
