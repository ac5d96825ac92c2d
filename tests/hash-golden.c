// SPDX-License-Identifier: MIT
/*
 * Block identity in libkvmm's public API (kvmm.h): kvmm_hash_seed(),
 * kvmm_block_hash() and kvmm_hash_chain() give the golden values pinned
 * in Documentation/abi.md for fixed inputs (so any change of the hashed
 * byte layout, which NVMe-tier slots persist across restarts, fails
 * here), equal the policy library's pol_hash_* that kvmmd and
 * kvmm-replay use, and refuse bad arguments with -EINVAL / -E2BIG.  The
 * golden values were computed independently as well:
 * tests/python-kvmm/cases_share.py packs the same bytes with struct and
 * hashes them with libxxhash itself.
 * kvmm_region_hash_seed() needs a region, so it is checked in
 * tests/hash-share.c against a real kvmmd.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "kvmm/kvmm.h"
#include "kvmm/policy/block_hash.h"
#include "tests/lib/test.h"

#define t_hash_eq(a, b)                                                       \
	do {                                                                  \
		unsigned long long _a = (a), _b = (b);                        \
		if (_a != _b)                                                 \
			t_fail("%s == 0x%016llx, expected 0x%016llx", #a, _a, \
			       _b);                                           \
	} while (0)

/* The golden values (Documentation/abi.md,
 * tests/python-kvmm/cases_share.py). */
#define SEED_LLAMA 0xf234da226931a53dULL /* layout below, "llama-3-8b" */
#define SEED_NONAME 0x949cc5b8f5a0bbbaULL /* 2, 2, 64, 2, 256, no model */
static const uint64_t chain_salt0[3] = { 0x9b181b5d6511112fULL,
					 0xbde7f21ef799c998ULL,
					 0x20e531c6ba1f825fULL };
static const uint64_t chain_salt7[3] = { 0x723cd10a9bb80fffULL,
					 0xe9f77681e7d98748ULL,
					 0x58a161e40377d114ULL };

/* tokens[i] = i * 2654435761 mod 2^32: ids with the top bit set too */
#define NTOK 50
#define TPB 16
static uint32_t tokens[NTOK];

static struct kvmm_hash_layout llama = {
	.size = sizeof(llama),
	.model = "llama-3-8b",
	.layers = 32,
	.kv_heads = 8,
	.head_dim = 128,
	.dtype_bytes = 2,
	.tokens_per_block = TPB,
};

static void golden(void)
{
	struct kvmm_hash_layout noname = { .size = sizeof(noname),
					   .layers = 2,
					   .kv_heads = 2,
					   .head_dim = 64,
					   .dtype_bytes = 2,
					   .tokens_per_block = 256 };
	uint64_t seed, h[4], parent = 0;

	t_ok(kvmm_hash_seed(&llama, &seed));
	t_hash_eq(seed, SEED_LLAMA);
	t_ok(kvmm_hash_seed(&noname, &seed));
	t_hash_eq(seed, SEED_NONAME);
	/* NULL and "" are the same name: no bytes */
	noname.model = "";
	t_ok(kvmm_hash_seed(&noname, &seed));
	t_hash_eq(seed, SEED_NONAME);

	/* 50 tokens: 3 full blocks, the 2-token tail is not hashed */
	memset(h, 0, sizeof(h));
	t_assert_eq(kvmm_hash_chain(SEED_LLAMA, 0, tokens, NTOK, TPB, h, 4), 3);
	for (int i = 0; i < 3; i++)
		t_hash_eq(h[i], chain_salt0[i]);
	t_hash_eq(h[3], 0);
	t_assert_eq(kvmm_hash_chain(SEED_LLAMA, 7, tokens, NTOK, TPB, h, 4), 3);
	for (int i = 0; i < 3; i++)
		t_hash_eq(h[i], chain_salt7[i]);
	/* block by block: the chain's parents are the previous hashes */
	for (int i = 0; i < 3; i++) {
		t_ok(kvmm_block_hash(SEED_LLAMA, parent, 0, tokens + i * TPB,
				     TPB, &h[i]));
		t_hash_eq(h[i], chain_salt0[i]);
		parent = h[i];
	}
	/* max cuts the chain; a prefix's chain is a prefix of the chain */
	t_assert_eq(kvmm_hash_chain(SEED_LLAMA, 0, tokens, NTOK, TPB, h, 2), 2);
	t_hash_eq(h[1], chain_salt0[1]);
	t_assert_eq(kvmm_hash_chain(SEED_LLAMA, 0, tokens, 2 * TPB + 1, TPB, h,
				    4),
		    2);
	t_hash_eq(h[1], chain_salt0[1]);
	t_assert_eq(kvmm_hash_chain(SEED_LLAMA, 0, tokens, TPB - 1, TPB, NULL,
				    0),
		    0);
	t_assert_eq(kvmm_hash_chain(SEED_LLAMA, 0, NULL, 0, TPB, NULL, 0), 0);
}

/* Any input changes the hash: seed, parent, salt, one token, the name. */
static void sensitivity(void)
{
	struct kvmm_hash_layout l = llama;
	uint32_t t[TPB];
	uint64_t h, seed;

	memcpy(t, tokens, sizeof(t));
	t_ok(kvmm_block_hash(SEED_LLAMA, 1, 0, t, TPB, &h));
	t_assert(h != chain_salt0[0]);
	t_ok(kvmm_block_hash(SEED_LLAMA + 1, 0, 0, t, TPB, &h));
	t_assert(h != chain_salt0[0]);
	t_ok(kvmm_block_hash(SEED_LLAMA, 0, 1, t, TPB, &h));
	t_assert(h != chain_salt0[0]);
	t[TPB - 1] ^= 1u << 31;
	t_ok(kvmm_block_hash(SEED_LLAMA, 0, 0, t, TPB, &h));
	t_assert(h != chain_salt0[0]);
	l.model = "llama-3-8B";
	t_ok(kvmm_hash_seed(&l, &seed));
	t_assert(seed != SEED_LLAMA);
	l = llama;
	l.tokens_per_block = 32;
	t_ok(kvmm_hash_seed(&l, &seed));
	t_assert(seed != SEED_LLAMA);
}

/* The public functions are the policy library's, for many inputs. */
static void same_as_internal(void)
{
	uint64_t pub[NTOK], pol[NTOK], a, b;

	for (uint32_t tpb = 1; tpb <= NTOK + 1; tpb++) {
		struct kvmm_hash_layout l = llama;
		struct pol_hash_layout pl = {
			.size = sizeof(pl),
			.model = tpb & 1 ? "m" : NULL,
			.layers = tpb,
			.kv_heads = 3,
			.head_dim = 7 * tpb,
			.dtype_bytes = 1 + tpb % 4,
			.tokens_per_block = tpb,
		};
		size_t nb;
		int n;

		l.model = pl.model;
		l.layers = pl.layers;
		l.kv_heads = pl.kv_heads;
		l.head_dim = pl.head_dim;
		l.dtype_bytes = pl.dtype_bytes;
		l.tokens_per_block = pl.tokens_per_block;
		t_ok(kvmm_hash_seed(&l, &a));
		t_ok(pol_hash_seed(&pl, &b));
		t_hash_eq(a, b);
		n = kvmm_hash_chain(a, tpb, tokens, NTOK, tpb, pub, NTOK);
		t_assert_eq(n, NTOK / tpb);
		t_assert_eq(pol_hash_chain(b, tpb, tokens, NTOK, tpb, pol,
					   NTOK),
			    n);
		for (int i = 0; i < n; i++)
			t_hash_eq(pub[i], pol[i]);
		/* one block, as long as tokens[] allows */
		nb = tpb < NTOK ? tpb : NTOK;
		t_ok(kvmm_block_hash(a, 5, 6, tokens, nb, &pub[0]));
		t_ok(pol_block_hash(b, 5, 6, tokens, nb, &pol[0]));
		t_hash_eq(pub[0], pol[0]);
	}
}

static void errors(void)
{
	struct kvmm_hash_layout l = llama;
	struct {
		struct kvmm_hash_layout l;
		uint64_t more;
	} newer = { .l = llama };
	uint64_t h[4] = { 0 }, seed = 0;

	t_assert_eq(kvmm_hash_seed(NULL, &seed), -EINVAL);
	t_assert_eq(kvmm_hash_seed(&l, NULL), -EINVAL);
	l.size = sizeof(l) - 1;
	t_assert_eq(kvmm_hash_seed(&l, &seed), -EINVAL);
	l.size = 0;
	t_assert_eq(kvmm_hash_seed(&l, &seed), -EINVAL);
	l = llama;
	l.layers = 0;
	t_assert_eq(kvmm_hash_seed(&l, &seed), -EINVAL);
	l = llama;
	l.kv_heads = 0;
	t_assert_eq(kvmm_hash_seed(&l, &seed), -EINVAL);
	l = llama;
	l.head_dim = 0;
	t_assert_eq(kvmm_hash_seed(&l, &seed), -EINVAL);
	l = llama;
	l.dtype_bytes = 0;
	t_assert_eq(kvmm_hash_seed(&l, &seed), -EINVAL);
	l = llama;
	l.tokens_per_block = 0;
	t_assert_eq(kvmm_hash_seed(&l, &seed), -EINVAL);
	t_hash_eq(seed, 0); /* untouched by every failure */
	/* a newer caller's larger struct: zero tail accepted, else -E2BIG */
	newer.l.size = sizeof(newer);
	t_ok(kvmm_hash_seed(&newer.l, &seed));
	t_hash_eq(seed, SEED_LLAMA);
	newer.more = 1;
	t_assert_eq(kvmm_hash_seed(&newer.l, &seed), -E2BIG);

	t_assert_eq(kvmm_block_hash(SEED_LLAMA, 0, 0, NULL, TPB, h), -EINVAL);
	t_assert_eq(kvmm_block_hash(SEED_LLAMA, 0, 0, tokens, 0, h), -EINVAL);
	t_assert_eq(kvmm_block_hash(SEED_LLAMA, 0, 0, tokens, TPB, NULL),
		    -EINVAL);
	t_assert_eq(kvmm_hash_chain(SEED_LLAMA, 0, tokens, NTOK, 0, h, 4),
		    -EINVAL);
	t_assert_eq(kvmm_hash_chain(SEED_LLAMA, 0, NULL, NTOK, TPB, h, 4),
		    -EINVAL);
	t_assert_eq(kvmm_hash_chain(SEED_LLAMA, 0, tokens, NTOK, TPB, NULL, 4),
		    -EINVAL);
	t_hash_eq(h[0], 0);
	t_assert_eq(kvmm_region_hash_seed(NULL, "m", &seed), -EINVAL);
}

int main(void)
{
	uint64_t seed;
	int err;

	for (uint32_t i = 0; i < NTOK; i++)
		tokens[i] = i * 2654435761u;
	err = kvmm_hash_seed(&llama, &seed);
	if (err == -ENOTSUP) {
		uint64_t h;

		/* every function refuses, short inputs included */
		t_assert_eq(kvmm_block_hash(0, 0, 0, tokens, TPB, &h),
			    -ENOTSUP);
		t_assert_eq(kvmm_hash_chain(0, 0, tokens, 1, TPB, &h, 1),
			    -ENOTSUP);
		t_skip("libkvmm built without libxxhash: hashes -ENOTSUP");
	}
	t_ok(err);
	golden();
	sensitivity();
	same_as_internal();
	errors();
	printf("golden values and %d layouts match\n", NTOK + 1);
	return 0;
}
