// SPDX-License-Identifier: MIT
/*
 * NVMe tier: opening the tier asks the kernel to back the caller's
 * registered region with 2 MiB pages (an I/O into it is then a DMA segment
 * or two instead of one per 4 KiB page).  The region's contents survive
 * unchanged, only whole 2 MiB pages inside it count, the process really
 * has that much in huge pages, and blocks written from it and read back
 * into it are byte-identical.  Where the kernel has no MADV_COLLAPSE or no
 * huge page to give, reg_huge_bytes is 0 and the data checks still run.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAYLOAD (256 * 1024)
#define HUGE (2u << 20)
#define REGION (8u << 20)
#define NBLOCKS 4

static uint64_t pattern(size_t i)
{
	return i * 0x9e3779b97f4a7c15ull + 17;
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char path[256];
	unsigned char *map = NULL, *region = NULL, *rd = NULL;
	struct tier_nvme *t;
	struct tier_nvme_stats st;
	struct tier_nvme_io io[NBLOCKS];
	long long huge;

	if (!dir)
		dir = "/var/tmp";
	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-huge-%d", dir,
		 getpid());
	/* a region that starts 4 KiB past a 2 MiB boundary, touched in
	 * 4 KiB pages (no advice yet), as a slab the tier is handed */
	map = mmap(NULL, REGION + 2 * HUGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	t_assert(map != MAP_FAILED);
	region = (unsigned char *)(((uintptr_t)map + HUGE - 1) &
				   ~(uintptr_t)(HUGE - 1)) +
		 4096;
	for (size_t i = 0; i < REGION / 8; i++) {
		uint64_t v = pattern(i);

		memcpy(region + i * 8, &v, 8);
	}
	rd = t_page_alloc(PAYLOAD);

	struct tier_nvme_config cfg = {
		.size = sizeof(cfg),
		.path = path,
		.capacity_bytes = NT_CAPACITY(NBLOCKS, PAYLOAD),
		.payload_bytes = PAYLOAD,
		.queue_depth = 4,
		.io_bytes = PAYLOAD,
		.reg_base = region,
		.reg_len = REGION,
	};
	t = nt_open(cfg, NULL, NULL);
	tier_nvme_get_stats(t, &st);

	/* the contents are the caller's: a collapse copies, never loses */
	for (size_t i = 0; i < REGION / 8; i++) {
		uint64_t v;

		memcpy(&v, region + i * 8, 8);
		if (v != pattern(i))
			t_fail("region byte %zu changed by tier_nvme_open",
			       i * 8);
	}
	/* only the 3 whole 2 MiB pages inside [region, region + 8 MiB) */
	t_assert_eq(st.reg_huge_bytes % HUGE, 0);
	t_assert(st.reg_huge_bytes <= REGION - HUGE);
	huge = t_anon_huge_bytes();
	if (st.reg_huge_bytes && huge >= 0)
		t_assert(huge >= (long long)st.reg_huge_bytes);
	printf("reg_huge_bytes %llu of %u, AnonHugePages %lld\n",
	       (unsigned long long)st.reg_huge_bytes, REGION, huge);

	/* blocks from the (now huge-page) region go out and come back */
	for (int i = 0; i < NBLOCKS; i++)
		io[i] = (struct tier_nvme_io){
			.hash = 0x4a6e00 + (uint64_t)i,
			.buf = region + HUGE + (size_t)i * (4096 + PAYLOAD),
			.length = PAYLOAD,
			.headroom = true, /* the 4 KiB before is ours too */
		};
	t_assert_eq(tier_nvme_write_batch(t, io, NBLOCKS), 0);
	for (int i = 0; i < NBLOCKS; i++) {
		struct tier_nvme_io q = { .hash = io[i].hash,
					  .slot = io[i].slot,
					  .buf = rd };

		memset(rd, 0, PAYLOAD);
		t_assert_eq(tier_nvme_read_batch(t, &q, 1), 0);
		t_assert_eq(q.result, 0);
		t_assert_eq(q.length, PAYLOAD);
		t_assert(memcmp(rd, io[i].buf, PAYLOAD) == 0);
	}
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.checksum_failures, 0);
	t_assert_eq(st.reads, NBLOCKS);
	tier_nvme_close(t);
	unlink(path);
	free(rd);
	munmap(map, REGION + 2 * HUGE);
	printf("nvme huge pages ok\n");
	return 0;
}
