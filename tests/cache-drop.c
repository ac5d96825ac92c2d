// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * `kvmmctl cache-drop` (ADMIN_CACHE_DROP) against a real kvmmd (lru, 3
 * GPU blocks, 6 host, 6 NVMe) and real client processes:
 *   - 4 contents of 3 blocks published: content 3 on the GPU, 1 and 2 in
 *     host memory, 0 on NVMe; a client pins content 1's first block;
 *   - `--tier host` drops exactly the 5 other host blocks (the pinned one
 *     kept and counted as pinned); a new client's prefix open of content
 *     2 then misses at once, content 3 still comes from the GPU;
 *   - a client maps content 3 (a live sequence): `--tier gpu` keeps its
 *     3 blocks (in use) and drops nothing; closed, they still hit;
 *   - a drop of every tier takes the GPU's 3 and the NVMe's 3 blocks
 *     (their headers invalidated before the reply), keeps the pinned
 *     one; contents 0 and 3 then miss, content 1 finds its pinned block;
 *   - the counts agree everywhere: TIER_STATS drops and used blocks,
 *     ADMIN_TENANTS (dropped, cached, the quota's cached pages), ADMIN_STATUS
 *     cache_drop_blocks, kvmmctl status and metrics;
 *   - with copies down slowed to 2 s, a drop while content 0's 3 blocks
 *     are on their way to the host tier keeps them (`kept_busy` 3) and
 *     drops content 1's GPU blocks; once the copies are done a second
 *     drop takes them;
 *   - bad input: unknown or repeated tiers, bad uids, unknown options
 *     and extra words (kvmmctl names the word, prints its usage, exit
 *     2), a body too short or too long, unknown bits, reserved words, a
 *     tenant without its flag, the others' id (-EINVAL, -E2BIG); and as
 *     root, a client of another uid gets -EPERM (kvmmctl says who may,
 *     kvmmctl_strerror()'s line as every admin command's, exit 1) and
 *     drops nothing.
 */
#include "tests/cache-drop-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3
#define UID_X 61301

static const struct cc_contents contents = { .base = 0xd7000,
					     .tag0 = 40,
					     .nb = NB };

/* Root's tenant row (this test's processes). */
static struct kvmm_tenant_info root_tenant(const char *sock)
{
	struct kvmm_tenants_reply *r = cu_tenants(sock);
	struct kvmm_tenant_info t = *cu_tenant(r, 0);

	free(r);
	return t;
}

static void expect_used(const char *sock, uint64_t g, uint64_t h, uint64_t n)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(sock, &ts);
	if (ts.tiers[0].used_blocks != g || ts.tiers[1].used_blocks != h ||
	    ts.tiers[2].used_blocks != n)
		t_fail("used %llu/%llu/%llu, expected %llu/%llu/%llu",
		       (unsigned long long)ts.tiers[0].used_blocks,
		       (unsigned long long)ts.tiers[1].used_blocks,
		       (unsigned long long)ts.tiers[2].used_blocks,
		       (unsigned long long)g, (unsigned long long)h,
		       (unsigned long long)n);
}

/* ADMIN_STATUS cache_drop_blocks. */
static uint64_t dropped_total(const char *sock)
{
	struct kvmm_status_reply st;
	struct kvmm_conn *c;

	t_ok(kc_connect_admin(sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st),
			NULL));
	kvmm_disconnect(c);
	t_assert_eq(st.size, sizeof(st));
	return st.cache_drop_blocks;
}

/* A client of uid UID_X (not an admin) asks for a drop: -EPERM, and
 * kvmmctl run as that uid says so. */
static void not_admin(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
		struct kvmm_admin_cache_drop_reply r;
		static char out[4096], want[256];

		cu_become(UID_X, UID_X);
		t_assert_eq(cd_raw(sock, &a, sizeof(a), &r), -EPERM);
		t_assert_eq(td_kvmmctl(sock, "cache-drop 2>&1", out,
				       sizeof(out)),
			    1);
		/* kvmmctl_strerror()'s line, as every admin command's */
		snprintf(
			want, sizeof(want),
			"kvmmctl: cache-drop: Operation not permitted: admin commands need uid 0 or kvmmd's own; this is uid %d\n",
			UID_X);
		if (strcmp(out, want))
			t_fail("kvmmctl as uid %d: %s", UID_X, out);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

static void bad_input(const char *sock)
{
	static const char *const usage_errors[] = {
		"cache-drop --tier disk",      "cache-drop --tier gpu,gpu",
		"cache-drop --tier gpu,",      "cache-drop --tier",
		"cache-drop --uid x",	       "cache-drop --uid -1",
		"cache-drop --uid 4294967295", "cache-drop --uid 5000000000",
		"cache-drop --uid 1 --uid 2",  "cache-drop host",
	};
	static const struct {
		const char *args, *says;
	} named[] = {
		{ "--tier disk", "--tier 'disk': unknown tier 'disk'" },
		{ "--tier gpux", "--tier 'gpux': unknown tier 'gpux'" },
		{ "--tier host,gpux",
		  "--tier 'host,gpux': unknown tier 'gpux'" },
		{ "--tier gpu,gpu", "--tier 'gpu,gpu': tier gpu named twice" },
		{ "--uid abc", "--uid 'abc': not a uid or gid" },
		{ "--uid x", "--uid 'x': not a uid or gid" },
		{ "--uid 4294967295", "--uid '4294967295': not a uid or gid" },
		{ "--uid 1 --uid 2", "cache-drop: --uid given twice" },
		{ "--tier", "cache-drop: --tier needs a value" },
		{ "--bogus", "cache-drop: unknown option '--bogus'" },
		{ "--tier host --bogus",
		  "cache-drop: unknown option '--bogus'" },
		{ "host", "cache-drop: unexpected argument 'host'" },
	};
	struct kvmm_admin_cache_drop a = { .size = sizeof(a) };
	struct kvmm_admin_cache_drop_reply r;
	char big[sizeof(a) + 8] = { 0 };
	static char out[4096];
	uint64_t before;

	for (size_t i = 0; i < sizeof(usage_errors) / sizeof(usage_errors[0]);
	     i++) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "%s 2>&1", usage_errors[i]);
		if (td_kvmmctl(sock, cmd, out, sizeof(out)) != 2)
			t_fail("kvmmctl %s: not a usage error: %s",
			       usage_errors[i], out);
	}
	/* the word at fault is named, then the usage */
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "cache-drop %s 2>&1", named[i].args);
		if (td_kvmmctl(sock, cmd, out, sizeof(out)) != 2 ||
		    !strstr(out, named[i].says) ||
		    !strstr(out,
			    "\nusage: kvmmctl cache-drop [--tier gpu|host|nvme[,...]] [--uid ID] [--block-pages N] [--json]\n"))
			t_fail("kvmmctl %s: no '%s' and usage in: %s", cmd,
			       named[i].says, out);
	}

	/* the wire: sizes, bits, words */
	t_assert_eq(cd_raw(sock, &a, 8, &r), -EINVAL);
	t_assert_eq(cd_raw(sock, &a, 0, &r), -EINVAL);
	memcpy(big, &a, sizeof(a));
	((struct kvmm_admin_cache_drop *)big)->size = sizeof(big);
	big[sizeof(a)] = 1;
	t_assert_eq(cd_raw(sock, big, sizeof(big), &r), -E2BIG);
	a.tiers = 0x8;
	t_assert_eq(cd_raw(sock, &a, sizeof(a), &r), -EINVAL);
	a.tiers = 0;
	a.flags = 0x2;
	t_assert_eq(cd_raw(sock, &a, sizeof(a), &r), -EINVAL);
	a.flags = 0;
	a.tenant = 5;
	t_assert_eq(cd_raw(sock, &a, sizeof(a), &r), -EINVAL);
	a.flags = KVMM_CACHE_DROP_F_TENANT;
	a.tenant = KVMM_TENANT_OTHERS;
	t_assert_eq(cd_raw(sock, &a, sizeof(a), &r), -EINVAL);
	a.tenant = 0;
	a.flags = 0;
	a.reserved[0] = 1;
	t_assert_eq(cd_raw(sock, &a, sizeof(a), &r), -EINVAL);
	a.reserved[0] = 0;
	a.pad = 1; /* ABI 1.22: the word after block_pages */
	t_assert_eq(cd_raw(sock, &a, sizeof(a), &r), -EINVAL);
	a.pad = 0;
	a.block_pages = 3; /* no cache of blocks of 3 pages */
	t_assert_eq(cd_raw(sock, &a, sizeof(a), &r), -ENOENT);
	a.block_pages = 0;

	before = dropped_total(sock);
	if (geteuid() == 0)
		not_admin(sock);
	else
		printf("not root: the -EPERM check (a client of another uid) is left out\n");
	t_assert_eq(dropped_total(sock), before); /* nothing was dropped */
	printf("bad input refused\n");
}

/* Blocks with a copy in flight are kept (kept_busy). */
static void busy(void)
{
	const char *args[] = { "--cache-policy",
			       "lru",
			       "--cache-block-pages",
			       "4",
			       "--cache-gpu-blocks",
			       "3",
			       "--host-mem",
			       "2M",
			       NULL };
	struct kvmm_admin_cache_drop_reply r;
	struct td_daemon d;

	cc_start_with_delay(&d, args, "KVMMD_TEST_DEMOTE_DELAY_MS", 2000);
	cc_write_content(d.sock, &contents, 0);
	/* content 1 sends content 0 down: 2 s per batch of copies */
	cc_write_content(d.sock, &contents, 1);
	r = cd_kvmmctl(d.sock, "");
	cd_expect(&r, NB, 0, 0, 0, NB, 0);
	t_assert_eq(r.kept_busy, NB);
	expect_used(d.sock, 0, NB, 0); /* the copies ended */
	r = cd_kvmmctl(d.sock, "--tier host");
	cd_expect(&r, 0, NB, 0, 0, 0, 0);
	expect_used(d.sock, 0, 0, 0);
	cc_stop(&d);
	printf("blocks with a copy in flight kept\n");
}

int main(void)
{
	struct kvmm_admin_cache_drop_reply r;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_prefix_open_reply pr;
	struct kvmm_tenant_info t;
	struct kvmm_status_reply st;
	struct kvmm_pin_opts po;
	static char out[65536];
	struct nca_args a;
	uint32_t ids[NB * CC_PPB];
	struct kvmm_conn *pin;
	struct td_daemon d;
	char nvme[256];
	uint64_t h[NB];
	struct cc hold;

	cc_nvme_path(nvme, sizeof(nvme), "cache-drop");
	t_nvme_require(nvme);
	cu_start(&d, nca_args(&a, nvme, 3, NCA_ANY_UID));

	for (int k = 0; k < 4; k++)
		cc_write_content(d.sock, &contents, k);
	expect_used(d.sock, 3, 6, 3);

	/* content 1's first block pinned by a client that stays */
	pin = cc_connect_lib(d.sock, "pinner");
	cc_content_hashes(&contents, 1, h);
	t_ok(cc_pin(pin, h[0], 0, 0, 0, &po));

	/* the host tier: 5 go, the pinned one stays */
	r = cd_kvmmctl(d.sock, "--tier host");
	cd_expect(&r, 0, 5, 0, 0, 1, 0);
	t_assert_eq(r.kept_pinned, 1);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	expect_used(d.sock, 3, 1, 3);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].drops, 5);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[2].drops, 0);
	t = root_tenant(d.sock);
	t_assert_eq(t.dropped_blocks, 5);
	t_assert_eq(t.cached_blocks[0], 3);
	t_assert_eq(t.cached_blocks[1], 1);
	t_assert_eq(t.cached_blocks[2], 3);
	/* a new client: content 2 is gone, content 3 still on the GPU */
	cd_open_expect(d.sock, &contents, 2, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 3, NB, NB, 0, 0);

	/* a live sequence maps content 3: the GPU drop keeps all of it */
	cc_content_hashes(&contents, 3, h);
	cc_connect(&hold, d.sock);
	cc_region(&hold);
	cc_prefix(&hold, h, NB, &pr, ids);
	t_assert_eq(pr.nr_blocks, NB);
	r = cd_kvmmctl(d.sock, "--tier gpu");
	cd_expect(&r, 0, 0, 0, NB, 0, 0);
	t_assert_eq(r.kept_in_use, NB);
	cc_check(&hold, ids, NB, contents.tag0 + 3);
	cc_seq_close(&hold, pr.seq_id, ids, NB * CC_PPB);
	cc_disconnect(&hold);
	cd_open_expect(d.sock, &contents, 3, NB, NB, 0, 0);
	t = root_tenant(d.sock);
	t_assert_eq(t.quota_cached_pages, NB * CC_PPB);

	/* everything: the GPU's and the NVMe's, not the pinned block */
	r = cd_kvmmctl(d.sock, "--tier gpu,nvme,host");
	cd_expect(&r, NB, 0, NB, 0, 1, 0);
	t_assert_eq(r.kept_pinned, 1);
	t_assert_eq(r.nvme_invalidate_failures, 0);
	expect_used(d.sock, 0, 1, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].drops, NB);
	t_assert_eq(ts.tiers[1].drops, 5);
	t_assert_eq(ts.tiers[2].drops, NB);
	t = root_tenant(d.sock);
	t_assert_eq(t.dropped_blocks, 5 + 2 * NB);
	t_assert_eq(t.cached_blocks[0] + t.cached_blocks[2], 0);
	t_assert_eq(t.cached_blocks[1], 1);
	t_assert_eq(t.admitted_blocks - t.dropped_blocks, 1);
	t_assert_eq(t.quota_cached_pages, 0); /* the GPU copies' pages */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.cache_drop_blocks, 5 + 2 * NB);
	t_assert_eq(st.pages_allocated, 0); /* every GPU page back */
	cu_kvmmctl_has(d.sock, "metrics", "\nkvmm_cache_drop_blocks_total %d\n",
		       5 + 2 * NB);
	cu_kvmmctl_has(d.sock, "--json status", "\"cache_drop_blocks\":%d",
		       5 + 2 * NB);
	cu_kvmmctl_has(d.sock, "status",
		       "cache drops  %d blocks dropped by kvmmctl cache-drop\n",
		       5 + 2 * NB);
	t_assert_eq(td_kvmmctl(d.sock, "cache-drop --tier nvme", out,
			       sizeof(out)),
		    0);
	t_assert(strstr(out, "dropped      gpu 0, host 0, nvme 0 blocks\n"));
	/* what a new client finds */
	cd_open_expect(d.sock, &contents, 0, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 3, 0, 0, 0, 0);
	cd_open_expect(d.sock, &contents, 1, 1, 0, 1, 0);

	bad_input(d.sock);
	kvmm_disconnect(pin);
	cc_stop(&d);
	unlink(nvme);
	busy();
	printf("cache-drop: tiers dropped as asked, blocks in use kept\n");
	return 0;
}
