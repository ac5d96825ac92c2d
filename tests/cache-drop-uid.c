// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * `kvmmctl cache-drop --uid ID` drops only that tenant's blocks: client
 * processes of two uids against one kvmmd (lru, 4 GPU blocks, a host
 * tier of 6).  A publishes 2 blocks, B 2, A 2 more (A's first two go
 * down to the host tier).  `--uid A` drops A's 4, in both tiers, and
 * nothing of B's; ADMIN_TENANTS then says A holds none and dropped 4, B
 * holds its 2 and dropped none; A's blocks miss for a new client of A,
 * B's still hit for B.  `--uid B --tier host` drops nothing (B has no
 * host block), a uid the cache never saw drops nothing.  Needs root
 * (clients of other uids); skips otherwise.
 */
#include "tests/cache-drop-common.h"

#define UID_A 61311
#define UID_B 61312

static const uint64_t ha[4] = { 0xd0a0001, 0xd0a0002, 0xd0a0003, 0xd0a0004 };
static const uint64_t hb[2] = { 0xd0b0001, 0xd0b0002 };

static struct kvmm_tenant_info get(const char *sock, uint32_t id)
{
	struct kvmm_tenants_reply *r = cu_tenants(sock);
	struct kvmm_tenant_info t = *cu_tenant(r, id);

	free(r);
	printf("tenant %u: cached %llu/%llu/%llu, dropped %llu\n", id,
	       (unsigned long long)t.cached_blocks[0],
	       (unsigned long long)t.cached_blocks[1],
	       (unsigned long long)t.cached_blocks[2],
	       (unsigned long long)t.dropped_blocks);
	return t;
}

static void expect(const char *sock, uint32_t id, uint64_t gpu, uint64_t host,
		   uint64_t dropped)
{
	struct kvmm_tenant_info t = get(sock, id);

	t_assert_eq(t.cached_blocks[0], gpu);
	t_assert_eq(t.cached_blocks[1], host);
	t_assert_eq(t.cached_blocks[2], 0);
	t_assert_eq(t.dropped_blocks, dropped);
}

int main(void)
{
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
					    NULL };
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply ts;
	char cmd[64];
	struct td_daemon d;

	if (geteuid() != 0) {
		printf("SKIP: needs root (clients of other uids)\n");
		return 77;
	}
	cu_start(&d, args);
	cu_publish_as(d.sock, UID_A, UID_A, ha, 2, 1, 2);
	cu_publish_as(d.sock, UID_B, UID_B, hb, 2, 2, 2);
	/* A's next two push its first two down (LRU), onto the host */
	cu_publish_as(d.sock, UID_A, UID_A, ha, 4, 1, 2);
	cc_settled_stats(d.sock, &ts);
	expect(d.sock, UID_A, 2, 2, 0);
	expect(d.sock, UID_B, 2, 0, 0);

	snprintf(cmd, sizeof(cmd), "--uid %d", UID_A);
	r = cd_kvmmctl(d.sock, cmd);
	cd_expect(&r, 2, 2, 0, 0, 0, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2);
	t_assert_eq(ts.tiers[1].used_blocks, 0);
	expect(d.sock, UID_A, 0, 0, 4);
	expect(d.sock, UID_B, 2, 0, 0);
	cu_kvmmctl_has(
		d.sock, "--json tenants",
		"{\"id\":%u,\"sessions\":0,\"cached_blocks\":{\"gpu\":0,\"host\":0,\"nvme\":0},\"admitted_blocks\":4,\"prefix_opens\":0,\"hit_blocks\":{\"gpu\":0,\"host\":0,\"nvme\":0},\"published_blocks\":4,\"dropped_blocks\":4,",
		UID_A);
	/* A's are gone for A; B's are there for B */
	cu_open_as(d.sock, UID_A, UID_A, ha, 4, 0, 1, -1);
	cu_open_as(d.sock, UID_B, UID_B, hb, 2, 2, 2, -1);

	/* B has nothing on the host tier; nobody's blocks are 12345's */
	snprintf(cmd, sizeof(cmd), "--uid %d --tier host", UID_B);
	r = cd_kvmmctl(d.sock, cmd);
	cd_expect(&r, 0, 0, 0, 0, 0, 0);
	r = cd_kvmmctl(d.sock, "--uid 12345");
	cd_expect(&r, 0, 0, 0, 0, 0, 0);
	expect(d.sock, UID_B, 2, 0, 0);

	/* and B's own drop takes its two */
	snprintf(cmd, sizeof(cmd), "--tier gpu --uid %d", UID_B);
	r = cd_kvmmctl(d.sock, cmd);
	cd_expect(&r, 2, 0, 0, 0, 0, 0);
	expect(d.sock, UID_B, 0, 0, 2);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 0);
	cc_stop(&d);
	printf("cache-drop --uid: one tenant's blocks, the other's kept\n");
	return 0;
}
