// SPDX-License-Identifier: MIT
/*
 * tests/daemon-crash-fuzz's processes.  A client loops: a chain and a
 * length drawn from its PRNG, a prefix open of the chain's hashes (the
 * blocks found checked word for word against the hash's content), the
 * sequence extended to the length, the missing blocks written and
 * published, the sequence held a few ms at times, then closed.  The
 * operator sends ADMIN_CACHE_DROP every 30-300 ms, of every tier, some
 * tiers or the clients' tenant (or another one), over the admin call or
 * through `kvmmctl cache-drop`, and records each one kvmmd answered with
 * the time it was sent.  Both are SIGSTOPped before kvmmd is killed, so
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

/* Publish blocks [first, len) of chain k, their hashes' records kept
 * pending until the answer is read. */
static void client_publish(struct cc *c, struct cf_shared *sh, uint32_t seq,
			   uint32_t k, uint32_t first, uint32_t len,
			   const uint64_t *h)
{
	struct kvmm_block_publish_reply rep;
	int r;

	for (uint32_t b = first; b < len; b++)
		__atomic_add_fetch(&sh->h[cf_index(k, b)].pending, 1,
				   __ATOMIC_SEQ_CST);
	r = cc_publish(c, seq, first, h + first, len - first, &rep);
	for (uint32_t b = first; b < len; b++) {
		struct cf_hash_rec *rec = &sh->h[cf_index(k, b)];
		uint64_t now = cf_now_us();

		atomic_max(&rec->last_end_us, now);
		if (!r)
			__atomic_add_fetch(&rec->published, 1,
					   __ATOMIC_SEQ_CST);
		__atomic_sub_fetch(&rec->pending, 1, __ATOMIC_SEQ_CST);
	}
	if (r)
		t_fail("publish of chain %u blocks %u-%u: %d", k, first,
		       len - 1, r);
	__atomic_add_fetch(&sh->publishes, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sh->blocks_published, rep.published,
			   __ATOMIC_RELAXED);
}

/* One open, extend, publish and close of one of client num's chains in
 * the round's window (CF_ROUND_CHAINS from chain 6 x round on), len
 * blocks. */
static void client_step(struct cc *c, struct cf_shared *sh, uint32_t round,
			int num, uint64_t *rs)
{
	static uint32_t ids[CF_CHAIN_BLOCKS * CC_PPB];
	uint32_t j = (uint32_t)(cf_rand(rs) % (CF_ROUND_CHAINS / CF_CLIENTS));
	uint32_t k = (round * 6 + j * CF_CLIENTS + (uint32_t)num) % CF_CHAINS;
	uint32_t len = 1 + (uint32_t)(cf_rand(rs) % CF_CHAIN_BLOCKS);
	struct kvmm_prefix_open_reply rep;
	uint64_t h[CF_CHAIN_BLOCKS];
	uint32_t found;
	int r;

	for (uint32_t b = 0; b < len; b++) {
		struct cf_hash_rec *rec = &sh->h[cf_index(k, b)];

		h[b] = cf_hash(k, b);
		__atomic_add_fetch(&rec->holders, 1, __ATOMIC_SEQ_CST);
		atomic_max(&rec->last_acquire_us, cf_now_us());
	}
	cc_prefix(c, h, len, &rep, ids);
	found = rep.nr_blocks;
	t_assert(found <= len);
	for (uint32_t b = 0; b < found; b++) {
		for (uint32_t p = 0; p < CC_PPB; p++) {
			int w = cf_first_bad(c->map[ids[b * CC_PPB + p]], h[b],
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
			t_fail("extend of chain %u to %u blocks: %d", k, len,
			       r);
		for (uint32_t b = found; b < len; b++)
			for (uint32_t p = 0; p < CC_PPB; p++)
				cf_fill(c->map[ids[b * CC_PPB + p]], h[b], p);
		client_publish(c, sh, rep.seq_id, k, found, len, h);
	}
	/* sometimes hold the blocks a while: a drop then keeps them */
	if (cf_rand(rs) % 4 == 0)
		usleep((useconds_t)(cf_rand(rs) % 20000));
	cc_seq_close(c, rep.seq_id, ids, len * CC_PPB);
	for (uint32_t b = 0; b < len; b++)
		__atomic_sub_fetch(&sh->h[cf_index(k, b)].holders, 1,
				   __ATOMIC_SEQ_CST);
}

pid_t cf_client_start(const struct cf_proc *p, int num)
{
	pid_t pid = cf_fork();

	t_assert(pid >= 0);
	if (pid == 0) {
		uint64_t rs =
			p->seed * 1000003 + p->round * 101 + (uint64_t)num;
		struct cc c;

		if (p->sh->uids)
			cu_become(CF_UID_BASE + (uid_t)num,
				  CF_UID_BASE + (gid_t)num);
		cc_connect(&c, p->sock);
		cc_region(&c);
		for (;;)
			client_step(&c, p->sh, p->round, num, &rs);
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
	d.via_kvmmctl = cf_rand(rs) % 4 == 0;
	/* held: a hash counted before the drop is sent, or since (a count
	 * that ended before had its close answered before the drop went) */
	d.sent_us = cf_now_us();
	for (i = 0; i < CF_HASHES; i++)
		if (__atomic_load_n(&p->sh->h[i].holders, __ATOMIC_SEQ_CST))
			d.held[i / 64] |= 1ULL << (i % 64);
	if (d.via_kvmmctl) {
		d.rep = cd_kvmmctl(p->sock, args);
	} else {
		struct kvmm_admin_cache_drop a = { .size = sizeof(a),
						   .tiers = d.tiers,
						   .flags = d.flags,
						   .tenant = d.tenant };

		r = cd_raw(p->sock, &a, sizeof(a), &d.rep);
		if (r)
			t_fail("cache-drop %s: %d", args, r);
	}
	d.acked_us = cf_now_us();
	for (i = 0; i < CF_HASHES; i++)
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
