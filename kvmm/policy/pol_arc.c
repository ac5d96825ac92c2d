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
 *
 * Blocks that cannot go while they are pinned or referenced leave T1 and
 * T2's linked lists (parked; still counted in |T1| and |T2|, which the
 * adaptation reads) so that a decision never walks past them, as lru
 * does (pol_lru.c): a block's place in the recency order is a number
 * taken when it goes to a list's head (slot.key), and a released block
 * goes back to the head when nothing in its list is more recent, else
 * into a heap of its list's returned blocks ordered by that number.  A
 * list's least recent block is the older of its linked tail and its
 * heap's top, the block the single list gave: every decision is the
 * one before, with or without holds.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvmm/policy/policy.h"
#include "kvmm/policy/pol_util.h"

enum { ARC_NONE, ARC_T1, ARC_T2, ARC_B1, ARC_B2, ARC_NLISTS };

/* slot.flags of a block in T1 or T2: where it is (0: linked) */
enum { ARC_PARKED = 1, ARC_BACK = 2 };

struct arc {
	struct pol_cache *c;
	struct pol_index *ix;
	unsigned tier;
	uint64_t cap;
	double p;
	bool last_from_b2;
	uint32_t incoming; /* block just inserted: REPLACE runs before it */
	struct pol_list l[ARC_NLISTS];
	/* T1's and T2's returned blocks (back[list - ARC_T1]), least
	 * recent on top */
	struct pol_heap back[2];
	/* blocks of T1 and T2 that are not linked (parked or returned) */
	uint64_t out[ARC_NLISTS];
	uint64_t seq; /* the next recency number */
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
	if (pol_heap_init(&a->back[0], a->ix, tier, pol_heap_key_slot))
		goto err_free;
	if (pol_heap_init(&a->back[1], a->ix, tier, pol_heap_key_slot))
		goto err_back0;
	*priv = a;
	return 0;
err_back0:
	pol_heap_fini(&a->back[0]);
err_free:
	free(a);
	return -ENOMEM;
}

static void arc_destroy(void *priv)
{
	struct arc *a = priv;

	pol_heap_fini(&a->back[0]);
	pol_heap_fini(&a->back[1]);
	free(a);
}

static bool held(const struct pol_block *b)
{
	return b->pins || b->refcount;
}

/* Blocks in a list, linked or not: |T1|, |T2| (ghosts are all linked). */
static uint64_t len(const struct arc *a, int list)
{
	return a->l[list].len + a->out[list];
}

/*
 * Take b out of its list's structures (slot.list stays).  Inline: out of
 * line it costs every move 10 instructions (callgrind, bench/policy).
 */
static inline __attribute__((always_inline)) void
take_out(struct arc *a, struct pol_block *b, uint32_t id)
{
	struct pol_slot *s = &b->slot[a->tier];

	if (s->list == ARC_NONE)
		return;
	if (s->flags == ARC_BACK)
		pol_heap_remove(&a->back[s->list - ARC_T1], id);
	if (s->flags)
		a->out[s->list]--;
	else
		pol_list_unlink(a->ix, a->tier, &a->l[s->list], id);
	s->flags = 0;
}

/* To the head of list (the most recent of it), or parked if held. */
static void move_to(struct arc *a, struct pol_block *b, int list)
{
	uint32_t id = pol_index_id(a->ix, b);
	struct pol_slot *s = &b->slot[a->tier];

	take_out(a, b, id);
	s->list = (uint8_t)list;
	if (list == ARC_NONE)
		return;
	if (list == ARC_T1 || list == ARC_T2) {
		s->key = (double)a->seq++;
		if (held(b)) {
			s->flags = ARC_PARKED;
			a->out[list]++;
			return;
		}
	}
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
	if (len(a, ARC_T1) + a->l[ARC_B1].len >= a->cap)
		drop_ghost(a, ARC_B1);
	else if (len(a, ARC_T1) + len(a, ARC_T2) + a->l[ARC_B1].len +
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

/* A pin or a reference came or went: park b, or bring it back in order. */
static void arc_change(void *priv, struct pol_block *b)
{
	struct arc *a = priv;
	struct pol_slot *s = &b->slot[a->tier];
	uint32_t id = pol_index_id(a->ix, b);
	int list = s->list;

	if (b->tier != a->tier || (list != ARC_T1 && list != ARC_T2))
		return;
	if (held(b)) {
		if (s->flags != ARC_PARKED) {
			take_out(a, b, id);
			s->flags = ARC_PARKED;
			a->out[list]++;
		}
		return;
	}
	if (s->flags != ARC_PARKED)
		return;
	if (a->l[list].head == POL_NONE ||
	    pol_index_at(a->ix, a->l[list].head)->slot[a->tier].key < s->key) {
		a->out[list]--;
		s->flags = 0;
		pol_list_push_head(a->ix, a->tier, &a->l[list], id);
	} else if (!pol_heap_push(&a->back[list - ARC_T1], id)) {
		s->flags = ARC_BACK;
	} else {
		/* no memory for the heap: the head, out of order */
		a->out[list]--;
		s->flags = 0;
		pol_list_push_head(a->ix, a->tier, &a->l[list], id);
	}
}

static bool may_go(const struct arc *a, uint32_t id, const struct pol_block *b)
{
	return id != a->incoming && pol_cache_evictable(a->c, b);
}

/* The least recent block of list's returned ones that may go (their
 * heap's top, unless a TTL or the cache holds it: then all of them). */
static struct pol_block *back_victim(struct arc *a, int list)
{
	struct pol_heap *h = &a->back[list - ARC_T1];
	struct pol_block *best = NULL;
	uint32_t id = pol_heap_top(h);

	if (id == POL_NONE)
		return NULL;
	best = pol_index_at(a->ix, id);
	if (may_go(a, id, best))
		return best;
	best = NULL;
	for (uint32_t i = 0; i < h->n; i++) {
		struct pol_block *b = pol_index_at(a->ix, h->nodes[i].id);

		if ((!best || b->slot[a->tier].key < best->slot[a->tier].key) &&
		    may_go(a, h->nodes[i].id, b))
			best = b;
	}
	return best;
}

/* The least recent block of list that may go. */
static struct pol_block *scan(struct arc *a, int list)
{
	struct pol_block *v = NULL, *r;

	for (uint32_t id = a->l[list].tail; id != POL_NONE;) {
		struct pol_block *b = pol_index_at(a->ix, id);

		if (may_go(a, id, b)) {
			v = b;
			break;
		}
		id = b->slot[a->tier].prev;
	}
	r = back_victim(a, list);
	if (r && (!v || r->slot[a->tier].key < v->slot[a->tier].key))
		v = r;
	return v;
}

static struct pol_block *arc_victim(void *priv)
{
	struct arc *a = priv;
	double t1 = (double)len(a, ARC_T1);
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

/* The tier's capacity changed (pol_cache_set_capacity()): the target
 * and the ghost lists follow the new one from the next insert. */
static void arc_capacity(void *priv)
{
	struct arc *a = priv;

	a->cap = pol_cache_capacity(a->c, a->tier);
	if (a->p > (double)a->cap)
		a->p = (double)a->cap;
}

const struct pol_ops pol_arc_ops = {
	.name = "arc",
	.create = arc_create,
	.destroy = arc_destroy,
	.on_insert = arc_insert,
	.on_access = arc_access,
	.on_remove = arc_remove,
	.on_change = arc_change,
	.victim = arc_victim,
	.on_capacity = arc_capacity,
};
