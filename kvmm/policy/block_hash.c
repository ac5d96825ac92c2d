/* SPDX-License-Identifier: MIT */
/*
 * Chained block hashes (see block_hash.h for the exact byte layout).
 * Streaming XXH3 so a block's tokens are hashed without a copy on
 * little-endian hosts; on big-endian hosts they are converted in a small
 * bounce buffer.
 */
#include <errno.h>
#include <string.h>

#include "kvmm/policy/block_hash.h"

#if HAVE_LIBXXHASH
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int pol_hash_seed(const struct pol_hash_layout *l, uint64_t *seed)
{
	uint8_t buf[20];
	XXH3_state_t *st;

	if (!l || !seed || l->size < sizeof(*l))
		return -EINVAL;
	put_le32(buf, l->layers);
	put_le32(buf + 4, l->kv_heads);
	put_le32(buf + 8, l->head_dim);
	put_le32(buf + 12, l->dtype_bytes);
	put_le32(buf + 16, l->tokens_per_block);
	st = XXH3_createState();
	if (!st)
		return -ENOMEM;
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, buf, sizeof(buf));
	if (l->model)
		XXH3_64bits_update(st, l->model, strlen(l->model));
	*seed = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return 0;
}

int pol_block_hash(uint64_t seed, uint64_t parent, uint64_t salt,
		   const uint32_t *tokens, size_t ntokens, uint64_t *hash)
{
	XXH3_state_t st;
	uint8_t head[16];

	if (!hash || (ntokens && !tokens))
		return -EINVAL;
	put_le64(head, parent);
	put_le64(head + 8, salt);
	/*
	 * A state on the stack must start with seed 0 (xxhash.h,
	 * XXH3_INITSTATE): reset_withSeed() derives the secret only when
	 * the seed it finds differs from the one asked for, so a stale
	 * stack slot holding the same seed over another secret gave another
	 * hash for the same tokens (valgrind: a jump on uninitialised
	 * memory; tests/hash-valgrind.sh).
	 */
	XXH3_INITSTATE(&st);
	XXH3_64bits_reset_withSeed(&st, seed);
	XXH3_64bits_update(&st, head, sizeof(head));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	XXH3_64bits_update(&st, tokens, ntokens * sizeof(uint32_t));
#else
	for (size_t i = 0; i < ntokens; i++) {
		uint8_t t[4];

		put_le32(t, tokens[i]);
		XXH3_64bits_update(&st, t, sizeof(t));
	}
#endif
	*hash = XXH3_64bits_digest(&st);
	return 0;
}

#else /* !HAVE_LIBXXHASH */

int pol_hash_seed(const struct pol_hash_layout *l, uint64_t *seed)
{
	return -ENOTSUP;
}

int pol_block_hash(uint64_t seed, uint64_t parent, uint64_t salt,
		   const uint32_t *tokens, size_t ntokens, uint64_t *hash)
{
	return -ENOTSUP;
}

#endif

int pol_hash_chain(uint64_t seed, uint64_t salt, const uint32_t *tokens,
		   size_t ntokens, uint32_t tokens_per_block, uint64_t *hashes,
		   size_t max)
{
	uint64_t parent = 0;
	size_t n, i;

	if (!tokens_per_block || (ntokens && !tokens) || (max && !hashes))
		return -EINVAL;
	n = ntokens / tokens_per_block;
	if (n > max)
		n = max;
	if (n > INT32_MAX)
		return -EOVERFLOW;
	for (i = 0; i < n; i++) {
		int r = pol_block_hash(seed, parent, salt,
				       tokens + i * tokens_per_block,
				       tokens_per_block, &hashes[i]);
		if (r)
			return r;
		parent = hashes[i];
	}
	return (int)n;
}
