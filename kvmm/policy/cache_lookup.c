/* SPDX-License-Identifier: MIT */
/*
 * The tiered cache's lookups by block hash: a block, its tier, how many
 * of a request's blocks are new, the cached prefix of a request (with
 * the index slots it loads ahead).  Nothing here moves or changes a block.
 */
#include "kvmm/policy/pol_cache_priv.h"

void pol_cache_prefetch(const struct pol_cache *c, uint64_t hash)
{
	pol_index_prefetch(&c->ix, hash);
}

bool pol_cache_few_new(struct pol_cache *c, const uint64_t *hashes, uint32_t n)
{
	uint32_t unknown = 0;

	for (uint32_t i = 0; i < n && unknown <= POL_FEW_NEW_MAX; i++)
		unknown += pol_index_find(&c->ix, hashes[i]) == POL_NONE;
	return unknown >= 1 && unknown <= POL_FEW_NEW_MAX;
}

struct pol_block *pol_cache_lookup(struct pol_cache *c, uint64_t hash)
{
	uint32_t id = pol_index_find(&c->ix, hash);
	struct pol_block *b;

	if (id == POL_NONE)
		return NULL;
	b = pol_index_at(&c->ix, id);
	return b->tier == POL_TIER_NONE ? NULL : b;
}

unsigned pol_cache_tier_of(struct pol_cache *c, uint64_t hash)
{
	struct pol_block *b = pol_cache_lookup(c, hash);

	return b ? b->tier : POL_TIER_NONE;
}

/* Index slots loaded ahead of a prefix lookup (the request's blocks are
 * all accessed after it, so none is loaded in vain). */
#define PREFIX_AHEAD 8

size_t pol_cache_prefix(struct pol_cache *c, const uint64_t *hashes, size_t n)
{
	size_t k = 0;

	/* the slots of the next few hashes load while one is looked up */
	for (size_t i = 0; i < n && i < PREFIX_AHEAD; i++)
		pol_index_prefetch(&c->ix, hashes[i]);
	while (k < n && pol_cache_lookup(c, hashes[k])) {
		if (k + PREFIX_AHEAD < n)
			pol_index_prefetch(&c->ix, hashes[k + PREFIX_AHEAD]);
		k++;
	}
	return k;
}
