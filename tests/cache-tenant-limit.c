// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Tenant limits (--tenant-limit, `kvmmctl tenant-limit`,
 * ADMIN_SET_TENANT_LIMIT): real processes of two uids against one kvmmd
 * (lru, 4 GPU blocks, a host tier of 8).  A starts limited to 1 GPU
 * block: of its 3 published blocks the first two go down to the host
 * tier as the next arrive, though the GPU has room; B's 3 then fill the
 * GPU and stay.  B limited at run time to 1 GPU block: its two least
 * recently used go down at once.  Every moved block opens byte-identical
 * (blocks in use may keep a tenant over its limit meanwhile), and B's
 * next block brings it back within.
 * Counts are checked in ADMIN_TENANTS, kvmmctl's text and JSON and the
 * metrics; lifting a limit, refusals (no such tier, bad specs, the
 * others' id, reserved bits, a client that is not an admin), a host
 * limit whose tier did not open (dropped with a warning, the GPU part
 * kept) and bad start options.  Needs root; skips otherwise.
 */
#include "tests/cache-uids.h"

#define UID_A 61201
#define UID_B 61202
#define NB 3

static const uint64_t ha[NB + 1] = { 0x7e5a0001, 0x7e5a0002, 0x7e5a0003,
				     0x7e5a0004 };
static const uint64_t hb[NB + 1] = { 0x7e5b0001, 0x7e5b0002, 0x7e5b0003,
				     0x7e5b0004 };

static const char *const args[] = { "--socket-mode",
				    "0666",
				    "--cache-policy",
				    "lru",
				    "--cache-block-pages",
				    "4",
				    "--cache-gpu-blocks",
				    "4",
				    "--host-mem",
				    "2M",
				    "--tenant-limit",
				    "61201=gpu:1",
				    NULL };

static struct kvmm_tenant_info get(const char *sock, uint32_t id)
{
	struct kvmm_tenants_reply *r = cu_tenants(sock);
	struct kvmm_tenant_info t = *cu_tenant(r, id);

	free(r);
	printf("tenant %u: cached %llu/%llu/%llu, limit %llu/%llu/%llu, %llu moved for it, %llu dropped\n",
	       id, (unsigned long long)t.cached_blocks[0],
	       (unsigned long long)t.cached_blocks[1],
	       (unsigned long long)t.cached_blocks[2],
	       (unsigned long long)t.limit_blocks[0],
	       (unsigned long long)t.limit_blocks[1],
	       (unsigned long long)t.limit_blocks[2],
	       (unsigned long long)t.limit_moves,
	       (unsigned long long)t.dropped_blocks);
	t_assert_eq(t.dropped_blocks, 0); /* 12 slots: nothing dropped */
	return t;
}

static uint64_t get_dropped(const char *sock, uint32_t id)
{
	struct kvmm_tenants_reply *r = cu_tenants(sock);
	uint64_t n = cu_tenant(r, id)->dropped_blocks;

	free(r);
	return n;
}

static void expect(const char *sock, uint32_t id, uint64_t gpu, uint64_t host,
		   uint64_t limit_gpu, uint64_t moves)
{
	struct kvmm_tenant_info t = get(sock, id);

	t_assert_eq(t.cached_blocks[0], gpu);
	t_assert_eq(t.cached_blocks[1], host);
	t_assert_eq(t.limit_blocks[0], limit_gpu);
	t_assert_eq(t.limit_blocks[1], 0);
	t_assert_eq(t.limit_blocks[2], 0);
	t_assert_eq(t.limit_moves, moves);
}

/* ADMIN_SET_TENANT_LIMIT as an admin sends it: its status. */
static int set_raw(const char *sock, uint32_t id, uint64_t gpu,
		   uint64_t reserved)
{
	struct kvmm_admin_tenant_limit a = { .size = sizeof(a),
					     .id = id,
					     .limit_blocks = { gpu },
					     .reserved = { reserved } };
	struct kvmm_conn *c;
	int err;

	t_ok(kc_connect_admin(sock, &c));
	err = kc_request(c, KVMM_CMD_ADMIN_SET_TENANT_LIMIT, &a, sizeof(a),
			 NULL, 0, NULL);
	kvmm_disconnect(c);
	return err;
}

/* The same from a client of uid A: not an admin. */
static void set_as_client(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_admin_tenant_limit a = { .size = sizeof(a),
						     .id = UID_A };
		struct kvmm_conn *c;

		cu_become(UID_A, UID_A);
		t_ok(kc_connect_admin(sock, &c)); /* asks, is not one */
		t_assert_eq(kc_request(c, KVMM_CMD_ADMIN_SET_TENANT_LIMIT, &a,
				       sizeof(a), NULL, 0, NULL),
			    -EPERM);
		kvmm_disconnect(c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

static void limits(void)
{
	struct kvmm_tier_stats_reply ts;
	static char out[65536];
	struct td_daemon d;

	cu_start(&d, args);
	/* A: each new block pushes its least recent down, room or not */
	cu_publish_as(d.sock, UID_A, UID_A, ha, NB, 1, NB);
	expect(d.sock, UID_A, 1, 2, 1, 2);
	/* B unlimited: gpu {A2 B0 B1 B2}, full, nothing moved */
	cu_publish_as(d.sock, UID_B, UID_B, hb, NB, 2, NB);
	expect(d.sock, UID_B, 3, 0, 0, 0);
	expect(d.sock, UID_A, 1, 2, 1, 2);

	/* B limited at run time: B0 and B1 go down at once */
	t_assert_eq(td_kvmmctl(d.sock, "tenant-limit 61202 gpu:1", out,
			       sizeof(out)),
		    0);
	expect(d.sock, UID_B, 1, 2, 1, 2);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2);
	t_assert_eq(ts.tiers[1].used_blocks, 4);

	t_assert_eq(td_kvmmctl(d.sock, "tenants", out, sizeof(out)), 0);
	printf("%s", out);
	cu_kvmmctl_has(d.sock, "tenants",
		       "LIM-MOVED    QUOTA   Q-USED Q-CACHED  LIMIT\n");
	cu_kvmmctl_has(d.sock, "tenants",
		       "         2        -        4        4  gpu:1\n");
	cu_kvmmctl_has(
		d.sock, "--json tenants",
		"{\"id\":%u,\"sessions\":0,\"cached_blocks\":{\"gpu\":1,\"host\":2,\"nvme\":0},\"admitted_blocks\":3,\"prefix_opens\":0,\"hit_blocks\":{\"gpu\":0,\"host\":0,\"nvme\":0},\"published_blocks\":3,\"dropped_blocks\":0,\"limit_blocks\":{\"gpu\":1,\"host\":0,\"nvme\":0},\"limit_moves\":2,\"quota_pages\":0,\"quota_used_pages\":4,\"quota_cached_pages\":4}",
		UID_B);
	cu_kvmmctl_has(
		d.sock, "metrics",
		"kvmm_tenant_limit_blocks{kind=\"uid\",id=\"%u\",tier=\"gpu\"} 1\n",
		UID_A);
	cu_kvmmctl_has(
		d.sock, "metrics",
		"kvmm_tenant_limit_moves_total{kind=\"uid\",id=\"%u\"} 2\n",
		UID_B);

	/* the moved blocks come back exactly; in use, B's stay up */
	cu_open_as(d.sock, UID_B, UID_B, hb, NB, NB, 2, -1);
	cu_open_as(d.sock, UID_A, UID_A, ha, NB, NB, 1, -1);
	cc_settled_stats(d.sock, &ts);
	/* B's next block: back within its limit (nothing is in use) */
	cu_publish_as(d.sock, UID_B, UID_B, hb + NB, 1, 3, 1);
	t_assert_eq(get(d.sock, UID_B).cached_blocks[0], 1);
	t_assert_eq(get(d.sock, UID_B).cached_blocks[1], 3);
	t_assert_eq(get(d.sock, UID_A).cached_blocks[0], 1);

	/* lifted: B's next blocks take the GPU's room again */
	t_assert_eq(td_kvmmctl(d.sock, "tenant-limit 61202 none", out,
			       sizeof(out)),
		    0);
	t_assert_eq(get(d.sock, UID_B).limit_blocks[0], 0);

	/* refusals */
	t_assert_eq(td_kvmmctl(d.sock, "tenant-limit 61202 nvme:3 2>&1", out,
			       sizeof(out)),
		    1);
	t_assert(strstr(out, "no such tier"));
	t_assert_eq(td_kvmmctl(d.sock, "tenant-limit 61202 gpu:0 2>&1", out,
			       sizeof(out)),
		    2);
	t_assert(strstr(out, "is not gpu:N"));
	t_assert_eq(td_kvmmctl(d.sock, "tenant-limit 61202 gpu:1,gpu:2 2>&1",
			       out, sizeof(out)),
		    2);
	t_assert_eq(td_kvmmctl(d.sock, "tenant-limit 61202 disk:1 2>&1", out,
			       sizeof(out)),
		    2);
	t_assert_eq(set_raw(d.sock, KVMM_TENANT_OTHERS, 1, 0), -EINVAL);
	t_assert_eq(set_raw(d.sock, UID_B, 1, 1), -EINVAL);
	set_as_client(d.sock);
	t_assert_eq(get(d.sock, UID_B).limit_blocks[0], 0); /* unchanged */
	cc_stop(&d);
	printf("limits: kept at start and set at run time, blocks intact\n");
}

/*
 * A host tier smaller than one block does not open: a host limit given
 * at start is dropped with a warning when the cache opens, the GPU part
 * holds, and ADMIN_TENANTS shows what applies.
 */
static void tier_not_opened(void)
{
	const char *a[] = { "--socket-mode",
			    "0666",
			    "--cache-block-pages",
			    "4",
			    "--cache-gpu-blocks",
			    "4",
			    "--host-mem",
			    "64K",
			    "--tenant-limit",
			    "61201=gpu:1,host:2",
			    "--log-level",
			    "info",
			    NULL };
	static char log[65536];
	struct td_daemon d;

	cu_start(&d, a);
	/* the GPU has room for 4, A's limit is 1: its first block goes
	 * for its second, and with no host tier it is dropped */
	cu_publish_as(d.sock, UID_A, UID_A, ha, 1, 1, 1);
	cu_publish_as(d.sock, UID_A, UID_A, ha + 1, 1, 1, 1);
	t_assert_eq(get_dropped(d.sock, UID_A), 1);
	cu_kvmmctl_has(d.sock, "--json tenants",
		       "\"limit_blocks\":{\"gpu\":1,\"host\":0,\"nvme\":0}");
	/* the cache is open: a host limit is refused, and makes no entry */
	t_assert_eq(td_kvmmctl(d.sock, "tenant-limit 5000 host:2 2>&1", log,
			       sizeof(log)),
		    1);
	t_assert(strstr(log, "no such tier"));
	t_assert_eq(td_kvmmctl(d.sock, "--json tenants", log, sizeof(log)), 0);
	t_assert(!strstr(log, "\"id\":5000"));
	t_ok(td_stop_log(&d, log, sizeof(log)));
	if (!strstr(log, "no host tier opened"))
		t_fail("no warning about the host limit in:\n%s", log);
	printf("no host tier: its limit dropped with a warning, gpu kept\n");
}

/* kvmmd refuses a bad --tenant-limit at start and names it. */
static void bad_options(void)
{
	static const char *const bad[][2] = {
		{ "61201=gpu:0", "is not gpu:N" },
		{ "61201=gpu", "is not gpu:N" },
		{ "61201=", "is not gpu:N" },
		{ "61201=gpu:1,", "is not gpu:N" },
		{ "gpu:1", "is not ID=" },
		{ "x=gpu:1", "--tenant-limit id" },
		{ "4294967295=gpu:1", "is not a uid or gid" },
		{ "61201=host:2", "no host tier" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *a[] = { "--tenant-limit", bad[i][0], NULL };
		static char log[16384];
		struct td_daemon d;

		if (!td_start(&d, a)) {
			td_stop(&d);
			t_fail("kvmmd started with --tenant-limit %s",
			       bad[i][0]);
		}
		t_assert(td_read_log(&d, log, sizeof(log)) > 0);
		if (!strstr(log, "--tenant-limit") || !strstr(log, bad[i][1]))
			t_fail("--tenant-limit %s: no '%s' in: %s", bad[i][0],
			       bad[i][1], log);
		unlink(d.log);
		unlink(d.sock);
		rmdir(d.dir);
	}
	printf("bad --tenant-limit values refused at start: %zu\n",
	       sizeof(bad) / sizeof(bad[0]));
}

int main(void)
{
	if (geteuid() != 0) {
		printf("SKIP: needs root (clients of other uids)\n");
		return 77;
	}
	limits();
	tier_not_opened();
	bad_options();
	return 0;
}
