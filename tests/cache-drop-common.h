/* SPDX-License-Identifier: MIT */
/*
 * What the cache-drop tests share: ADMIN_CACHE_DROP as an admin sends it,
 * `kvmmctl --json cache-drop` read back into the reply struct, a
 * prefix open that says which tiers its blocks came from, and the NVMe
 * tests' fill and restart count.
 */
#ifndef KVMM_TESTS_CACHE_DROP_COMMON_H
#define KVMM_TESTS_CACHE_DROP_COMMON_H

#include "tests/cache-uids.h"

/* ADMIN_CACHE_DROP of a (len bytes of it) over a new admin session: its
 * status, the reply in *r. */
static inline int cd_raw(const char *sock, const void *a, size_t len,
			 struct kvmm_admin_cache_drop_reply *r)
{
	struct kvmm_conn *c;
	size_t got = 0;
	int err;

	memset(r, 0, sizeof(*r));
	t_ok(kc_connect_admin(sock, &c));
	err = kc_request(c, KVMM_CMD_ADMIN_CACHE_DROP, a, len, r, sizeof(*r),
			 &got);
	kvmm_disconnect(c);
	if (!err) {
		t_assert_eq(got, sizeof(*r));
		t_assert_eq(r->size, sizeof(*r));
	}
	return err;
}

/* The number after "key": in json (the first one), or the test fails. */
static inline uint64_t cd_json_u64(const char *json, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	p = strstr(json, k);
	if (!p)
		t_fail("no %s in %s", k, json);
	return strtoull(p + strlen(k), NULL, 10);
}

/* `kvmmctl --json cache-drop ARGS`, which must succeed, as the reply
 * (each size's part in sizes[] too). */
static inline struct kvmm_admin_cache_drop_reply cd_kvmmctl(const char *sock,
							    const char *args)
{
	static const char *const tier[3] = { "gpu", "host", "nvme" };
	struct kvmm_admin_cache_drop_reply r = { .size = sizeof(r) };
	static char out[4096];
	char cmd[256];
	const char *p;

	snprintf(cmd, sizeof(cmd), "--json cache-drop %s", args);
	t_assert_eq(td_kvmmctl(sock, cmd, out, sizeof(out)), 0);
	printf("cache-drop %s: %s", args, out);
	p = strstr(out, "\"dropped\":{");
	t_assert(p);
	for (int t = 0; t < 3; t++)
		r.dropped[t] = cd_json_u64(p, tier[t]);
	p = strstr(out, "\"kept\":{");
	t_assert(p);
	for (int t = 0; t < 3; t++)
		r.kept[t] = cd_json_u64(p, tier[t]);
	r.kept_in_use = cd_json_u64(out, "kept_in_use");
	r.kept_pinned = cd_json_u64(out, "kept_pinned");
	r.kept_busy = cd_json_u64(out, "kept_busy");
	r.nvme_invalidate_failures =
		cd_json_u64(out, "nvme_invalidate_failures");
	r.nvme_stale_invalidated = cd_json_u64(out, "nvme_stale_invalidated");
	/* ABI 1.23: the kept NVMe blocks' restamps (always printed) */
	r.nvme_restamped = cd_json_u64(out, "nvme_restamped");
	r.nvme_restamp_failures = cd_json_u64(out, "nvme_restamp_failures");
	r.nvme_restamp_gone = cd_json_u64(out, "nvme_restamp_gone");
	/* ABI 1.22: the size asked (the first "block_pages", before the
	 * list) and each size's part, {"block_pages":N,"dropped":{..},
	 * "kept":{..}} in "sizes":[...] */
	r.block_pages = strstr(out, "\"block_pages\":") ?
				(uint32_t)cd_json_u64(out, "block_pages") :
				0;
	p = strstr(out, "\"sizes\":[");
	/* none from a kvmmd before 1.22: nr_sizes 0, as its reply's */
	while (p && (p = strstr(p, "{\"block_pages\":")) != NULL) {
		struct kvmm_cache_drop_size *z = &r.sizes[r.nr_sizes++];
		const char *q;

		t_assert(r.nr_sizes <= KVMM_TIER_STATS_SIZES);
		z->block_pages = (uint32_t)cd_json_u64(p, "block_pages");
		q = strstr(p, "\"dropped\":{");
		t_assert(q);
		for (int t = 0; t < 3; t++)
			z->dropped[t] = cd_json_u64(q, tier[t]);
		q = strstr(p, "\"kept\":{");
		t_assert(q);
		for (int t = 0; t < 3; t++)
			z->kept[t] = cd_json_u64(q, tier[t]);
		p++;
	}
	return r;
}

/* r says dropped gpu/host/nvme and kept gpu/host/nvme as given. */
static inline void cd_expect(const struct kvmm_admin_cache_drop_reply *r,
			     uint64_t dg, uint64_t dh, uint64_t dn, uint64_t kg,
			     uint64_t kh, uint64_t kn)
{
	if (r->dropped[0] != dg || r->dropped[1] != dh || r->dropped[2] != dn ||
	    r->kept[0] != kg || r->kept[1] != kh || r->kept[2] != kn)
		t_fail("dropped %llu/%llu/%llu kept %llu/%llu/%llu, expected dropped %llu/%llu/%llu kept %llu/%llu/%llu",
		       (unsigned long long)r->dropped[0],
		       (unsigned long long)r->dropped[1],
		       (unsigned long long)r->dropped[2],
		       (unsigned long long)r->kept[0],
		       (unsigned long long)r->kept[1],
		       (unsigned long long)r->kept[2], (unsigned long long)dg,
		       (unsigned long long)dh, (unsigned long long)dn,
		       (unsigned long long)kg, (unsigned long long)kh,
		       (unsigned long long)kn);
	t_assert_eq(r->kept_in_use + r->kept_pinned + r->kept_busy,
		    kg + kh + kn);
}

/*
 * A new client's prefix open of content k (in this process): how many
 * blocks it found, from[] where they came from; their bytes are checked
 * and the sequence closed.
 */
static inline uint32_t cd_open(const char *sock, const struct cc_contents *cs,
			       int k, uint32_t from[3])
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[64 * CC_PPB];
	uint64_t h[64];
	struct cc c;

	cc_content_hashes(cs, k, h);
	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, h, cs->nb, &rep, ids);
	from[0] = rep.from_gpu;
	from[1] = rep.from_host;
	from[2] = rep.from_nvme;
	if (rep.nr_blocks)
		cc_check(&c, ids, rep.nr_blocks, cs->tag0 + k);
	cc_seq_close(&c, rep.seq_id, ids, rep.nr_blocks * CC_PPB);
	cc_disconnect(&c);
	return rep.nr_blocks;
}

/* cd_open() must find nb blocks, from gpu, host and nvme as given. */
static inline void cd_open_expect(const char *sock,
				  const struct cc_contents *cs, int k,
				  uint32_t nb, uint32_t g, uint32_t h,
				  uint32_t n)
{
	uint32_t from[3], got = cd_open(sock, cs, k, from);

	if (got != nb || from[0] != g || from[1] != h || from[2] != n)
		t_fail("content %d: %u blocks (gpu %u host %u nvme %u), expected %u (%u %u %u)",
		       k, got, from[0], from[1], from[2], nb, g, h, n);
}

/*
 * Contents 0-4 of cs published to a kvmmd with tests/lib/nvme_cache_args.h's
 * tiers and 3 GPU blocks (cs->nb == 3): 0 and 1 end on NVMe, the GPU
 * holds one content and the host two.
 */
static inline void cd_fill_to_nvme(const char *sock,
				   const struct cc_contents *cs)
{
	struct kvmm_tier_stats_reply ts;

	for (int k = 0; k < 5; k++)
		cc_write_content(sock, cs, k);
	cc_settled_stats(sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, cs->nb);
	t_assert_eq(ts.tiers[1].used_blocks, 2 * cs->nb);
	t_assert_eq(ts.tiers[2].used_blocks, 2 * cs->nb);
}

/* The blocks kvmmd recovered from its NVMe tier file at start. */
static inline uint64_t cd_recovered(const char *sock)
{
	struct kvmm_tier_stats_reply ts;

	cc_settled_stats(sock, &ts);
	return ts.recovered_blocks;
}

/*
 * After cd_fill_to_nvme() and a publish that sends content 2 down: wait
 * (10 s at most) until TIER_STATS says content 2's nb host -> NVMe writes
 * are in flight, each with its slot (3 x nb blocks moved down to NVMe
 * since the start), and nothing else is (the copies to the host landed,
 * or wait for a host slot those writes hold).  A drop sent before could
 * find only some of them queued (the others waiting for a slot an
 * eviction frees) and keep or leave that many.
 */
static inline void cd_wait_writes_held(const char *sock, uint32_t nb)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *c;
	int i;

	t_ok(kc_connect_admin(sock, &c));
	for (i = 0; i < 1000; i++) {
		t_ok(kc_request(c, KVMM_CMD_TIER_STATS, NULL, 0, &ts,
				sizeof(ts), NULL));
		if (ts.tiers[2].demotions_in == 3 * nb &&
		    ts.migrations_in_flight == nb)
			break;
		usleep(10000);
	}
	kvmm_disconnect(c);
	if (i == 1000)
		t_fail("content 2's writes not in flight alone: %llu in flight, %llu moved down to NVMe",
		       (unsigned long long)ts.migrations_in_flight,
		       (unsigned long long)ts.tiers[2].demotions_in);
}

#endif
