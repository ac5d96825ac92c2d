/* SPDX-License-Identifier: MIT */
/*
 * Chained block hashes: the identity of a full KV block.
 *
 *   h_i = XXH3_64bits_withSeed(le64(h_{i-1}) || le64(salt) ||
 *                              le32(tok_0) || ... || le32(tok_{n-1}), seed)
 *
 * with h_{-1} = 0 for the first block of a sequence, `salt` a per-tenant
 * value (0 = shared between tenants) and `seed` derived from the model and
 * KV layout by pol_hash_seed(), so that two models, two layouts or two
 * tenants never map to each other's blocks.  Every integer is hashed in
 * little-endian byte order, whatever the host, so hashes computed by a
 * client and by the daemon agree.  Token ids are 32-bit.
 *
 * Equal hashes mean an equal prefix up to and including that block: the
 * same property as the Mooncake trace's hash_ids, which the replay uses
 * directly as block identities.
 *
 * Built without libxxhash (HAVE_LIBXXHASH == 0) every function returns
 * -ENOTSUP: a cache that hashes differently from its clients would share
 * nothing, which is worse than refusing.
 *
 * Engines use the public wrappers in kvmm.h (kvmm_hash_seed(),
 * kvmm_region_hash_seed(), kvmm_block_hash(), kvmm_hash_chain(),
 * kvmm/lib/hash.c); the values are ABI (tests/hash-golden.c pins them).
 */
#ifndef KVMM_POLICY_BLOCK_HASH_H
#define KVMM_POLICY_BLOCK_HASH_H

#include <stddef.h>
#include <stdint.h>

/* What identifies a model's KV layout; hashed into the seed. */
struct pol_hash_layout {
	size_t size; /* sizeof(struct pol_hash_layout) */
	const char *model; /* model name, e.g. "llama-3-8b" (may be NULL) */
	uint32_t layers;
	uint32_t kv_heads;
	uint32_t head_dim;
	uint32_t dtype_bytes;
	uint32_t tokens_per_block;
};

/*
 * Seed for a layout: XXH3_64bits(le32(layers) || le32(kv_heads) ||
 * le32(head_dim) || le32(dtype_bytes) || le32(tokens_per_block) || model
 * name bytes without the NUL).  Returns 0 and writes *seed, or -EINVAL /
 * -ENOTSUP.
 */
int pol_hash_seed(const struct pol_hash_layout *layout, uint64_t *seed);

/* One block: h = H(parent, salt, tokens[0..ntokens)) as documented above. */
int pol_block_hash(uint64_t seed, uint64_t parent, uint64_t salt,
		   const uint32_t *tokens, size_t ntokens, uint64_t *hash);

/*
 * The chain for a token sequence: hashes of its full blocks of
 * tokens_per_block tokens (a partial tail block is not hashed: only full
 * blocks are immutable).  Writes at most max hashes and returns how many
 * it wrote (>= 0) or -errno.
 */
int pol_hash_chain(uint64_t seed, uint64_t salt, const uint32_t *tokens,
		   size_t ntokens, uint32_t tokens_per_block, uint64_t *hashes,
		   size_t max);

#endif
