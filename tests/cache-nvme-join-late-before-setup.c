// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * A drop answered after the NVMe tier opened for the size its blocks
 * have but before the cache is set up (no --cache-block-pages, no
 * region yet) holds at the set-up (Documentation/tiers.md, "An NVMe
 * tier that joins late"): 6 blocks on the file from a run before, then
 *   - the late join: kvmmd started with the file's directory missing,
 *     the directory back, the tier claimed and opened by the retries'
 *     timer (its blocks not in the cache yet), a drop of every block,
 *     the first region: none of the 6 comes back (the drop's line
 *     says it waits for the tier's open; recovered 0, both contents
 *     absent), nor after a restart (the file's superblock holds the
 *     mark);
 *   - the same at start (the file there, opened at start for its
 *     blocks' size): none back.
 * On the code before, the drop found neither a cache to walk nor a tier
 * out: it was answered (nvme 0 blocks) and forgotten, and the set-up
 * recovered all 6.  Waits shortened with KVMMD_TEST_CACHE_RETRY_MS=100.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#include <errno.h>
#include <sys/stat.h>

#define NB 3

static const struct cc_contents contents = { .base = 0xe75000,
					     .tag0 = 150,
					     .nb = NB };

static char dir[300], aside[320], nvme[340];

static void start(struct td_daemon *d, unsigned int flags)
{
	struct nca_args a;

	cc_start_with_delay(d, nca_args(&a, nvme, 3, flags),
			    "KVMMD_TEST_CACHE_RETRY_MS", 100);
}

/* Wait (at most 15 s) for the tier to join: nvme_open_error 0. */
static void wait_joined(const char *sock)
{
	struct kvmm_tier_stats_reply ts;

	cc_wait_nvme_joined(sock, &ts);
}

/* A run that leaves contents 0 and 1 on the file (6 blocks). */
static void fill(void)
{
	struct td_daemon d;

	start(&d, 0);
	cd_fill_to_nvme(d.sock, &contents);
	cc_stop(&d);
}

/* The drop of every block before the set-up, then the first regions:
 * none of the file's blocks back, nor after a restart. */
static void drop_then_setup(struct td_daemon *d)
{
	struct tier_nvme_peek p;

	(void)cd_kvmmctl(d->sock, "--tier nvme");
	td_log_has(
		d,
		"the NVMe tier is out (1 size): the blocks of its file the drop covers (every block) are dropped when it joins, before they are recovered (in memory alone",
		true);
	cd_open_expect(d->sock, &contents, 0, 0, 0, 0, 0);
	td_log_has(
		d,
		"the drop of every block answered while it was out is applied: 6 blocks of its file left out before the recovery, its drop marks on disk",
		true);
	t_assert_eq(cd_recovered(d->sock), 0);
	cd_open_expect(d->sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(d);
	t_ok(tier_nvme_peek(nvme, &p));
	t_assert(p.drop_all != 0);

	start(d, 0);
	t_assert_eq(cd_recovered(d->sock), 0);
	cd_open_expect(d->sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d->sock, &contents, 1, 0, 0, 0, 0);
	cc_stop(d);
}

static void late_join(void)
{
	struct td_daemon d;

	fill();
	t_ok(rename(dir, aside));
	start(&d, NCA_BLOCK_UNNAMED);
	t_ok(rename(aside, dir));
	wait_joined(d.sock);
	td_wait_log(&d, "NVMe tier opened at start for blocks of 4 pages",
		    5000);
	drop_then_setup(&d);
	printf("a drop after the late claim, before the set-up: none back\n");
}

static void at_start(void)
{
	struct td_daemon d;

	fill();
	start(&d, NCA_BLOCK_UNNAMED);
	td_log_has(&d, "NVMe tier opened at start for blocks of 4 pages", true);
	drop_then_setup(&d);
	printf("a drop after the start's early open, before the set-up: none back\n");
}

int main(void)
{
	char base[256];

	cc_nvme_path(base, sizeof(base), "join-late-before-setup");
	t_nvme_require(base);
	snprintf(dir, sizeof(dir), "%s.d", base);
	snprintf(aside, sizeof(aside), "%s.aside", base);
	snprintf(nvme, sizeof(nvme), "%s/slots", dir);
	t_ok(mkdir(dir, 0700));
	late_join();
	unlink(nvme);
	at_start();
	unlink(nvme);
	rmdir(dir);
	printf("drops before the set-up held at it\n");
	return 0;
}
