// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * The slot headers a restart leaves out under a drop mark are zeroed
 * once the tier is the cache's, so the next restart neither reads nor
 * counts them again (Documentation/tiers.md, "Drop marks").  kvmmd as
 * tests/lib/nvme_cache_args.h sets it up (3 GPU blocks, 6 host, 6 NVMe;
 * contents 0 and 1 of 3 blocks end on NVMe):
 *   - run 1, every invalidation failing (KVMMD_TEST_MIGRATE_FAIL=
 *     nvme-invalidate:1+): `cache-drop --tier nvme` drops the 6, their
 *     headers stay on disk, the mark covers them;
 *   - run 2, the invalidations failing still: the scan leaves the 6 out
 *     (`6 dropped by an operator's drop mark`), their clearing fails (`0
 *     ... zeroed, 6 not`) and the 6 headers are still on disk;
 *   - run 3: the scan counts the 6 again, they are zeroed (`6 ... zeroed,
 *     0 not`, no valid header left in the file); contents 0 and 1 are
 *     written again into those slots;
 *   - run 4: `0 dropped by an operator's drop mark` (6 before: every
 *     restart read them again), the 6 written in run 3 recovered and
 *     served from NVMe.
 * Skips (77) where the NVMe tier cannot run (no O_DIRECT there).
 */
#include <fcntl.h>

#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3

static const struct cc_contents contents = { .base = 0xd9000,
					     .tag0 = 60,
					     .nb = NB };

static void start(struct td_daemon *d, const char *nvme, bool fail)
{
	struct nca_args a;

	if (fail)
		setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-invalidate:1+", 1);
	cc_start(d, nca_args(&a, nvme, 3, 0));
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
}

int main(void)
{
	struct kvmm_admin_cache_drop_reply r;
	struct td_daemon d;
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-drop-mark-restarts");
	t_nvme_require(nvme);

	start(&d, nvme, true);
	cd_fill_to_nvme(d.sock, &contents);
	r = cd_kvmmctl(d.sock, "--tier nvme");
	cd_expect(&r, 0, 0, 2 * NB, 0, 0, 0);
	t_assert_eq(r.nvme_invalidate_failures, 2 * NB);
	cc_stop(&d);
	t_assert_eq(nca_headers(nvme), 2 * NB);

	/* their clearing fails: left for the next start */
	start(&d, nvme, true);
	t_assert_eq(cd_recovered(d.sock), 0);
	td_log_has(&d, "6 dropped by an operator's drop mark", true);
	td_wait_log(&d, "0 NVMe slot headers below a drop mark zeroed, 6 not",
		    10000);
	cc_stop(&d);
	t_assert_eq(nca_headers(nvme), 2 * NB);

	start(&d, nvme, false);
	t_assert_eq(cd_recovered(d.sock), 0);
	td_log_has(&d, "6 dropped by an operator's drop mark", true);
	td_wait_log(&d, "6 NVMe slot headers below a drop mark zeroed, 0 not",
		    10000);
	t_assert_eq(nca_headers(nvme), 0);
	cd_fill_to_nvme(d.sock, &contents); /* into the slots zeroed */
	cc_stop(&d);

	start(&d, nvme, false);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	td_log_has(&d, "0 dropped by an operator's drop mark", true);
	td_log_has(&d, "below a drop mark zeroed", false);
	cd_open_expect(d.sock, &contents, 0, NB, 0, 0, NB);
	cd_open_expect(d.sock, &contents, 1, NB, 0, 0, NB);
	cc_stop(&d);
	unlink(nvme);
	printf("the headers under a drop mark are zeroed at the restart after the drop: the next one counts none\n");
	return 0;
}
