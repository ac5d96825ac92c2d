/* SPDX-License-Identifier: MIT */
/*
 * Shared skeleton of the heap-ranked policies (lfu, belady; asym ranks
 * its blocks in lists of its own, pol_asym.c): a
 * per-tier heap of the blocks that may be evicted structurally (every
 * block without the prefix rule, the leaves with it), ordered by a
 * policy-specific rule; pinned or TTL-pinned blocks at the top are set
 * aside while a victim is chosen.  The policy supplies the order and a
 * rekey hook that updates slot[tier].key on insert and access.
 */
#ifndef KVMM_POLICY_POL_HPOL_H
#define KVMM_POLICY_POL_HPOL_H

#include "kvmm/policy/policy.h"
#include "kvmm/policy/pol_util.h"

struct hpol;

enum hpol_event { HPOL_INSERT, HPOL_ACCESS };

struct hpol_kind {
	pol_heap_key key;
	void (*rekey)(struct hpol *h, struct pol_block *b, enum hpol_event ev);
	void (*victim_chosen)(struct hpol *h, struct pol_block *b);
	size_t priv_size;
};

struct hpol {
	struct pol_cache *c;
	struct pol_index *ix;
	unsigned tier;
	struct pol_heap heap;
	const struct hpol_kind *kind;
	uint32_t *stash;
	uint32_t nstash, cap_stash;
	void *priv; /* kind-specific, priv_size bytes */
};

int hpol_create(struct pol_cache *c, unsigned tier, const struct hpol_kind *k,
		void **priv);
void hpol_destroy(void *priv);
void hpol_insert(void *priv, struct pol_block *b);
void hpol_access(void *priv, struct pol_block *b);
void hpol_remove(void *priv, struct pol_block *b);
void hpol_change(void *priv, struct pol_block *b);
struct pol_block *hpol_victim(void *priv);

#endif
