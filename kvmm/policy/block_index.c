/* SPDX-License-Identifier: MIT */
/*
 * Block index (see block_index.h): an entry array with a free list and an
 * open-addressing table of (hash, id) pairs.  The table slot of a hash is
 * chosen by a 64-bit finaliser (splitmix64) so that structured ids, like
 * the trace's small consecutive integers, spread evenly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/block_index.h"
#include "kvmm/policy/hmap.h"
#include "kvmm/policy/pol_mem.h"

const char *pol_tier_string(unsigned tier)
{
	switch (tier) {
	case POL_TIER_GPU:
		return "gpu";
	case POL_TIER_HOST:
		return "host";
	case POL_TIER_NVME:
		return "nvme";
	case POL_TIER_NONE:
		return "none";
	}
	return "?";
}

/*
 * Entries are cache-line aligned (see struct pol_block): the array is
 * mapped, so it is page aligned and grows without a copy.
 */
static size_t blocks_bytes(uint64_t n)
{
	return n * sizeof(struct pol_block);
}

static int table_alloc(struct pol_index *ix, uint64_t size)
{
	struct pol_index_slot *t = pol_mem_map(size * sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (uint64_t i = 0; i < size; i++)
		t[i].id = POL_NONE;
	ix->table = t;
	ix->mask = size - 1;
	return 0;
}

static void table_put(struct pol_index *ix, uint64_t hash, uint32_t id)
{
	uint64_t i = pol_mix64(hash) & ix->mask;

	while (ix->table[i].id != POL_NONE)
		i = (i + 1) & ix->mask;
	ix->table[i].hash = hash;
	ix->table[i].id = id;
}

int pol_index_init(struct pol_index *ix, uint32_t expected)
{
	uint64_t size = 64;

	memset(ix, 0, sizeof(*ix));
	while (size < 2ull * expected)
		size <<= 1;
	ix->cap_blocks = expected > 32 ? expected : 32;
	ix->blocks = pol_mem_map(blocks_bytes(ix->cap_blocks));
	if (!ix->blocks)
		return -ENOMEM;
	ix->free_head = POL_NONE;
	if (table_alloc(ix, size)) {
		pol_mem_unmap(ix->blocks, blocks_bytes(ix->cap_blocks));
		ix->blocks = NULL;
		return -ENOMEM;
	}
	return 0;
}

void pol_index_fini(struct pol_index *ix)
{
	pol_mem_unmap(ix->blocks, blocks_bytes(ix->cap_blocks));
	pol_mem_unmap(ix->table, (ix->mask + 1) * sizeof(*ix->table));
	memset(ix, 0, sizeof(*ix));
}

void pol_index_prefetch(const struct pol_index *ix, uint64_t hash)
{
	__builtin_prefetch(&ix->table[pol_mix64(hash) & ix->mask]);
}

uint32_t pol_index_find(const struct pol_index *ix, uint64_t hash)
{
	uint64_t i = pol_mix64(hash) & ix->mask;

	for (;;) {
		const struct pol_index_slot *s = &ix->table[i];

		if (s->id == POL_NONE)
			return POL_NONE;
		if (s->hash == hash)
			return s->id;
		i = (i + 1) & ix->mask;
	}
}

static int table_grow(struct pol_index *ix)
{
	struct pol_index_slot *old = ix->table;
	uint64_t old_size = ix->mask + 1;

	if (table_alloc(ix, old_size * 2)) {
		ix->table = old;
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < old_size; i++)
		if (old[i].id != POL_NONE)
			table_put(ix, old[i].hash, old[i].id);
	pol_mem_unmap(old, old_size * sizeof(*old));
	return 0;
}

static uint32_t entry_alloc(struct pol_index *ix)
{
	uint32_t id;

	if (ix->free_head != POL_NONE) {
		id = ix->free_head;
		ix->free_head = ix->blocks[id].slot[0].next;
		return id;
	}
	if (ix->high_water == ix->cap_blocks) {
		uint64_t ncap = (uint64_t)ix->cap_blocks * 2;
		struct pol_block *nb;

		if (ncap >= POL_NONE)
			ncap = POL_NONE - 1;
		if (ncap <= ix->cap_blocks)
			return POL_NONE;
		nb = pol_mem_remap(ix->blocks, blocks_bytes(ix->cap_blocks),
				   blocks_bytes(ncap));
		if (!nb)
			return POL_NONE;
		ix->blocks = nb;
		ix->cap_blocks = (uint32_t)ncap;
	}
	return ix->high_water++;
}

uint32_t pol_index_get(struct pol_index *ix, uint64_t hash, bool *created)
{
	uint32_t id = pol_index_find(ix, hash);
	struct pol_block *b;

	if (created)
		*created = false;
	if (id != POL_NONE)
		return id;
	if (2ull * (ix->nblocks + 1) > ix->mask + 1 && table_grow(ix))
		return POL_NONE;
	id = entry_alloc(ix);
	if (id == POL_NONE)
		return POL_NONE;
	b = &ix->blocks[id];
	memset(b, 0, sizeof(*b));
	b->hash = hash;
	b->tier = POL_TIER_NONE;
	b->counted = POL_TIER_NONE;
	b->next_use = UINT64_MAX;
	b->live = 1;
	b->parent_id = POL_NONE;
	for (int t = 0; t < POL_TIER_COUNT; t++)
		b->slot[t].prev = b->slot[t].next = POL_NONE;
	table_put(ix, hash, id);
	ix->nblocks++;
	if (created)
		*created = true;
	return id;
}

void pol_index_del(struct pol_index *ix, uint32_t id)
{
	uint64_t hash = ix->blocks[id].hash;
	uint64_t i = pol_mix64(hash) & ix->mask, j;

	while (ix->table[i].id != id)
		i = (i + 1) & ix->mask;
	/* Backward-shift deletion keeps every probe run unbroken. */
	j = i;
	for (;;) {
		uint64_t home;

		j = (j + 1) & ix->mask;
		if (ix->table[j].id == POL_NONE)
			break;
		home = pol_mix64(ix->table[j].hash) & ix->mask;
		/* Move j into the hole at i when its home is not in (i, j]. */
		if (((j - home) & ix->mask) >= ((j - i) & ix->mask)) {
			ix->table[i] = ix->table[j];
			i = j;
		}
	}
	ix->table[i].id = POL_NONE;
	ix->blocks[id].slot[0].next = ix->free_head;
	ix->blocks[id].tier = POL_TIER_NONE;
	ix->blocks[id].live = 0;
	ix->free_head = id;
	ix->nblocks--;
}
