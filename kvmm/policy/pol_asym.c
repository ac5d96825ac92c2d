/* SPDX-License-Identifier: MIT */
/*
 * asym: kernel-latency-aware eviction (GreedyDual-Size-Frequency with
 * aging, ranked by expected GPU time saved per byte).  Placeholder
 * ranking; see Documentation/policy.md for the full model.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/policy/pol_hpol.h"

struct asym {
	double clock; /* GDSF inflation value L */
};

static bool asym_before(const struct pol_block *a, const struct pol_block *b)
{
	if (a->slot[a->tier].key != b->slot[b->tier].key)
		return a->slot[a->tier].key < b->slot[b->tier].key;
	if (a->last_access != b->last_access)
		return a->last_access < b->last_access;
	return a->position > b->position;
}

static void asym_rekey(struct hpol *h, struct pol_block *b, enum hpol_event ev)
{
	struct asym *s = h->priv;
	double f = (b->flags & POL_BLOCK_PARTIAL) ? 0 : b->access_count;

	b->slot[h->tier].key = s->clock + f;
}

static void asym_victim_chosen(struct hpol *h, struct pol_block *b)
{
	struct asym *s = h->priv;

	if (b->slot[h->tier].key > s->clock)
		s->clock = b->slot[h->tier].key;
}

static const struct hpol_kind asym_kind = {
	.before = asym_before,
	.rekey = asym_rekey,
	.victim_chosen = asym_victim_chosen,
	.priv_size = sizeof(struct asym),
};

static int asym_create(struct pol_cache *c, unsigned tier, void **priv)
{
	return hpol_create(c, tier, &asym_kind, priv);
}

const struct pol_ops pol_asym_ops = {
	.name = "asym",
	.create = asym_create,
	.destroy = hpol_destroy,
	.on_insert = hpol_insert,
	.on_access = hpol_access,
	.on_remove = hpol_remove,
	.on_change = hpol_change,
	.victim = hpol_victim,
};
