// SPDX-License-Identifier: MIT
/*
 * tests/daemon-crash-fuzz's processes.  A client loops: a chain and a
 * length drawn from its PRNG, a prefix open of the chain's hashes (the
 * blocks found checked word for word against the hash's content), the
 * sequence extended to the length, the missing blocks written and
 * published, the sequence held a few ms at times, then closed.  The
 * operator sends ADMIN_CACHE_DROP every 30-300 ms, of every tier, some
 * tiers or the clients' tenant (or another one), with several sizes of
 * every size or one (--block-pages), over the admin call or through
 * `kvmmctl cache-drop`, and records each one kvmmd answered with the
 * time it was sent.  With several block sizes a client has a connection
 * and a region of each and draws the size of each step.  Both are SIGSTOPped before kvmmd is killed, so
 * neither ever sees the daemon go: any error they meet is one of a live
 * kvmmd, and fails the test.
 */
#include <signal.h>
#include <sys/wait.h>

#include "tests/cache-drop-common.h"
#include "tests/daemon-crash-fuzz/crash.h"

static void client_bad(struct cf_shared *sh, uint64_t hash, uint32_t p, int w,
		       const char *where)
{
	if (__atomic_fetch_add(&sh->bad, 1, __ATOMIC_SEQ_CST) == 0)
		snprintf(sh->bad_msg, sizeof(sh->bad_msg),
			 "hash %#llx page %u word %d: not its bytes (%s)",
			 (unsigned long long)hash, p, w, where);
}

/* *v = max(*v, x), whoever else writes it meanwhile. */
static void atomic_max(uint64_t *v, uint64_t x)
{
	uint64_t cur = __atomic_load_n(v, __ATOMIC_SEQ_CST);

	while (cur < x &&
	       !__atomic_compare_exchange_n(v, &cur, x, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST))
		;
}

/* Publish blocks [first, len) of size s's chain k, their hashes'
 * records kept pending until the answer is read. */
static void client_publish(struct cc *c, struct cf_shared *sh, uint32_t seq,
			   uint32_t s, uint32_t k, uint32_t first, uint32_t len,
			   const uint64_t *h)
{
	struct kvmm_block_publish_reply rep;
	int r;

	for (uint32_t b = first; b < len; b++)
		__atomic_add_fetch(&sh->h[cf_index(s, k, b)].pending, 1,
				   __ATOMIC_SEQ_CST);
	r = cc_publish(c, seq, first, h + first, len - first, &rep);
	for (uint32_t b = first; b < len; b++) {
		struct cf_hash_rec *rec = &sh->h[cf_index(s, k, b)];
		uint64_t now = cf_now_us();

		atomic_max(&rec->last_end_us, now);
		if (!r)
			__atomic_add_fetch(&rec->published, 1,
					   __ATOMIC_SEQ_CST);
		__atomic_sub_fetch(&rec->pending, 1, __ATOMIC_SEQ_CST);
	}
	if (r)
		t_fail("publish of size %u's chain %u blocks %u-%u: %d",
		       cf_ppb(sh, s), k, first, len - 1, r);
	__atomic_add_fetch(&sh->publishes, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sh->blocks_published, rep.published,
			   __ATOMIC_RELAXED);
}

/* One open, extend, publish and close of one of client num's chains in
 * the round's window (CF_ROUND_CHAINS from chain 6 x round on), len
 * blocks, of a size drawn when there are several (cs[s]: that size's
 * connection and region). */
static void client_step(struct cc *cs, struct cf_shared *sh, uint32_t round,
			int num, uint64_t *rs)
{
	static uint32_t ids[CF_CHAIN_BLOCKS * CF_PPB_MAX];
	uint32_t s = sh->nsizes > 1 ? (uint32_t)(cf_rand(rs) % sh->nsizes) : 0;
	uint32_t j = (uint32_t)(cf_rand(rs) % (CF_ROUND_CHAINS / CF_CLIENTS));
	uint32_t k = (round * 6 + j * CF_CLIENTS + (uint32_t)num) % CF_CHAINS;
	uint32_t len = 1 + (uint32_t)(cf_rand(rs) % CF_CHAIN_BLOCKS);
	uint32_t ppb = cf_ppb(sh, s);
	struct kvmm_prefix_open_reply rep;
	uint64_t h[CF_CHAIN_BLOCKS], key[CF_CHAIN_BLOCKS];
	struct cc *c = &cs[s];
	uint32_t found;
	int r;

	for (uint32_t b = 0; b < len; b++) {
		struct cf_hash_rec *rec = &sh->h[cf_index(s, k, b)];

		h[b] = cf_hash(cf_index(s, k, b));
		key[b] = cf_key(cf_index(s, k, b), ppb);
		__atomic_add_fetch(&rec->holders, 1, __ATOMIC_SEQ_CST);
		atomic_max(&rec->last_acquire_us, cf_now_us());
	}
	cc_prefix(c, h, len, &rep, ids);
	found = rep.nr_blocks;
	t_assert(found <= len);
	t_assert_eq(rep.pages_per_block, ppb);
	for (uint32_t b = 0; b < found; b++) {
		for (uint32_t p = 0; p < ppb; p++) {
			int w = cf_first_bad(c->map[ids[b * ppb + p]], key[b],
					     p);

			if (w >= 0) {
				client_bad(sh, h[b], p, w, "a client's open");
				_exit(1);
			}
		}
	}
	__atomic_add_fetch(&sh->opens, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sh->blocks_checked, found, __ATOMIC_RELAXED);
	if (found < len) {
		r = cc_try_extend(c, rep.seq_id, len * CC_TPB, ids);
		if (r)
			t_fail("extend of size %u's chain %u to %u blocks: %d",
			       ppb, k, len, r);
		for (uint32_t b = found; b < len; b++)
			for (uint32_t p = 0; p < ppb; p++)
				cf_fill(c->map[ids[b * ppb + p]], key[b], p);
		client_publish(c, sh, rep.seq_id, s, k, found, len, h);
	}
	/* sometimes hold the blocks a while: a drop then keeps them */
	if (cf_rand(rs) % 4 == 0)
		usleep((useconds_t)(cf_rand(rs) % 20000));
	cc_seq_close(c, rep.seq_id, ids, len * ppb);
	for (uint32_t b = 0; b < len; b++)
		__atomic_sub_fetch(&sh->h[cf_index(s, k, b)].holders, 1,
				   __ATOMIC_SEQ_CST);
}

pid_t cf_client_start(const struct cf_proc *p, int num)
{
	pid_t pid = cf_fork();

	t_assert(pid >= 0);
	if (pid == 0) {
		uint64_t rs =
			p->seed * 1000003 + p->round * 101 + (uint64_t)num;
		static struct cc c[CF_SIZES_MAX];

		if (p->sh->uids)
			cu_become(CF_UID_BASE + (uid_t)num,
				  CF_UID_BASE + (gid_t)num);
		for (uint32_t s = 0; s < p->sh->nsizes; s++) {
			cc_connect(&c[s], p->sock);
			cc_region_sized(&c[s], p->sh->layers[s], 16, 16);
		}
		for (;;)
			client_step(c, p->sh, p->round, num, &rs);
	}
	return pid;
}

/* The drop kinds the operator draws from; the first two cover every
 * block the clients published before them. */
enum cf_drop_kind {
	CF_DROP_ALL,
	CF_DROP_OWN_TENANT,
	CF_DROP_NVME,
	CF_DROP_GPU,
	CF_DROP_HOST,
	CF_DROP_OTHER_TENANT,
	CF_DROP_KINDS
};

/*
 * The reply's sizes (ABI 1.22), exact: a drop of one size's cache lists
 * that size alone, one of every size each of the run's sizes once; their
 * parts add up to the sums.
 */
static void operator_check_sizes(const struct cf_shared *sh,
				 const struct cf_drop *d, const char *args)
{
	const struct kvmm_admin_cache_drop_reply *r = &d->rep;
	uint64_t dropped[3] = { 0 }, kept[3] = { 0 };
	uint32_t want = d->block_pages ? 1 : sh->nsizes;

	if (r->block_pages != d->block_pages || r->nr_sizes != want)
		t_fail("cache-drop %s: the reply names size %u and %u sizes, expected %u and %u",
		       args, r->block_pages, r->nr_sizes, d->block_pages, want);
	for (uint32_t k = 0; k < r->nr_sizes; k++) {
		uint32_t bp = r->sizes[k].block_pages, s = 0;

		while (s < sh->nsizes && cf_ppb(sh, s) != bp)
			s++;
		if (s == sh->nsizes || (d->block_pages && bp != d->block_pages))
			t_fail("cache-drop %s: its part %u is of %u pages a block, not a size asked",
			       args, k, bp);
		for (uint32_t j = 0; j < k; j++)
			if (r->sizes[j].block_pages == bp)
				t_fail("cache-drop %s: size %u listed twice",
				       args, bp);
		for (int t = 0; t < 3; t++) {
			dropped[t] += r->sizes[k].dropped[t];
			kept[t] += r->sizes[k].kept[t];
		}
	}
	for (int t = 0; t < 3; t++)
		if (dropped[t] != r->dropped[t] || kept[t] != r->kept[t])
			t_fail("cache-drop %s: tier %d's sizes add up to dropped %llu kept %llu, the sums say %llu and %llu",
			       args, t, (unsigned long long)dropped[t],
			       (unsigned long long)kept[t],
			       (unsigned long long)r->dropped[t],
			       (unsigned long long)r->kept[t]);
}

static void operator_drop(const struct cf_proc *p, uint64_t *rs)
{
	static const uint32_t weights[CF_DROP_KINDS] = { 4, 2, 2, 1, 1, 1 };
	struct cf_drop d = { .round = p->round };
	uint32_t pick = (uint32_t)(cf_rand(rs) % 11), kind = 0;
	char args[64] = "";
	uint32_t i;
	int r;

	while (pick >= weights[kind])
		pick -= weights[kind++];
	switch (kind) {
	case CF_DROP_OWN_TENANT:
	case CF_DROP_OTHER_TENANT:
		d.flags = KVMM_CACHE_DROP_F_TENANT;
		d.tenant =
			kind == CF_DROP_OTHER_TENANT ?
				(p->sh->uids ? CF_UID_NOBODY : p->sh->uid + 7) :
				cf_chain_uid(p->sh, (uint32_t)cf_rand(rs) %
							    CF_CLIENTS);
		snprintf(args, sizeof(args), "--uid %u", d.tenant);
		break;
	case CF_DROP_NVME:
		d.tiers = KVMM_CACHE_DROP_NVME;
		snprintf(args, sizeof(args), "--tier nvme");
		break;
	case CF_DROP_GPU:
		d.tiers = KVMM_CACHE_DROP_GPU;
		snprintf(args, sizeof(args), "--tier gpu");
		break;
	case CF_DROP_HOST:
		d.tiers = KVMM_CACHE_DROP_HOST;
		snprintf(args, sizeof(args), "--tier host");
		break;
	}
	/* several sizes: a third of the drops walk one size's cache */
	if (p->sh->nsizes > 1 && cf_rand(rs) % 3 == 0) {
		size_t at = strlen(args);

		d.block_pages =
			cf_ppb(p->sh, (uint32_t)(cf_rand(rs) % p->sh->nsizes));
		snprintf(args + at, sizeof(args) - at, "%s--block-pages %u",
			 at ? " " : "", d.block_pages);
	}
	d.via_kvmmctl = cf_rand(rs) % 4 == 0;
	/* held: a hash counted before the drop is sent, or since (a count
	 * that ended before had its close answered before the drop went) */
	d.sent_us = cf_now_us();
	for (i = 0; i < cf_nhashes(p->sh); i++)
		if (__atomic_load_n(&p->sh->h[i].holders, __ATOMIC_SEQ_CST))
			d.held[i / 64] |= 1ULL << (i % 64);
	if (d.via_kvmmctl) {
		d.rep = cd_kvmmctl(p->sock, args);
	} else {
		struct kvmm_admin_cache_drop a = {
			.size = sizeof(a),
			.tiers = d.tiers,
			.flags = d.flags,
			.tenant = d.tenant,
			.block_pages = d.block_pages,
		};

		r = cd_raw(p->sock, &a, sizeof(a), &d.rep);
		if (r)
			t_fail("cache-drop %s: %d", args, r);
	}
	d.acked_us = cf_now_us();
	operator_check_sizes(p->sh, &d, args);
	for (i = 0; i < cf_nhashes(p->sh); i++)
		if (__atomic_load_n(&p->sh->h[i].last_acquire_us,
				    __ATOMIC_SEQ_CST) >= d.sent_us)
			d.held[i / 64] |= 1ULL << (i % 64);
	i = p->sh->ndrops;
	t_assert(i < CF_MAX_DROPS);
	p->sh->drops[i] = d;
	/* the entry is whole before it counts */
	__atomic_store_n(&p->sh->ndrops, i + 1, __ATOMIC_RELEASE);
}

pid_t cf_operator_start(const struct cf_proc *p)
{
	pid_t pid = cf_fork();

	t_assert(pid >= 0);
	/* a group of its own, which the parent stops and kills whole: the
	 * kvmmctl it runs with it (both sides set it, whichever runs
	 * first) */
	setpgid(pid, pid);
	if (pid == 0) {
		/* kvmmctl's JSON (cd_kvmmctl() prints it) is not the log's */
		if (!freopen("/dev/null", "w", stdout))
			_exit(1);
		uint64_t rs = p->seed * 7919 + p->round * 31 + 0x0de;

		for (;;) {
			usleep((useconds_t)(30000 + cf_rand(&rs) % 270000));
			operator_drop(p, &rs);
		}
	}
	return pid;
}
