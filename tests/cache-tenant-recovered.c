// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * The blocks a restart recovers from NVMe are the tenant's their slot
 * header names (Documentation/tiers.md, "Tenants of recovered blocks"):
 * counted in its row of `kvmmctl tenants` as NVMe blocks it cached,
 * dropped by `cache-drop --uid` of it, and counted against its NVMe
 * limit, in the run that found them, also for a tenant not connected in
 * that run.  Before, they were nobody's until an open used them: the
 * tenants view showed 0, `--uid A` dropped none of them (only its mark
 * kept them out of the next start) and a limit did not see them.
 *
 * kvmmd as tests/lib/nvme_cache_args.h sets it up (lru, 3 GPU blocks, 6
 * host, 6 NVMe, nothing saved at the stop).  Clients of uids A and B
 * publish 3 blocks each; 3 contents of root's push them down to NVMe.
 *   - stopped, restarted: 6 recovered, A and B each 3 cached on NVMe (3
 *     admitted, 0 dropped), listed though neither has connected;
 *     `tenant-limit A nvme:1` drops 2 of A's (dropped 2, limit_moves 2,
 *     4 NVMe blocks left); `cache-drop --uid A` drops A's last one and
 *     claims the 2 stale copies, none of B's; B opens its 3 from NVMe
 *     byte-identical (then its 3 on the GPU, charged to it), A finds none;
 *     TIER_STATS' cold counts (ABI 1.24) follow: the limit's 2 evicted,
 *     the drop's 1 dropped, B's 3 admitted, 0 left cold;
 *     a third kvmmd recovers B's 3 only;
 *   - SIGKILLed instead, B's headers rewritten as kvmmd wrote them before
 *     the tenants (no tenant): A's 3 are A's, B's nobody's (no row for
 *     B), and `--uid B` drops none of them.
 * Needs root (clients of other uids); skips (77) otherwise, and where the
 * NVMe tier cannot run (no O_DIRECT there).
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "kvmm/kvmmd/crc32c.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3
#define NSLOTS NCA_NVME_SLOTS
#define UID_A 61341
#define UID_B 61342

static const struct cc_contents contents = { .base = 0xe4000,
					     .tag0 = 80,
					     .nb = NB };
static uint64_t ha[NB], hb[NB];

static void start(struct td_daemon *d, const char *nvme)
{
	struct nca_args a;

	cu_start(d, nca_args(&a, nvme, 3, NCA_ANY_UID));
}

/* A's and B's 3 blocks each on NVMe, root's 3 contents above them. */
static void fill(const char *sock)
{
	struct kvmm_tier_stats_reply ts;

	cu_publish_as(sock, UID_A, UID_A, ha, NB, 1, NB);
	cu_publish_as(sock, UID_B, UID_B, hb, NB, 2, NB);
	for (int k = 0; k < 3; k++)
		cc_write_content(sock, &contents, k);
	cc_settled_stats(sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 2 * NB);
}

/* Tenant id's row in r: cached per tier, admitted, dropped, limit moves. */
static void expect(const struct kvmm_tenants_reply *r, uint32_t id,
		   uint64_t gpu, uint64_t nvme, uint64_t admitted,
		   uint64_t dropped, uint64_t moves)
{
	const struct kvmm_tenant_info *t = cu_tenant(r, id);

	if (t->cached_blocks[0] != gpu || t->cached_blocks[1] != 0 ||
	    t->cached_blocks[2] != nvme || t->admitted_blocks != admitted ||
	    t->dropped_blocks != dropped || t->limit_moves != moves)
		t_fail("tenant %u: cached %llu/%llu/%llu admitted %llu dropped %llu limit_moves %llu; expected %llu/0/%llu %llu %llu %llu",
		       id, (unsigned long long)t->cached_blocks[0],
		       (unsigned long long)t->cached_blocks[1],
		       (unsigned long long)t->cached_blocks[2],
		       (unsigned long long)t->admitted_blocks,
		       (unsigned long long)t->dropped_blocks,
		       (unsigned long long)t->limit_moves,
		       (unsigned long long)gpu, (unsigned long long)nvme,
		       (unsigned long long)admitted,
		       (unsigned long long)dropped, (unsigned long long)moves);
	/* what it cached is what it brought in less what went */
	t_assert_eq(t->admitted_blocks - t->dropped_blocks,
		    t->cached_blocks[0] + t->cached_blocks[1] +
			    t->cached_blocks[2]);
}

static bool has_row(const struct kvmm_tenants_reply *r, uint32_t id)
{
	for (uint32_t i = 0; i < r->nr; i++)
		if (r->tenants[i].id == id)
			return true;
	return false;
}

/* TIER_STATS' recovered blocks' fate (ABI 1.24): still cold, taken in,
 * evicted (here: by a tenant's limit) and dropped (a --uid drop). */
static void expect_cold(const char *sock, uint64_t cold, uint64_t admitted,
			uint64_t evicted, uint64_t dropped)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(sock, &ts);
	cc_cold_check(&ts, cold + admitted + evicted + dropped, cold, admitted,
		      evicted, dropped);
}

static void stopped(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply dr;
	struct kvmm_tenants_reply *r;
	struct kvmm_tier_stats_reply ts;
	struct td_daemon d;
	char cmd[64], out[4096];

	start(&d, nvme);
	fill(d.sock);
	cc_stop(&d);

	start(&d, nvme);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	r = cu_tenants(d.sock);
	/* before: neither listed, nothing cached by anyone */
	expect(r, UID_A, 0, NB, NB, 0, 0);
	expect(r, UID_B, 0, NB, NB, 0, 0);
	t_assert_eq(cu_tenant(r, UID_A)->sessions, 0);
	free(r);
	cu_kvmmctl_has(
		d.sock, "--json tenants",
		"{\"id\":%u,\"sessions\":0,\"cached_blocks\":{\"gpu\":0,\"host\":0,\"nvme\":3},\"admitted_blocks\":3,",
		UID_A);

	/* A's limit sees them: 2 of them go (before: none, 3 stayed) */
	snprintf(cmd, sizeof(cmd), "tenant-limit %d nvme:1", UID_A);
	t_assert_eq(td_kvmmctl(d.sock, cmd, out, sizeof(out)), 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 2 * NB - 2);
	t_assert_eq(ts.tiers[2].drops, 2);
	r = cu_tenants(d.sock);
	expect(r, UID_A, 0, 1, NB, 2, 2);
	expect(r, UID_B, 0, NB, NB, 0, 0);
	free(r);
	expect_cold(d.sock, 2 * NB - 2, 0, 2, 0); /* evicted by the limit */

	/* --uid A: its last block, and the 2 its limit left as its stale
	 * copies (before: dropped 0, nothing of A's in this run) */
	snprintf(cmd, sizeof(cmd), "--uid %d", UID_A);
	dr = cd_kvmmctl(d.sock, cmd);
	cd_expect(&dr, 0, 0, 1, 0, 0, 0);
	t_assert_eq(dr.nvme_stale_invalidated, 2);
	t_assert_eq(dr.nvme_invalidate_failures, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, NB);
	r = cu_tenants(d.sock);
	expect(r, UID_A, 0, 0, NB, NB, 2);
	expect(r, UID_B, 0, NB, NB, 0, 0);
	free(r);
	expect_cold(d.sock, NB, 0, 2, 1); /* dropped by the operator */

	/* B's are still there, byte-identical; the open makes them the
	 * policy's, still B's */
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, 2);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, 0, 1, -1);
	r = cu_tenants(d.sock);
	expect(r, UID_B, NB, 0, NB, 0, 0);
	free(r);
	expect_cold(d.sock, 0, NB, 2, 1); /* B's taken in by its open */
	cc_stop(&d);

	start(&d, nvme);
	t_assert_eq(cd_recovered(d.sock), NB); /* B's, warm */
	r = cu_tenants(d.sock);
	expect(r, UID_B, 0, NB, NB, 0, 0);
	t_assert(!has_row(r, UID_A));
	free(r);
	cc_stop(&d);
	printf("stop: A's and B's recovered blocks counted as theirs, A's limit and --uid A took A's 3, B's 3 served\n");
}

/* Rewrite the headers of hashes h[0..n) as kvmmd wrote them before the
 * tenants (zeros there, the header CRC over them): how many. */
static int make_old(const char *nvme, const uint64_t *h, int n)
{
	struct tier_nvme_slot_header hd;
	int done = 0, fd = open(nvme, O_RDWR | O_CLOEXEC);

	t_assert(fd >= 0);
	for (int i = 0; i < NSLOTS; i++) {
		off_t off = NT_SLOT_OFFSET(i, NCA_BLOCK_BYTES);
		bool ours = false;

		t_assert_eq(pread(fd, &hd, sizeof(hd), off),
			    (ssize_t)sizeof(hd));
		for (int k = 0; k < n; k++)
			ours |= hd.hash == h[k];
		if (hd.magic != TIER_NVME_SLOT_MAGIC || !ours)
			continue;
		t_assert(hd.flags & TIER_NVME_HDR_TENANT);
		t_assert_eq(hd.tenant, UID_B);
		hd.tenant = 0;
		hd.flags = 0;
		hd.header_crc = 0;
		hd.header_crc = tier_crc32c(0, &hd, sizeof(hd));
		t_assert_eq(pwrite(fd, &hd, sizeof(hd), off),
			    (ssize_t)sizeof(hd));
		done++;
	}
	t_ok(fsync(fd));
	close(fd);
	return done;
}

static void killed(const char *nvme)
{
	struct kvmm_admin_cache_drop_reply dr;
	struct kvmm_tenants_reply *r;
	struct td_daemon d;
	char cmd[64];

	start(&d, nvme);
	fill(d.sock);
	td_kill(&d);
	td_stop(&d);
	t_assert_eq(make_old(nvme, hb, NB), NB);

	start(&d, nvme);
	t_assert_eq(cd_recovered(d.sock), 2 * NB);
	r = cu_tenants(d.sock);
	expect(r, UID_A, 0, NB, NB, 0, 0);
	t_assert(!has_row(r, UID_B)); /* its headers name nobody */
	free(r);
	/* B's are nobody's in this run: --uid B drops none of them (its
	 * mark covers them at the next start, as before) */
	snprintf(cmd, sizeof(cmd), "--tier gpu --uid %d", UID_B);
	dr = cd_kvmmctl(d.sock, cmd);
	cd_expect(&dr, 0, 0, 0, 0, 0, 0);
	snprintf(cmd, sizeof(cmd), "--tier nvme --uid %d", UID_A);
	dr = cd_kvmmctl(d.sock, cmd);
	cd_expect(&dr, 0, 0, NB, 0, 0, 0);
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, 2);
	cc_stop(&d);
	printf("SIGKILL: A's recovered blocks A's; tenant-less headers nobody's\n");
}

int main(void)
{
	char nvme[256];

	if (geteuid() != 0)
		t_skip("needs root (clients of two other uids)");
	cc_nvme_path(nvme, sizeof(nvme), "cache-tenant-recovered");
	t_nvme_require(nvme);
	for (int b = 0; b < NB; b++) {
		ha[b] = 0xe4a0001 + b;
		hb[b] = 0xe4b0001 + b;
	}
	stopped(nvme);
	unlink(nvme);
	killed(nvme);
	unlink(nvme);
	return 0;
}
