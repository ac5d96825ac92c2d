/* SPDX-License-Identifier: MIT */
/*
 * Building blocks for policy implementations: intrusive doubly linked
 * lists and an indexed binary heap over block ids, both threaded through
 * a block's per-tier slot (struct pol_slot) so a policy needs no memory
 * of its own per block.  Ids, not pointers, because the entry array can
 * move when the index grows.
 */
#ifndef KVMM_POLICY_POL_UTIL_H
#define KVMM_POLICY_POL_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "kvmm/policy/block_index.h"

struct pol_list {
	uint32_t head, tail; /* head = most recent */
	uint64_t len;
};

void pol_list_init(struct pol_list *l);
void pol_list_push_head(struct pol_index *ix, unsigned tier, struct pol_list *l,
			uint32_t id);
void pol_list_unlink(struct pol_index *ix, unsigned tier, struct pol_list *l,
		     uint32_t id);

/*
 * Heap order: lexicographic on (k1, k2, k3), smallest at the root.  The
 * keys live in the heap nodes, so sifting never touches the blocks (one
 * cache miss per block saved at every level: what makes a 1M-entry heap
 * fast enough).
 */
struct pol_heap_node {
	double k1;
	uint64_t k2;
	uint32_t k3;
	uint32_t id;
};

/* Fill a node's keys for a block. */
typedef void (*pol_heap_key)(const struct pol_block *b, unsigned tier,
			     struct pol_heap_node *n);

struct pol_heap {
	struct pol_heap_node *nodes;
	uint32_t n, cap;
	/*
	 * Position of each block id in nodes (POL_NONE: absent): a dense
	 * array rather than a field of the 200-byte block, so the writes
	 * of every sift step stay within a few MB.
	 */
	uint32_t *pos;
	uint32_t npos;
	unsigned tier;
	struct pol_index *ix;
	pol_heap_key key;
};

int pol_heap_init(struct pol_heap *h, struct pol_index *ix, unsigned tier,
		  pol_heap_key key);
/* A pol_heap_key: the block's slot key in tier alone (a recency number
 * in lru and arc: their returned blocks, least recent on top). */
void pol_heap_key_slot(const struct pol_block *b, unsigned tier,
		       struct pol_heap_node *n);
void pol_heap_fini(struct pol_heap *h);
bool pol_heap_contains(const struct pol_heap *h, uint32_t id);
int pol_heap_push(struct pol_heap *h, uint32_t id);
void pol_heap_remove(struct pol_heap *h, uint32_t id);
/* Restore order after the keys of id changed (recomputes them). */
void pol_heap_update(struct pol_heap *h, uint32_t id);
static inline uint32_t pol_heap_top(const struct pol_heap *h)
{
	return h->n ? h->nodes[0].id : POL_NONE;
}

#endif
