/* SPDX-License-Identifier: MIT */
/*
 * ARC (Megiddo and Modha, FAST'03), one instance per tier of capacity c:
 * T1 holds blocks seen once recently, T2 blocks seen at least twice; the
 * ghost lists B1 and B2 remember the hashes recently evicted from each
 * (the entries are kept as history with pol_cache_hold()).  A block that
 * enters the tier while in B1 grows the target size p of T1, one in B2
 * shrinks it; the victim comes from T1 when |T1| > p (or == p after a B2
 * hit), else from T2, least recent first, skipping unevictable blocks.
 * A block that leaves the tier for any reason becomes a ghost.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/policy/policy.h"
#include "kvmm/policy/pol_util.h"

enum { ARC_NONE, ARC_T1, ARC_T2, ARC_B1, ARC_B2, ARC_NLISTS };

struct arc {
	struct pol_cache *c;
	struct pol_index *ix;
	unsigned tier;
	uint64_t cap;
	double p;
	bool last_from_b2;
	uint32_t incoming; /* block just inserted: REPLACE runs before it */
	struct pol_list l[ARC_NLISTS];
};

static int arc_create(struct pol_cache *c, unsigned tier, void **priv)
{
	struct arc *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	a->c = c;
	a->ix = pol_cache_index(c);
	a->tier = tier;
	a->cap = pol_cache_capacity(c, tier);
	a->incoming = POL_NONE;
	for (int i = 0; i < ARC_NLISTS; i++)
		pol_list_init(&a->l[i]);
	*priv = a;
	return 0;
}

static void arc_destroy(void *priv)
{
	free(priv);
}

static void move_to(struct arc *a, struct pol_block *b, int list)
{
	uint32_t id = pol_index_id(a->ix, b);
	struct pol_slot *s = &b->slot[a->tier];

	if (s->list != ARC_NONE)
		pol_list_unlink(a->ix, a->tier, &a->l[s->list], id);
	s->list = (uint8_t)list;
	if (list != ARC_NONE)
		pol_list_push_head(a->ix, a->tier, &a->l[list], id);
}

/* Forget the oldest ghost of a list (may free the entry). */
static void drop_ghost(struct arc *a, int list)
{
	uint32_t id = a->l[list].tail;
	struct pol_block *b;

	if (id == POL_NONE)
		return;
	b = pol_index_at(a->ix, id);
	move_to(a, b, ARC_NONE);
	pol_cache_release(a->c, b);
}

static void arc_insert(void *priv, struct pol_block *b)
{
	struct arc *a = priv;
	struct pol_slot *s = &b->slot[a->tier];
	double c = (double)a->cap;

	a->last_from_b2 = false;
	a->incoming = pol_index_id(a->ix, b);
	if (s->list == ARC_B1) {
		double d = a->l[ARC_B1].len ? (double)a->l[ARC_B2].len /
						      (double)a->l[ARC_B1].len :
					      1;
		a->p = a->p + (d > 1 ? d : 1);
		if (a->p > c)
			a->p = c;
		move_to(a, b, ARC_T2);
		pol_cache_release(a->c, b);
		return;
	}
	if (s->list == ARC_B2) {
		double d = a->l[ARC_B2].len ? (double)a->l[ARC_B1].len /
						      (double)a->l[ARC_B2].len :
					      1;
		a->p = a->p - (d > 1 ? d : 1);
		if (a->p < 0)
			a->p = 0;
		a->last_from_b2 = true;
		move_to(a, b, ARC_T2);
		pol_cache_release(a->c, b);
		return;
	}
	/* New to this tier: keep the ghost lists within ARC's bounds. */
	if (a->l[ARC_T1].len + a->l[ARC_B1].len >= a->cap)
		drop_ghost(a, ARC_B1);
	else if (a->l[ARC_T1].len + a->l[ARC_T2].len + a->l[ARC_B1].len +
			 a->l[ARC_B2].len >=
		 2 * a->cap)
		drop_ghost(a, ARC_B2);
	move_to(a, b, ARC_T1);
}

static void arc_access(void *priv, struct pol_block *b)
{
	struct arc *a = priv;

	a->incoming = POL_NONE;
	move_to(a, b, ARC_T2);
}

static void arc_remove(void *priv, struct pol_block *b)
{
	struct arc *a = priv;
	int from = b->slot[a->tier].list;

	move_to(a, b, from == ARC_T2 ? ARC_B2 : ARC_B1);
	pol_cache_hold(a->c, b);
	/* Ghost lists never exceed the capacity of the tier. */
	while (a->l[ARC_B1].len + a->l[ARC_B2].len > a->cap)
		drop_ghost(a, a->l[ARC_B1].len > a->l[ARC_B2].len ? ARC_B1 :
								    ARC_B2);
}

static struct pol_block *scan(struct arc *a, int list)
{
	for (uint32_t id = a->l[list].tail; id != POL_NONE;) {
		struct pol_block *b = pol_index_at(a->ix, id);

		if (id != a->incoming && pol_cache_evictable(a->c, b))
			return b;
		id = b->slot[a->tier].prev;
	}
	return NULL;
}

static struct pol_block *arc_victim(void *priv)
{
	struct arc *a = priv;
	double t1 = (double)a->l[ARC_T1].len;
	struct pol_block *v;

	int first = ARC_T2, second = ARC_T1;

	/* ARC's REPLACE, which runs before the incoming block is placed. */
	if (t1 >= 1 && (t1 > a->p || (a->last_from_b2 && t1 == a->p)))
		first = ARC_T1, second = ARC_T2;
	v = scan(a, first);
	if (!v)
		v = scan(a, second);
	if (!v && a->incoming != POL_NONE) {
		v = pol_index_at(a->ix, a->incoming);
		if (v->tier != a->tier || !pol_cache_evictable(a->c, v))
			v = NULL;
	}
	return v;
}

const struct pol_ops pol_arc_ops = {
	.name = "arc",
	.create = arc_create,
	.destroy = arc_destroy,
	.on_insert = arc_insert,
	.on_access = arc_access,
	.on_remove = arc_remove,
	.victim = arc_victim,
};
