// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Blocks recovered from NVMe at start are outside the policy ("cold")
 * until a prefix uses them, and give their slots when the NVMe tier needs
 * room: the oldest written first.  A stop saves the cache in the policy's
 * eviction order, so what it valued most is written last and stays
 * longest.
 *
 * 4 contents of 2 blocks (content 3 the newest, on the GPU; 0-2 in host
 * memory) are saved at a stop, in the order 0, 1, 2, 3.  A new kvmmd on
 * the same 16-slot file recovers the 8, then takes 10 new contents, whose
 * demotions need 4 of the cold blocks' slots: contents 0 and 1 go,
 * contents 2 and 3 are still there (read back byte-identical by a third
 * kvmmd).
 */
#include "tests/cache-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 2
#define NVME_SLOTS 16

static const struct cc_contents old = { .base = 0xc01d000,
					.tag0 = 70,
					.nb = NB };
static const struct cc_contents fresh = { .base = 0xf7e5000,
					  .tag0 = 90,
					  .nb = NB };

/* How many blocks of old content k a prefix open finds (from NVMe). */
static uint32_t found(const char *sock, int k)
{
	return cc_found_on_nvme(sock, &old, k);
}

int main(void)
{
	struct nca_args saving, plain;
	const char *const *args;
	struct kvmm_tier_stats_reply ts;
	char nvme[256];
	struct td_daemon d;
	uint32_t n[4];

	cc_nvme_path(nvme, sizeof(nvme), "cache-nvme-cold-order");
	t_nvme_require(nvme);
	cc_start(&d, nca_save_args(&saving, nvme, 2, NVME_SLOTS, "10000", 0));
	for (int k = 0; k < 4; k++)
		cc_write_content(d.sock, &old, k);
	cc_stop(&d); /* saves the 8 blocks, content 3's last */

	/* from here on without the save: what the stop leaves on disk is
	 * what the tier held */
	args = nca_save_args(&plain, nvme, 2, NVME_SLOTS, NULL, 0);
	cc_start(&d, args);
	for (int k = 0; k < 10; k++)
		cc_write_content(d.sock, &fresh, k);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, 8);
	/* 20 new blocks: 2 on the GPU, 6 in host memory, 12 on NVMe, where
	 * the 8 cold ones had to give 4 slots */
	t_assert_eq(ts.tiers[2].used_blocks, NVME_SLOTS);
	t_assert_eq(ts.tiers[2].drops, 4);
	/*
	 * Look in a third kvmmd, whose GPU and host tiers start empty: an
	 * open that finds blocks here would push two blocks down to NVMe,
	 * where the write could take a cold block's slot before the read
	 * gives its own back; there the restored blocks fit above.
	 */
	cc_stop(&d);
	cc_start(&d, args);
	for (int k = 0; k < 4; k++)
		n[k] = found(d.sock, k);
	printf("old contents found after the new ones: %u %u %u %u blocks\n",
	       n[0], n[1], n[2], n[3]);
	t_assert_eq(n[0], 0);
	t_assert_eq(n[1], 0);
	t_assert_eq(n[2], NB);
	t_assert_eq(n[3], NB);
	cc_stop(&d);
	unlink(nvme);
	return 0;
}
