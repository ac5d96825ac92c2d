// SPDX-License-Identifier: MIT
/*
 * An NVMe tier in a regular file, sized as admin.md says:
 *   1. 16 slots made with capacity_bytes, 16 blocks written;
 *   2. opened again with no size (capacity_bytes 0, kvmmd without
 *      --nvme-size): the file's own size, 16 slots, all 16 recovered (it
 *      was -EINVAL: kvmmd wanted --nvme-size for a file it made itself);
 *   3. opened with 8 slots (a smaller --nvme-size on a restart, a typo):
 *      8 recovered, and a WARN line that says 8 cached blocks are lost
 *      (it was an INFO line that gave no count); the file is cut to the
 *      new size only after the count;
 *   4. blocks 3 and 8 evicted from a 16-slot tier and block 3 written
 *      again, into slot 8: slot 3 keeps its old header, which the shrink
 *      to 8 recovers, so block 3 is not counted lost (7, not 8);
 *   5. an empty file with no size: -EINVAL (there is nothing to go by).
 * Skips (77) where the file system cannot do O_DIRECT io_uring I/O.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAYLOAD (16 * 1024)
#define BIG 16
#define SMALL 8

static unsigned char *data; /* BIG payloads */
static char path[256];

static struct tier_nvme_io block(int i)
{
	return (struct tier_nvme_io){ .hash = 0x7e00 + i,
				      .layout_id = 3,
				      .buf = data + (size_t)i * PAYLOAD,
				      .length = PAYLOAD };
}

/* Open path with nslots slots (0: no size given); expect `slots` slots
 * and `recovered` blocks.  The log lines it wrote go into log. */
static struct tier_nvme *open_tier(uint32_t nslots, uint32_t slots,
				   uint32_t recovered, char *log, size_t cap)
{
	struct tier_nvme_config cfg = {
		.path = path,
		.capacity_bytes = nslots ? NT_CAPACITY(nslots, PAYLOAD) : 0,
		.payload_bytes = PAYLOAD,
	};
	struct tier_nvme *t;
	struct tier_nvme_stats st;
	int r;

	t = nt_open_logged(cfg, log, cap, &r);
	if (r)
		fputs(log, stderr);
	t_ok(r);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.capacity_slots, slots);
	t_assert_eq(st.recovered_slots, recovered);
	return t;
}

static off_t file_size(void)
{
	struct stat st;

	t_ok(stat(path, &st));
	return st.st_size;
}

static void fill_tier(void)
{
	struct tier_nvme_io io[BIG];
	struct tier_nvme *t;
	char log[4096];

	t = open_tier(BIG, BIG, 0, log, sizeof(log));
	for (int i = 0; i < BIG; i++)
		io[i] = block(i);
	t_assert_eq(tier_nvme_write_batch(t, io, BIG), 0);
	tier_nvme_close(t);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct tier_nvme_config cfg = { .size = sizeof(cfg),
					.path = path,
					.payload_bytes = PAYLOAD };
	struct tier_nvme_io io;
	struct tier_nvme *t;
	char log[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-file-size-%d",
		 dir ? dir : "/var/tmp", getpid());
	unlink(path);
	data = t_page_alloc(BIG * PAYLOAD);
	for (size_t i = 0; i < BIG * PAYLOAD; i++)
		data[i] = (unsigned char)(i * 7 + i / PAYLOAD);

	/* 1, 2 */
	fill_tier();
	t = open_tier(0, BIG, BIG, log, sizeof(log));
	t_assert_eq(file_size(), NT_CAPACITY(BIG, PAYLOAD));
	tier_nvme_close(t);

	/* 3 */
	t = open_tier(SMALL, SMALL, SMALL, log, sizeof(log));
	t_assert_has(log, "WARN");
	t_assert_has(
		log,
		": shrank from 16 to 8 slots: 8 cached blocks past the new end are lost");
	t_assert_eq(file_size(), NT_CAPACITY(SMALL, PAYLOAD));
	tier_nvme_close(t);

	/* 4 */
	unlink(path);
	fill_tier();
	t = open_tier(BIG, BIG, BIG, log, sizeof(log));
	t_ok(tier_nvme_free(t, 3));
	t_ok(tier_nvme_free(t, 8));
	io = block(3);
	t_assert_eq(tier_nvme_write_batch(t, &io, 1), 0);
	t_assert_eq(io.slot, 8);
	tier_nvme_close(t);
	t = open_tier(SMALL, SMALL, SMALL, log, sizeof(log));
	t_assert_has(
		log,
		": shrank from 16 to 8 slots: 7 cached blocks past the new end are lost");
	t_assert_eq(tier_nvme_lookup(t, 0x7e00 + 3, NULL, NULL, NULL), 0);
	tier_nvme_close(t);

	/* 5 */
	unlink(path);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	t_assert(fd >= 0);
	close(fd);
	t_assert_eq(tier_nvme_open(&cfg, &t), -EINVAL);
	t_assert_eq(file_size(), 0);
	unlink(path);
	free(data);
	return 0;
}
