// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Tenants (ADMIN_TENANTS, `kvmmctl tenants`, the kvmm_tenant_* metrics):
 * real processes of three uids against one kvmmd (lru, 4 GPU blocks, a
 * host tier of 8).  Under --cache-scope uid, A and B publish 3 blocks
 * each under the same hashes: 6 blocks, A's first two demoted to the
 * host tier by B's (lru); A's open of its 3 finds 1 on the GPU and 2 on
 * the host (moving them up and two of B's down), B's open of its first
 * finds it on the host (moving it up and its third down); C, connected
 * meanwhile, has a session and nothing else.  Every count is worked out by hand, the tenants' blocks
 * add up to each tier's, and kvmmctl's text and JSON and the metrics
 * say the same.  Under --cache-scope gid, A and C (one group) are one
 * tenant.  Past 255 tenants the rest share one entry, for kvmmd's counts
 * and the policy's blocks alike.  Needs root; skips otherwise.
 */
#include "tests/cache-uids.h"

#define UID_A 61101
#define UID_B 61102
#define UID_C 61103
#define NB 3
#define TENANT_ROWS 256 /* 255 tenants, then the others (abi.md) */

static const uint64_t hashes[NB] = { 0x7e4a0001, 0x7e4a0002, 0x7e4a0003 };

static const char *const uid_args[] = { "--socket-mode",
					"0666",
					"--cache-scope",
					"uid",
					"--cache-policy",
					"lru",
					"--cache-block-pages",
					"4",
					"--cache-gpu-blocks",
					"4",
					"--host-mem",
					"2M",
					NULL };

static void expect(const struct kvmm_tenant_info *t, uint32_t sessions,
		   uint64_t gpu, uint64_t host, uint64_t admitted,
		   uint64_t opens, uint64_t hit_gpu, uint64_t hit_host,
		   uint64_t published)
{
	printf("tenant %u: %u sessions, cached %llu/%llu/%llu, admitted %llu, opens %llu, hits %llu/%llu/%llu, published %llu\n",
	       t->id, t->sessions, (unsigned long long)t->cached_blocks[0],
	       (unsigned long long)t->cached_blocks[1],
	       (unsigned long long)t->cached_blocks[2],
	       (unsigned long long)t->admitted_blocks,
	       (unsigned long long)t->prefix_opens,
	       (unsigned long long)t->hit_blocks[0],
	       (unsigned long long)t->hit_blocks[1],
	       (unsigned long long)t->hit_blocks[2],
	       (unsigned long long)t->published_blocks);
	t_assert_eq(t->sessions, sessions);
	t_assert_eq(t->cached_blocks[0], gpu);
	t_assert_eq(t->cached_blocks[1], host);
	t_assert_eq(t->cached_blocks[2], 0);
	t_assert_eq(t->admitted_blocks, admitted);
	t_assert_eq(t->prefix_opens, opens);
	t_assert_eq(t->hit_blocks[0], hit_gpu);
	t_assert_eq(t->hit_blocks[1], hit_host);
	t_assert_eq(t->hit_blocks[2], 0);
	t_assert_eq(t->published_blocks, published);
	t_assert_eq(t->dropped_blocks, 0); /* 12 slots: nothing dropped */
}

/* A process of uid that connects and stays until *release is written. */
static pid_t linger_as(const char *sock, uid_t uid, int ready[2],
		       int release[2])
{
	pid_t p;
	char x;

	t_ok(pipe(ready));
	t_ok(pipe(release));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct cc c;

		cu_become(uid, uid);
		cc_connect(&c, sock);
		cc_region(&c); /* a client session, not an admin one */
		t_assert(write(ready[1], "r", 1) == 1);
		t_assert(read(release[0], &x, 1) == 1);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert(read(ready[0], &x, 1) == 1);
	return p;
}

static void uid_scope(void)
{
	struct kvmm_tenants_reply *r;
	struct kvmm_tier_stats_reply ts;
	int ready[2], release[2];
	struct td_daemon d;
	static char out[65536];
	pid_t linger;

	cu_start(&d, uid_args);
	r = cu_tenants(d.sock);
	t_assert_eq(r->nr, 0);
	t_assert_eq(r->kind, KVMM_TENANT_UID);
	free(r);
	cu_publish_as(d.sock, UID_A, UID_A, hashes, NB, 1, NB);
	cu_publish_as(d.sock, UID_B, UID_B, hashes, NB, 2, NB);
	/* lru order, least recent first: gpu {A2 B0 B1 B2}, host {A0 A1} */
	cu_open_as(d.sock, UID_A, UID_A, hashes, NB, NB, 1, -1);
	/* A2 used, then A0 and A1 restored up, pushing B0 and B1 down:
	 * gpu {B2 A2 A0 A1}, host {B0 B1} */
	cu_open_as(d.sock, UID_B, UID_B, hashes, 1, 1, 2, -1);
	/* B0 up, B2 down: gpu {A2 A0 A1 B0}, host {B1 B2} */
	linger = linger_as(d.sock, UID_C, ready, release);
	cc_settled_stats(d.sock, &ts);
	r = cu_tenants(d.sock);
	t_assert_eq(r->nr, 3);
	expect(cu_tenant(r, UID_A), 0, 3, 0, NB, 1, 1, 2, NB);
	expect(cu_tenant(r, UID_B), 0, 1, 2, NB, 1, 0, 1, NB);
	expect(cu_tenant(r, UID_C), 1, 0, 0, 0, 0, 0, 0, 0);
	for (int t = 0; t < 3; t++)
		t_assert_eq(cu_tenant(r, UID_A)->cached_blocks[t] +
				    cu_tenant(r, UID_B)->cached_blocks[t],
			    ts.tiers[t].used_blocks);
	free(r);

	t_assert_eq(td_kvmmctl(d.sock, "tenants", out, sizeof(out)), 0);
	printf("%s", out);
	cu_kvmmctl_has(d.sock, "tenants", "TENANT");
	cu_kvmmctl_has(d.sock, "tenants", "uid %u", UID_A);
	cu_kvmmctl_has(d.sock, "--json tenants",
		       "{\"kind\":\"uid\",\"tenants\":[");
	cu_kvmmctl_has(
		d.sock, "--json tenants",
		"{\"id\":%u,\"sessions\":0,\"cached_blocks\":{\"gpu\":3,\"host\":0,\"nvme\":0},\"admitted_blocks\":3,\"prefix_opens\":1,\"hit_blocks\":{\"gpu\":1,\"host\":2,\"nvme\":0},\"published_blocks\":3,\"dropped_blocks\":0,\"limit_blocks\":{\"gpu\":0,\"host\":0,\"nvme\":0},\"limit_moves\":0,\"quota_pages\":0,\"quota_used_pages\":12,\"quota_cached_pages\":12}",
		UID_A);
	cu_kvmmctl_has(
		d.sock, "metrics",
		"kvmm_tenant_hit_blocks_total{kind=\"uid\",id=\"%u\",tier=\"host\"} 2\n",
		UID_A);
	cu_kvmmctl_has(
		d.sock, "metrics",
		"kvmm_tenant_cached_blocks{kind=\"uid\",id=\"%u\",tier=\"host\"} 2\n",
		UID_B);
	cu_kvmmctl_has(d.sock, "metrics",
		       "kvmm_tenant_sessions{kind=\"uid\",id=\"%u\"} 1\n",
		       UID_C);
	t_assert(write(release[1], "x", 1) == 1);
	t_assert_eq(cc_wait_child(linger), 0);
	cc_stop(&d);
	printf("uid scope: every tenant's blocks and hits as worked out\n");
}

static void gid_scope(void)
{
	const char *args[] = { "--socket-mode", "0666", "--cache-scope", "gid",
			       NULL };
	struct kvmm_tenants_reply *r;
	struct td_daemon d;

	cu_start(&d, args);
	cu_publish_as(d.sock, UID_A, UID_A, hashes, NB, 1, NB);
	/* C in A's group: A's blocks, one tenant */
	cu_open_as(d.sock, UID_C, UID_A, hashes, NB, NB, 1, 0);
	r = cu_tenants(d.sock);
	t_assert_eq(r->kind, KVMM_TENANT_GID);
	t_assert_eq(r->nr, 1);
	expect(cu_tenant(r, UID_A), 0, NB, 0, NB, 1, NB, 0, NB);
	free(r);
	cc_stop(&d);
	printf("gid scope: two uids of one group are one tenant\n");
}

/*
 * Past 255 tenants the rest share one row, the same for what kvmmd
 * counts and for the blocks the policy charges: 255 uids open a prefix
 * that misses (a row each, no block), then a 256th publishes one block:
 * its publish, its block and its admission are all the others'.
 */
static void overflow(void)
{
	const char *args[] = { "--socket-mode", "0666", "--cache-scope", "uid",
			       NULL };
	const struct kvmm_tenant_info *o;
	struct kvmm_tenants_reply *r;
	struct td_daemon d;
	uint64_t miss = 0x7e4a0fff;

	cu_start(&d, args);
	for (uid_t u = 0; u < TENANT_ROWS - 1; u++)
		cu_open_as(d.sock, 62000 + u, 62000 + u, &miss, 1, 0, 0, -1);
	cu_publish_as(d.sock, 63000, 63000, hashes, 1, 1, 1);
	r = cu_tenants(d.sock);
	t_assert_eq(r->nr, TENANT_ROWS);
	for (uint32_t i = 0; i < r->nr; i++)
		t_assert(r->tenants[i].id != 63000);
	o = cu_tenant(r, KVMM_TENANT_OTHERS);
	expect(o, 0, 1, 0, 1, 0, 0, 0, 1);
	expect(cu_tenant(r, 62000), 0, 0, 0, 0, 1, 0, 0, 0);
	free(r);
	cc_stop(&d);
	printf("256 tenants: the last one's publish and block are the others'\n");
}

int main(void)
{
	if (geteuid() != 0)
		t_skip("needs root, to run processes of three uids");
	uid_scope();
	gid_scope();
	overflow();
	return 0;
}
