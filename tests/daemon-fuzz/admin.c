// SPDX-License-Identifier: MIT
/*
 * tests/daemon-fuzz: what the parent asks of kvmmd as an admin while the
 * clients run, each on a timer of its own in fz_run_clients(): random
 * tenant limits on the clients' uid (phases 3 and 5), revocations of
 * random blocks of their open sequences (phase 4), and drops of one
 * block size's cached blocks or of every size's (phase 5).  Each
 * request is what kvmmctl sends (tenant-limit, revoke, cache-drop
 * --block-pages N), its answer checked or counted.
 */
#include <unistd.h>

#include "tests/daemon-fuzz/fuzz.h"
#include "tests/lib/admin_revoke.h"

/* ADMIN_SET_TENANT_LIMIT of the clients' uid (0 in a tier: none). */
void fz_set_limit(const struct fz_phase *ph, uint64_t gpu, uint64_t host,
		  uint64_t nvme)
{
	struct kvmm_admin_tenant_limit a = {
		.size = sizeof(a),
		.id = (uint32_t)getuid(),
		.limit_blocks = { gpu, host, nvme },
	};
	struct kvmm_conn *c;

	t_ok(kc_connect_admin(ph->sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_SET_TENANT_LIMIT, &a, sizeof(a), NULL,
			0, NULL));
	kvmm_disconnect(c);
}

/*
 * A random limit for the clients' tenant (their uid; 0 in a tier: none
 * there): blocks move down for it while the clients work, and every
 * invariant of the phase must still hold.
 */
void fz_churn_limit(struct fz_phase *ph, uint64_t *rng)
{
	uint64_t gpu = fz_below(rng, 9), host = fz_below(rng, 7);

	fz_set_limit(ph, gpu, host, fz_below(rng, FZ_NVME_SMALL + 1));
	ph->limit_sets++;
}

/* The clients' tenant's blocks moved for its limits so far. */
uint64_t fz_limit_moves(const struct fz_phase *ph)
{
	struct kvmm_tenants_reply *r = calloc(1, KVMM_MSG_MAX);
	struct kvmm_conn *c;
	uint64_t moves = 0;
	size_t len = 0;

	t_assert(r);
	t_ok(kc_connect_admin(ph->sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_TENANTS, NULL, 0, r, KVMM_MSG_MAX,
			&len));
	kvmm_disconnect(c);
	for (uint32_t i = 0; i < r->nr; i++)
		if (r->tenants[i].id == (uint32_t)getuid())
			moves = r->tenants[i].limit_moves;
	free(r);
	return moves;
}

/*
 * Revoke blocks of one open sequence of the clients (ADMIN_SESSIONS
 * lists them), from a random block on (ADMIN_REVOKE, as kvmmctl revoke
 * sends it; -EAGAIN while it posts a long one in pieces).  The
 * sequence may close or its client end meanwhile, and a block past its
 * length has nothing to take: kvmmd's refusals are counted, not
 * asserted on; the phase asserts that some were taken.
 */
void fz_revoke(struct fz_phase *ph, uint64_t *rng)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_sessions_reply *rep = (void *)buf;
	const struct kvmm_sessions_regions *h;
	uint32_t ids[64][3], n = 0, pick, first;
	struct kvmm_conn *admin;
	const char *p;
	size_t len = 0;
	int err, tries = 0;

	t_ok(kc_connect_admin(ph->sock, &admin));
	t_ok(kc_request(admin, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf,
			sizeof(buf), &len));
	h = (const void *)(buf + sizeof(*rep) + rep->nr * rep->entry_size);
	p = (const char *)(h + 1);
	for (uint32_t i = 0; i < h->nr; i++) {
		const struct kvmm_region_info *e = (const void *)p;
		const uint32_t *seqs = (const void *)(p + h->entry_size);

		for (uint32_t k = 0; k < e->nr_listed && n < 64; k++, n++) {
			ids[n][0] = e->session_id;
			ids[n][1] = e->region_id;
			ids[n][2] = seqs[k];
		}
		p += KVMM_REGION_INFO_STRIDE(h->entry_size, e->nr_listed);
	}
	if (!n)
		goto out;
	pick = fz_below(rng, n);
	first = fz_below(rng, FZ_CHAIN_BLOCKS);
	do
		err = ar_revoke_on(admin, ids[pick][0], ids[pick][1],
				   ids[pick][2], first);
	while (err == -EAGAIN && ++tries < 100);
	if (fz_tracing)
		fprintf(stderr,
			"[%llu parent] revoke session %u region %u seq %u from block %u: %d\n",
			(unsigned long long)cc_now_ms(), ids[pick][0],
			ids[pick][1], ids[pick][2], first, err);
	fz_add(err ? &ph->cnt->revokes_refused : &ph->cnt->revokes, 1);
out:
	kvmm_disconnect(admin);
}

/*
 * Drop the cached blocks of one size (or, one time in 5, of every size)
 * in random tiers, as `kvmmctl cache-drop --block-pages N [--tier ...]`
 * does.  What must hold of the reply: the size asked, one size's part
 * (every size's, the first first, for a drop of all), nothing dropped
 * from a tier not asked, the parts adding up to the totals, the kept
 * blocks' reasons adding up to them.  Blocks in use are kept, so the
 * clients' sequences never lose a block to it.
 */
void fz_churn_drop(struct fz_phase *ph, uint64_t *rng)
{
	bool all = !fz_below(rng, 5);
	int sz = all ? FZ_SIZES : (int)fz_below(rng, FZ_SIZES);
	struct kvmm_admin_cache_drop a = {
		.size = sizeof(a),
		.tiers = fz_below(rng, 8), /* 0: every tier */
		.block_pages = all ? 0 : fz_ppb(sz),
	};
	struct kvmm_admin_cache_drop_reply r;
	struct fz_drop_counts *n = &ph->cnt->size_drops[sz];
	uint64_t dropped[3] = { 0 }, kept[3] = { 0 };
	uint32_t want = all ? FZ_SIZES : 1;
	struct kvmm_conn *c;
	size_t got = 0;

	memset(&r, 0, sizeof(r));
	t_ok(kc_connect_admin(ph->sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_CACHE_DROP, &a, sizeof(a), &r,
			sizeof(r), &got));
	kvmm_disconnect(c);
	if (fz_tracing)
		fprintf(stderr,
			"[%llu parent] cache-drop block_pages %u tiers %#x: dropped %llu/%llu/%llu kept %llu/%llu/%llu\n",
			(unsigned long long)cc_now_ms(), a.block_pages, a.tiers,
			(unsigned long long)r.dropped[0],
			(unsigned long long)r.dropped[1],
			(unsigned long long)r.dropped[2],
			(unsigned long long)r.kept[0],
			(unsigned long long)r.kept[1],
			(unsigned long long)r.kept[2]);
	t_assert_eq(got, sizeof(r));
	if (r.block_pages != a.block_pages || r.nr_sizes != want)
		t_fail("seed %llu phase %d: a cache-drop of block_pages %u answered block_pages %u with %u sizes, expected %u",
		       (unsigned long long)ph->seed, ph->num, a.block_pages,
		       r.block_pages, r.nr_sizes, want);
	for (uint32_t i = 0; i < r.nr_sizes; i++) {
		uint32_t pages = all ? fz_ppb((int)i) : a.block_pages;

		if (r.sizes[i].block_pages != pages)
			t_fail("seed %llu phase %d: a cache-drop of block_pages %u: part %u is of %u pages, expected %u",
			       (unsigned long long)ph->seed, ph->num,
			       a.block_pages, i, r.sizes[i].block_pages, pages);
		for (int t = 0; t < 3; t++) {
			dropped[t] += r.sizes[i].dropped[t];
			kept[t] += r.sizes[i].kept[t];
			ph->cnt->size_drops[pages == fz_ppb(0) ? 0 : 1]
				.part_dropped[t] += r.sizes[i].dropped[t];
		}
	}
	for (int t = 0; t < 3; t++) {
		if (dropped[t] != r.dropped[t] || kept[t] != r.kept[t])
			t_fail("seed %llu phase %d: a cache-drop of block_pages %u: the sizes' parts of tier %s, dropped %llu kept %llu, the totals %llu and %llu",
			       (unsigned long long)ph->seed, ph->num,
			       a.block_pages, fz_tier_names[t],
			       (unsigned long long)dropped[t],
			       (unsigned long long)kept[t],
			       (unsigned long long)r.dropped[t],
			       (unsigned long long)r.kept[t]);
		if (a.tiers && !(a.tiers & (1u << t)) && r.dropped[t])
			t_fail("seed %llu phase %d: a cache-drop of tiers %#x dropped %llu blocks from tier %s",
			       (unsigned long long)ph->seed, ph->num, a.tiers,
			       (unsigned long long)r.dropped[t],
			       fz_tier_names[t]);
		n->dropped[t] += r.dropped[t];
		n->kept[t] += r.kept[t];
	}
	t_assert_eq(r.kept_in_use + r.kept_pinned + r.kept_busy,
		    r.kept[0] + r.kept[1] + r.kept[2]);
	n->drops++;
}
