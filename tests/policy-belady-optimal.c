/* SPDX-License-Identifier: MIT */
/*
 * belady equals the optimum found by brute force on tiny random traces.
 * Traces are prefix-consistent (requests are root-to-node paths of a
 * small random tree, like chained block hashes); the optimum tries, after
 * every request, every set of blocks the cache could keep (any subset of
 * resident + requested blocks of size min(capacity, that many)) and
 * counts prefix hits.
 */
#include <string.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/test.h"

#define NB 9 /* blocks 0..NB-1; parent[b] < b */
#define NR 7 /* requests */

static int parent[NB];
static int reqs[NR][NB], reqlen[NR];
static int cap;
static int memo[NR + 1][1 << NB];

static int path(int b, int *out)
{
	int tmp[NB], n = 0;

	for (; b >= 0; b = parent[b])
		tmp[n++] = b;
	for (int i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

static int popcount(unsigned x)
{
	return __builtin_popcount(x);
}

/* Best hits from request r on with resident set s. */
static int best(int r, unsigned s)
{
	unsigned u, sub;
	int hits = 0, keep, b = -1;

	if (r == NR)
		return 0;
	if (memo[r][s] >= 0)
		return memo[r][s];
	while (hits < reqlen[r] && (s >> reqs[r][hits] & 1))
		hits++;
	u = s;
	for (int i = 0; i < reqlen[r]; i++)
		u |= 1u << reqs[r][i];
	keep = popcount(u) < cap ? popcount(u) : cap;
	/* every subset of u with `keep` members */
	for (sub = u;; sub = (sub - 1) & u) {
		if (popcount(sub) == keep) {
			int v = best(r + 1, sub);

			if (v > b)
				b = v;
		}
		if (!sub)
			break;
	}
	return memo[r][s] = hits + b;
}

static uint64_t rng = 88172645463325252ull;

static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static int run_belady(void)
{
	struct pol_cache_opts o = { .size = sizeof(o),
				    .kind = POL_BELADY,
				    .capacity = { (uint64_t)cap },
				    .prefix_rule = -1 };
	struct pol_cache *c;
	int hits = 0;

	t_ok(pol_cache_create(&o, &c));
	for (int r = 0; r < NR; r++) {
		uint64_t h[NB];

		pol_cache_set_clock(c, (uint64_t)r + 1);
		for (int i = 0; i < reqlen[r]; i++)
			h[i] = (uint64_t)reqs[r][i] + 100;
		hits += (int)pol_cache_prefix(c, h, (size_t)reqlen[r]);
		for (int i = 0; i < reqlen[r]; i++) {
			uint64_t next = UINT64_MAX;

			for (int q = r + 1; q < NR && next == UINT64_MAX; q++)
				for (int j = 0; j < reqlen[q]; j++)
					if (reqs[q][j] == reqs[r][i])
						next = (uint64_t)q;
			struct pol_block_desc d = {
				.hash = h[i],
				.parent_hash = i ? h[i - 1] : 0,
				.position = (uint32_t)i,
				.flags = i ? POL_BLOCK_HAS_PARENT : 0,
				.next_use = next,
			};
			t_ok(pol_cache_access(c, &d, NULL));
		}
	}
	pol_cache_destroy(c);
	return hits;
}

int main(void)
{
	int cases = 0, nontrivial = 0;

	for (int trial = 0; trial < 300; trial++) {
		parent[0] = -1;
		for (int b = 1; b < NB; b++)
			parent[b] = (int)rnd((unsigned)b + 1) - 1;
		for (int r = 0; r < NR; r++)
			reqlen[r] = path((int)rnd(NB), reqs[r]);
		for (cap = 1; cap <= 4; cap++) {
			int opt, bel;

			memset(memo, 0xff, sizeof(memo));
			opt = best(0, 0);
			bel = run_belady();
			if (bel != opt)
				t_fail("trial %d capacity %d: belady %d hits, "
				       "optimum %d",
				       trial, cap, bel, opt);
			cases++;
			nontrivial += opt > 0;
		}
	}
	printf("%d cases (%d with hits): belady == optimum\n", cases,
	       nontrivial);
	t_assert(nontrivial > cases / 2);
	return 0;
}
