/* SPDX-License-Identifier: MIT */
/* Heap-ranked policy skeleton (see pol_hpol.h), plus lfu and belady. */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/policy/pol_hpol.h"

int hpol_create(struct pol_cache *c, unsigned tier, const struct hpol_kind *k,
		void **priv)
{
	struct hpol *h = calloc(1, sizeof(*h) + k->priv_size);

	if (!h)
		return -ENOMEM;
	h->c = c;
	h->ix = pol_cache_index(c);
	h->tier = tier;
	h->kind = k;
	h->priv = h + 1;
	if (pol_heap_init(&h->heap, h->ix, tier, k->key)) {
		free(h);
		return -ENOMEM;
	}
	*priv = h;
	return 0;
}

void hpol_destroy(void *priv)
{
	struct hpol *h = priv;

	pol_heap_fini(&h->heap);
	free(h->stash);
	free(h);
}

/*
 * In the heap exactly while b is a leaf of this tier that is not pinned
 * or referenced, with its current keys: one heap operation
 * (pol_heap_push() of a member re-sorts it).  Pinned and referenced
 * blocks are out (a decision never steps over them, however many there
 * are) and come back where their keys put them; a TTL expires without a
 * call, so TTL'd blocks stay in and the victim search sets them aside.
 */
static void sync_membership(struct hpol *h, struct pol_block *b)
{
	uint32_t id = pol_index_id(h->ix, b);

	if (b->tier == h->tier && !b->pins && !b->refcount &&
	    pol_cache_is_leaf(h->c, b))
		pol_heap_push(&h->heap, id);
	else
		pol_heap_remove(&h->heap, id);
}

void hpol_insert(void *priv, struct pol_block *b)
{
	struct hpol *h = priv;

	h->kind->rekey(h, b, HPOL_INSERT);
	sync_membership(h, b);
}

void hpol_access(void *priv, struct pol_block *b)
{
	struct hpol *h = priv;

	h->kind->rekey(h, b, HPOL_ACCESS);
	sync_membership(h, b);
}

void hpol_remove(void *priv, struct pol_block *b)
{
	struct hpol *h = priv;
	uint32_t id = pol_index_id(h->ix, b), top = pol_heap_top(&h->heap);

	pol_heap_remove(&h->heap, id);
	/* The victim went: its successor at the top is likely the next. */
	if (id == top && (top = pol_heap_top(&h->heap)) != POL_NONE)
		pol_index_prefetch_entry(h->ix, top, 0);
}

void hpol_change(void *priv, struct pol_block *b)
{
	struct hpol *h = priv;

	sync_membership(h, b);
}

static int stash_push(struct hpol *h, uint32_t id)
{
	if (h->nstash == h->cap_stash) {
		uint32_t ncap = h->cap_stash ? 2 * h->cap_stash : 64;
		uint32_t *n = realloc(h->stash, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		h->stash = n;
		h->cap_stash = ncap;
	}
	h->stash[h->nstash++] = id;
	return 0;
}

struct pol_block *hpol_victim(void *priv)
{
	struct hpol *h = priv;
	struct pol_block *v = NULL;
	uint32_t id;

	while ((id = pol_heap_top(&h->heap)) != POL_NONE) {
		struct pol_block *b = pol_index_at(h->ix, id);

		if (pol_cache_evictable(h->c, b)) {
			v = b;
			break;
		}
		/* A live TTL (or set aside by the cache): out of the way
		 * while we look further. */
		if (stash_push(h, id))
			break;
		pol_heap_remove(&h->heap, id);
	}
	while (h->nstash)
		pol_heap_push(&h->heap, h->stash[--h->nstash]);
	if (v && h->kind->victim_chosen)
		h->kind->victim_chosen(h, v);
	return v;
}

/*
 * The ops of a heap-ranked policy: its name and its create (which picks
 * the kind it ranks by) around this skeleton's hooks, the same for every
 * one, so that a hook the skeleton gains reaches each of them.
 */
#define HPOL_OPS(policy_name, create_fn)                            \
	{                                                           \
		.name = (policy_name), .create = (create_fn),       \
		.destroy = hpol_destroy, .on_insert = hpol_insert,  \
		.on_access = hpol_access, .on_remove = hpol_remove, \
		.on_change = hpol_change, .victim = hpol_victim,    \
	}

/*
 * LFU: fewest accesses since the block was first seen (the count survives
 * demotion to a lower tier), least recently used first among equals.
 * Recency is the cache's access counter (b->tick), not the owner's clock
 * (b->last_access): the clock is coarse (the replay's request number, so
 * a request's blocks would tie and go in whatever order the heap's history
 * left them) and means something else in kvmmd (ns, read when a restore
 * settles rather than when the prefix was opened), so kvmmd and
 * kvmm-replay --model-daemon, which make the same calls, ranked equal
 * counts differently (policy.md, "--model-daemon").  Ticks are unique.
 */
static void lfu_key(const struct pol_block *b, unsigned tier,
		    struct pol_heap_node *n)
{
	n->k1 = b->access_count;
	n->k2 = b->tick;
	n->k3 = 0;
}

static void lfu_rekey(struct hpol *h, struct pol_block *b, enum hpol_event ev)
{
}

static const struct hpol_kind lfu_kind = {
	.key = lfu_key,
	.rekey = lfu_rekey,
};

static int lfu_create(struct pol_cache *c, unsigned tier, void **priv)
{
	return hpol_create(c, tier, &lfu_kind, priv);
}

const struct pol_ops pol_lfu_ops = HPOL_OPS("lfu", lfu_create);

/*
 * Belady (offline): evict the block whose next use is farthest in the
 * future; among equal next uses the deepest block, so a parent never
 * goes before a child that is used no earlier.
 */
static void belady_key(const struct pol_block *b, unsigned tier,
		       struct pol_heap_node *n)
{
	/* farthest next use first, exact in k2; then the deepest */
	n->k1 = 0;
	n->k2 = UINT64_MAX - b->next_use;
	n->k3 = UINT32_MAX - b->position;
}

static const struct hpol_kind belady_kind = {
	.key = belady_key,
	.rekey = lfu_rekey,
};

/*
 * With Multi-Segment Attention (pol_cache_msa()) a miss costs the
 * recomputation of that block alone, which grows with its position, and
 * a cached child is used without its parent: among equal next uses the
 * shallowest block goes first (the same hits, the cheaper misses).
 */
static void belady_msa_key(const struct pol_block *b, unsigned tier,
			   struct pol_heap_node *n)
{
	n->k1 = 0;
	n->k2 = UINT64_MAX - b->next_use;
	n->k3 = b->position;
}

static const struct hpol_kind belady_msa_kind = {
	.key = belady_msa_key,
	.rekey = lfu_rekey,
};

static int belady_create(struct pol_cache *c, unsigned tier, void **priv)
{
	return hpol_create(c, tier,
			   pol_cache_msa(c) ? &belady_msa_kind : &belady_kind,
			   priv);
}

const struct pol_ops pol_belady_ops = HPOL_OPS("belady", belady_create);
