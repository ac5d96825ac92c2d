/* SPDX-License-Identifier: MIT */
/*
 * The block index maps hashes (0 included) to stable ids through inserts
 * and deletes, at 1M entries and through growth from a size that is not
 * whole pages; chained block hashes follow the documented
 * byte layout and differ by seed, salt and parent.
 */
#include <stdint.h>
#include <string.h>

#include "kvmm/policy/block_hash.h"
#include "kvmm/policy/block_index.h"
#include "tests/lib/test.h"

#define N 1000000u

static uint64_t key(uint32_t i)
{
	return i * 0x9e3779b97f4a7c15ull; /* i == 0 gives hash 0 */
}

int main(void)
{
	struct pol_index ix;
	static uint32_t ids[N];
	bool created;

	t_ok(pol_index_init(&ix, 0));
	for (uint32_t i = 0; i < N; i++) {
		ids[i] = pol_index_get(&ix, key(i), &created);
		t_assert(ids[i] != POL_NONE && created);
		pol_index_at(&ix, ids[i])->position = i;
	}
	t_assert_eq(ix.nblocks, N);
	t_assert_eq(pol_index_get(&ix, key(7), &created), ids[7]);
	t_assert(!created);
	/* Delete every odd key; the even ones keep their ids and data. */
	for (uint32_t i = 1; i < N; i += 2)
		pol_index_del(&ix, ids[i]);
	t_assert_eq(ix.nblocks, N / 2);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t id = pol_index_find(&ix, key(i));

		if (i & 1) {
			t_assert_eq(id, POL_NONE);
		} else {
			t_assert_eq(id, ids[i]);
			t_assert_eq(pol_index_at(&ix, id)->position, i);
		}
	}
	/* Freed ids are reused before the array grows. */
	uint32_t hw = ix.high_water;
	for (uint32_t i = 1; i < N; i += 2)
		t_assert(pol_index_get(&ix, key(i) + 1, &created) != POL_NONE);
	t_assert_eq(ix.high_water, hw);
	pol_index_fini(&ix);

	/*
	 * Sized for 100000 entries (an entry array of 19.2 MB, not whole
	 * pages, big enough for huge pages) and grown past it twice: the
	 * mapped arrays must grow in place of a copy and keep the entries.
	 */
	t_ok(pol_index_init(&ix, 100000));
	for (uint32_t i = 0; i < 250000; i++) {
		ids[i] = pol_index_get(&ix, key(i), &created);
		t_assert(ids[i] != POL_NONE && created);
		pol_index_at(&ix, ids[i])->position = i;
	}
	for (uint32_t i = 0; i < 250000; i += 997)
		t_assert_eq(
			pol_index_at(&ix, pol_index_find(&ix, key(i)))->position,
			i);
	t_assert_eq((uintptr_t)ix.blocks % 64, 0);
	pol_index_fini(&ix);

#if HAVE_LIBXXHASH
	struct pol_hash_layout l = { .size = sizeof(l),
				     .model = "llama-3-8b",
				     .layers = 32,
				     .kv_heads = 8,
				     .head_dim = 128,
				     .dtype_bytes = 2,
				     .tokens_per_block = 4 };
	uint64_t seed, seed2, h[3], h2[3], one;
	uint32_t tok[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

	t_ok(pol_hash_seed(&l, &seed));
	l.kv_heads = 32;
	t_ok(pol_hash_seed(&l, &seed2));
	t_assert(seed != seed2);
	/* 10 tokens in blocks of 4: two full blocks, the tail is not hashed */
	t_assert_eq(pol_hash_chain(seed, 0, tok, 10, 4, h, 3), 2);
	t_ok(pol_block_hash(seed, 0, 0, tok, 4, &one));
	t_assert(one == h[0]);
	t_ok(pol_block_hash(seed, h[0], 0, tok + 4, 4, &one));
	t_assert(one == h[1]);
	/* Same tokens under another parent, salt or seed: another block. */
	t_ok(pol_block_hash(seed, 0, 0, tok + 4, 4, &one));
	t_assert(one != h[1]);
	t_assert_eq(pol_hash_chain(seed, 42, tok, 10, 4, h2, 3), 2);
	t_assert(h2[0] != h[0]);
	t_assert_eq(pol_hash_chain(seed2, 0, tok, 10, 4, h2, 3), 2);
	t_assert(h2[0] != h[0]);
#endif
	return 0;
}
