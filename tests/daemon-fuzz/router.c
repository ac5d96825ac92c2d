// SPDX-License-Identifier: MIT
/*
 * tests/daemon-fuzz: what a router asks of the cache (ABI 1.19), from a
 * client process: kvmm_prefix_query() of a chain, checked against a
 * prefix open right after it, and kvmm_block_pin_many() of hashes the
 * chains have, random ones and hash 0, every result checked.
 */
#include <string.h>

#include "tests/daemon-fuzz/fuzz.h"

/* A hash no chain has (a 64-bit draw: fz_hash()'s 72 are others but
 * for odds of 2^-58), so never cached, never 0. */
static uint64_t fz_random_hash(struct fz_client *c)
{
	return fz_next(&c->rng) | 1;
}

/*
 * Query a chain's cached prefix, then open that prefix with actions (so
 * that a --restore-mode plan that would rather recompute a block says
 * so, RECOMPUTE, instead of cutting the prefix there, as an open
 * without actions does; the other blocks' bytes are checked).  What may
 * change between the two: other clients publish (the open finds more),
 * and blocks move between tiers (a tier in the answer says nothing of
 * the open).  The open finds fewer where a phase drops blocks (a full
 * NVMe tier, a tenant limit, a failed migration) and, in every phase,
 * where its restores do not fit the pool or the quota (they become
 * misses and the prefix ends there, abi.md 1.20) or a block it would
 * share is busy (a busy miss): with 4 clients on a 64-block pool that
 * is common even in phase 1 (seed 1: a query of 6 blocks, an open of
 * 0), so fewer is counted, not failed.  What must hold: the answer is
 * at most what was asked, its tiers are the enum's, every block the
 * open hands out holds its hash's bytes, and a random chain is found by
 * neither.
 */
void op_query(struct fz_client *c)
{
	uint64_t h[FZ_CHAIN_BLOCKS];
	uint8_t tiers[FZ_CHAIN_BLOCKS];
	bool random = !fz_below(&c->rng, 4);
	uint32_t n = 1 + fz_below(&c->rng, FZ_CHAIN_BLOCKS), nr = 0;
	struct fz_seq s = { .chain = (int)fz_below(&c->rng, FZ_CHAINS) };
	struct kvmm_region *r;
	struct kvmm_prefix_opts o = { .size = sizeof(o) };
	uint8_t acts[FZ_CHAIN_BLOCKS];
	int q, err;

	s.sz = fz_pick_size(c->ph, &c->rng);
	r = c->r[s.sz];
	if (random)
		for (uint32_t b = 0; b < n; b++)
			h[b] = fz_random_hash(c);
	else
		fz_chain(s.sz, s.chain, h);
	memset(tiers, 0xff, sizeof(tiers));
	q = kvmm_prefix_query(r, h, n, tiers, 0);
	fz_trace(c, "query %s chain %d size %d of %u blocks: %d",
		 random ? "random" : "", s.chain, s.sz, n, q);
	if (q < 0 || q > (int)n)
		fz_fail(c, "prefix query of %u blocks of chain %d: %d", n,
			s.chain, q);
	for (int b = 0; b < q; b++)
		if (tiers[b] > KVMM_QUERY_MOVING)
			fz_fail(c,
				"prefix query of chain %d: block %d in tier %u",
				s.chain, b, tiers[b]);
	if (random && q)
		fz_fail(c, "prefix query of %u random hashes found %d", n, q);
	fz_add(&c->ph->cnt->queries, 1);
	fz_add(&c->ph->cnt->query_blocks, (uint64_t)q);
	fz_add(&c->ph->cnt->ops[OP_QUERY], 1);
	if (random) {
		fz_add(&c->ph->cnt->query_random, 1);
		/* the open too: one hash's bytes are never checked here */
		n = 1;
	}
	o.actions = acts;
	err = kvmm_seq_open_prefix_opts(r, h, n, &s.id, &nr, &o);
	fz_trace(c, "prefix open after the query: %d, seq %u, %u blocks", err,
		 s.id, nr);
	if (err == -ENOMEM || (err == -EDQUOT && c->ph->quota))
		return;
	if (err)
		fz_fail(c, "prefix open of %u blocks of chain %d: %d", n,
			s.chain, err);
	if (random && nr)
		fz_fail(c, "prefix open of a random hash found %u blocks", nr);
	if (nr < (uint32_t)q)
		fz_add(&c->ph->cnt->query_open_less, 1);
	s.len = nr * CC_TPB;
	for (uint32_t b = 0; b < nr; b++)
		if (acts[b] != KVMM_BLOCK_RECOMPUTE)
			fz_check(c, &s, b, acts[b]);
	fz_ok(c, kvmm_seq_close(r, s.id));
}

/*
 * Pin 1-4 hashes at once with TTL pins (they end by themselves, so the
 * GPU tier is not pinned full; sometimes ones that may demote): a chain
 * block, a random hash (-ENOENT) or hash 0 (-EINVAL), each result
 * exactly what its own pin would say, the return value the pins made.
 */
void op_pin_many(struct fz_client *c)
{
	uint64_t h[4];
	int32_t res[4];
	uint32_t n = 1 + fz_below(&c->rng, 4), flags = KVMM_PIN_F_TTL;
	struct kvmm_pin_opts o = { .size = sizeof(o) };
	int pinned = 0, err;

	if (!fz_below(&c->rng, 3))
		flags |= KVMM_PIN_F_DEMOTE;
	o.flags = flags;
	o.ttl_ns = (1 + fz_below(&c->rng, 50)) * 1000000ull;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t x = fz_below(&c->rng, 10);

		if (x < 7) {
			int sz = fz_pick_size(c->ph, &c->rng);

			h[i] = fz_hash(sz, (int)fz_below(&c->rng, FZ_CHAINS),
				       fz_below(&c->rng, FZ_CHAIN_BLOCKS));
		} else {
			h[i] = x < 9 ? fz_random_hash(c) : 0;
		}
		res[i] = 99;
	}
	err = kvmm_block_pin_many(c->conn, h, n, &o, res);
	fz_trace(c, "pin-many %u hashes flags %#x: %d (%d %d %d %d)", n, flags,
		 err, res[0], n > 1 ? res[1] : 0, n > 2 ? res[2] : 0,
		 n > 3 ? res[3] : 0);
	if (err < 0)
		fz_fail(c, "pin-many of %u hashes (flags %#x): %d", n, flags,
			err);
	for (uint32_t i = 0; i < n; i++) {
		int32_t r = res[i];

		if (r >= 0 && r <= 2) {
			pinned++;
			if (!h[i])
				fz_fail(c, "pin-many pinned hash 0");
			if (h[i] == c->pinned)
				c->pinned = 0; /* replaced by a TTL pin */
		} else if (!h[i] ? r != -EINVAL :
				   r != -ENOENT && r != -EDQUOT) {
			fz_fail(c, "pin-many: hash %#llx result %d",
				(unsigned long long)h[i], r);
		} else if (r == -ENOENT) {
			fz_add(&c->ph->cnt->pin_missing, 1);
		} else if (r == -EDQUOT) {
			fz_add(&c->ph->cnt->pin_quota, 1);
		}
	}
	if (err != pinned)
		fz_fail(c,
			"pin-many of %u hashes returned %d, %d results pinned",
			n, err, pinned);
	fz_add(&c->ph->cnt->pin_many_calls, 1);
	fz_add(&c->ph->cnt->pin_many_pinned, (uint64_t)pinned);
	fz_add(&c->ph->cnt->ops[OP_PIN_MANY], 1);
}
