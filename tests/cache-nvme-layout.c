// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * NVMe blocks of another layout are not the cache's: a file whose slots
 * hold blocks of the same byte size in pages of another size (layout_id
 * 2: two 128 KiB pages, where kvmmd now serves blocks of four 64 KiB
 * pages) is recovered with those slots freed, not kept outside the
 * policy for the run.  Before, they stayed taken, and a block of the
 * same hash written later "found" its stale slot and was not written: its
 * reload served the old bytes.  Here content 0's two hashes are seeded
 * in the old layout with other bytes; kvmmd recovers nothing, frees the
 * seeded slots (with a warning), and content 0 published, pushed down to
 * NVMe and opened again comes back byte-identical.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-common.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"

#define NB 2
#define NVME_SLOTS 16
#define PAYLOAD (4 * CC_PAGE)

static const struct cc_contents content = { .base = 0x1a70000,
					    .tag0 = 40,
					    .nb = NB };

/* The file as a kvmmd with 128 KiB pages would have left it: content
 * 0's hashes and 4 more, in layout 2, bytes 0xee. */
static void seed(const char *path, uint64_t size)
{
	struct tier_nvme_config cfg = { .size = sizeof(cfg),
					.path = path,
					.capacity_bytes = size,
					.payload_bytes = PAYLOAD };
	struct tier_nvme_io io[NB + 4];
	struct tier_nvme *t;
	uint64_t h[NB];
	void *buf = NULL;

	buf = t_page_alloc(PAYLOAD);
	memset(buf, 0xee, PAYLOAD);
	cc_content_hashes(&content, 0, h);
	t = nt_open(cfg, NULL, NULL);
	for (unsigned i = 0; i < NB + 4; i++)
		io[i] = (struct tier_nvme_io){
			.hash = i < NB ? h[i] : 0x5eed0000 + i,
			.layout_id = 2,
			.buf = buf,
			.length = PAYLOAD,
		};
	t_assert_eq(tier_nvme_write_batch(t, io, NB + 4), 0);
	tier_nvme_close(t);
	free(buf);
}

int main(void)
{
	struct kvmm_tier_stats_reply ts;
	char nvme[256], size[32], log[16384];
	uint64_t bytes = NT_CAPACITY(NVME_SLOTS, PAYLOAD);
	struct td_daemon d;

	cc_nvme_path(nvme, sizeof(nvme), "cache-nvme-layout");
	t_nvme_require(nvme);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)bytes);
	seed(nvme, bytes);
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "1M",
			       "--nvme-path",
			       nvme,
			       "--nvme-size",
			       size,
			       NULL };

	cc_start(&d, args);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, 0);
	t_assert_eq(ts.tiers[2].used_blocks, 0); /* the 6 slots freed */
	/* content 0, then 3 more (lru): content 0 goes down to NVMe */
	for (int k = 0; k < 4; k++)
		cc_write_content(d.sock, &content, k);
	cc_settled_stats(d.sock, &ts);
	t_assert(ts.tiers[2].used_blocks >= NB);
	cc_read_content(d.sock, &content, 0, NB, 2); /* its bytes, from NVMe */
	t_ok(td_stop_log(&d, log, sizeof(log)));
	if (!strstr(log,
		    "6 NVMe blocks from the last run are of another layout"))
		t_fail("no warning about the other layout in:\n%s", log);
	unlink(nvme);
	printf("blocks of another layout: slots freed, content 0 written anew and read back\n");
	return 0;
}
