/* SPDX-License-Identifier: MIT */
/*
 * Block identity in the public API (kvmm.h): kvmm_hash_* are the policy
 * library's pol_hash_* (kvmm/policy/block_hash.c, the daemon's and
 * kvmm-replay's) behind checks an engine's caller needs, so there is one
 * implementation of the hashed byte layout.  No connection is involved.
 */
#include <errno.h>
#include <string.h>

#include "kvmm/lib/client.h"
#include "kvmm/lib/opts.h"
#include "kvmm/kvmm.h"
#include "kvmm/policy/block_hash.h"

static int layout_seed(const char *model, uint32_t layers, uint32_t kv_heads,
		       uint32_t head_dim, uint32_t dtype_bytes,
		       uint32_t tokens_per_block, uint64_t *seed)
{
	struct pol_hash_layout pl = {
		.size = sizeof(pl),
		.model = model,
		.layers = layers,
		.kv_heads = kv_heads,
		.head_dim = head_dim,
		.dtype_bytes = dtype_bytes,
		.tokens_per_block = tokens_per_block,
	};

	/* A zero field is no region's layout: a caller's mistake. */
	if (!seed || !layers || !kv_heads || !head_dim || !dtype_bytes ||
	    !tokens_per_block)
		return -EINVAL;
	return pol_hash_seed(&pl, seed);
}

int kvmm_hash_seed(const struct kvmm_hash_layout *layout, uint64_t *seed)
{
	struct kvmm_hash_layout l = { 0 };
	size_t n;
	int err;

	if (!layout)
		return -EINVAL;
	/* A newer caller's struct: its extra fields would change the seed,
	 * so they must be zero (-E2BIG otherwise, opts.h). */
	err = kc_opts_size(layout, layout->size, KVMM_HASH_LAYOUT_SIZE_VER0,
			   sizeof(l), &n);
	if (err)
		return err;
	memcpy(&l, layout, n);
	/* Not hashed, so a nonzero value (a newer caller's field where the
	 * padding was) would be ignored: refuse it as a byte past the struct
	 * is refused. */
	if (l.reserved)
		return -E2BIG;
	return layout_seed(l.model, l.layers, l.kv_heads, l.head_dim,
			   l.dtype_bytes, l.tokens_per_block, seed);
}

int kvmm_region_hash_seed(const struct kvmm_region *r, const char *model,
			  uint64_t *seed)
{
	if (!r)
		return -EINVAL;
	return layout_seed(model, r->layers, r->kv_heads, r->head_dim,
			   r->dtype_bytes, r->tokens_per_block, seed);
}

int kvmm_block_hash(uint64_t seed, uint64_t parent, uint64_t salt,
		    const uint32_t *tokens, size_t ntokens, uint64_t *hash)
{
	if (!tokens || !ntokens || !hash)
		return -EINVAL;
	return pol_block_hash(seed, parent, salt, tokens, ntokens, hash);
}

int kvmm_hash_chain(uint64_t seed, uint64_t salt, const uint32_t *tokens,
		    size_t ntokens, uint32_t tokens_per_block, uint64_t *hashes,
		    size_t max)
{
	int ret = pol_hash_chain(seed, salt, tokens, ntokens, tokens_per_block,
				 hashes, max);

	/* Too short for a block still says hashing is unavailable. */
	if (ret >= 0 && !HAVE_LIBXXHASH)
		return -ENOTSUP;
	return ret;
}
