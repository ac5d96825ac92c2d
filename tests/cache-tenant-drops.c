// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * A tenant's DROPPED counts the blocks kvmmd drops outside the policy's
 * decisions too, so that admitted - dropped = the blocks it has cached
 * (ADMIN_TENANTS, summed over the tiers) and its drops are the tiers'.
 * Before, only the policy's own drops (from the last tier) counted: a
 * block kvmmd threw out itself left the policy through a plain removal.
 *
 * One kvmmd (lru; 2 GPU blocks, a host tier, NVMe; --nvme-admit-uses 2;
 * the 2nd GPU -> host copy fails on purpose, KVMMD_TEST_MIGRATE_FAIL),
 * one-block contents published by child processes:
 *   - content 0 is published and read back (2 uses), contents 1.. are
 *     published once each; content 1's copy to the host tier fails (a
 *     lost block: a host drop and migrations_failed), content 0 is
 *     written on to NVMe, the others are refused there and dropped
 *     (nvme_admission_rejects, host drops);
 *   - the NVMe file is cut short: two opens of content 0 fail its reads,
 *     the second drops the slot and the cache loses the block (an NVMe
 *     drop, nvme_read_error_drops).
 * After each step: the tenant's dropped = the tiers' drops (every block
 * is this test's), admitted - dropped = its cached blocks = the tiers'
 * used blocks.
 */
#include <fcntl.h>

#include "tests/cache-uids.h"
#include "tests/lib/nvme_layout.h"
#include "tests/lib/nvme_probe.h"

#define NVME_SLOTS 16
#define MAX_CONTENTS 40

static const struct cc_contents contents = { .base = 0x7d0000,
					     .tag0 = 50,
					     .nb = 1 };

/* Every tenant's counts added up (only this test's uid publishes). */
struct tenant_sums {
	uint64_t admitted, dropped, cached;
};

static struct tenant_sums tenant_sums(const char *sock)
{
	struct kvmm_tenants_reply *r = cu_tenants(sock);
	struct tenant_sums s = { 0 };

	for (uint32_t i = 0; i < r->nr; i++) {
		s.admitted += r->tenants[i].admitted_blocks;
		s.dropped += r->tenants[i].dropped_blocks;
		for (int t = 0; t < 3; t++)
			s.cached += r->tenants[i].cached_blocks[t];
	}
	free(r);
	return s;
}

/* The tenant's counts against the tiers', settled; the tier stats in ts. */
static void check(const char *sock, const char *when,
		  struct kvmm_tier_stats_reply *ts)
{
	struct tenant_sums s;
	uint64_t drops, used;

	cc_settled_stats(sock, ts);
	s = tenant_sums(sock);
	drops = ts->tiers[0].drops + ts->tiers[1].drops + ts->tiers[2].drops;
	used = ts->tiers[0].used_blocks + ts->tiers[1].used_blocks +
	       ts->tiers[2].used_blocks;
	printf("%s: admitted %llu, dropped %llu, cached %llu; tier drops %llu/%llu/%llu, used %llu, admission rejects %llu, migrations failed %llu\n",
	       when, (unsigned long long)s.admitted,
	       (unsigned long long)s.dropped, (unsigned long long)s.cached,
	       (unsigned long long)ts->tiers[0].drops,
	       (unsigned long long)ts->tiers[1].drops,
	       (unsigned long long)ts->tiers[2].drops, (unsigned long long)used,
	       (unsigned long long)ts->nvme_admission_rejects,
	       (unsigned long long)ts->migrations_failed);
	t_assert_eq(s.dropped, drops);
	t_assert_eq(s.admitted - s.dropped, s.cached);
	t_assert_eq(s.cached, used);
}

int main(void)
{
	char nvme[256], size[32];
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	uint64_t host_drops;
	int k, fd;

	cc_nvme_path(nvme, sizeof(nvme), "cache-tenant-drops");
	t_nvme_require(nvme);
	nt_size_arg(size, sizeof(size), NVME_SLOTS, CC_PPB * CC_PAGE);
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "2M",
			       "--nvme-path",
			       nvme,
			       "--nvme-size",
			       size,
			       "--nvme-admit-uses",
			       "2",
			       NULL };

	setenv("KVMMD_TEST_MIGRATE_FAIL", "gpu-host:2", 1);
	cc_start(&d, args);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");

	cc_write_content(d.sock, &contents, 0);
	cc_read_content(d.sock, &contents, 0, 1, 0); /* its second use */
	/* until content 0 is on NVMe and two blocks were refused there */
	for (k = 1; k < MAX_CONTENTS; k++) {
		cc_write_content(d.sock, &contents, k);
		cc_settled_stats(d.sock, &ts);
		if (ts.tiers[2].used_blocks == 1 &&
		    ts.nvme_admission_rejects >= 2)
			break;
	}
	t_assert(k < MAX_CONTENTS);
	check(d.sock, "lost and refused", &ts);
	t_assert_eq(ts.migrations_failed, 1); /* content 1's copy */
	t_assert_eq(ts.tiers[1].drops, 1 + ts.nvme_admission_rejects);
	t_assert_eq(ts.tiers[2].drops, 0);
	host_drops = ts.tiers[1].drops;

	/* content 0's reads fail twice: the cache loses it with its slot */
	fd = open(nvme, O_RDWR | O_CLOEXEC);
	t_assert(fd >= 0);
	t_ok(ftruncate(fd, 4096));
	close(fd);
	t_assert_eq(cc_found_on_nvme(d.sock, &contents, 0), 0);
	t_assert_eq(cc_found_on_nvme(d.sock, &contents, 0), 0);
	check(d.sock, "restore failed", &ts);
	t_assert_eq(ts.nvme_read_error_drops, 1);
	t_assert_eq(ts.tiers[2].drops, 1);
	t_assert_eq(ts.tiers[2].used_blocks, 0);
	t_assert_eq(ts.tiers[1].drops, host_drops);

	cc_stop(&d);
	unlink(nvme);
	printf("tenant drops add up\n");
	return 0;
}
