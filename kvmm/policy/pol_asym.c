/* SPDX-License-Identifier: MIT */
/*
 * asym: eviction by learned return hazard over the leaves of the prefix
 * tree.
 *
 * Every block is in one class: the conversation turn of the request that
 * last used it (turn + access_count - 1, b->turn being the turn that
 * created it; for a linear session every block of a request gets the
 * request's turn), capped at TURNS, and whether that request was short
 * (brought at most POL_FEW_NEW_MAX blocks the cache did not know:
 * pol_cache_few_new(), b->few_new).  Later turns come back more often:
 * the longer a conversation, the likelier its next turn; and a short
 * follow-up message means a conversation in progress more often than a
 * new long document does.  Both are learned, not assumed: a split that
 * tells nothing gives two classes with the same hazard.
 *
 * Per class asym learns online how long blocks stay away, from the
 * returns of every use in a ring of the last uses (whether the policy
 * kept the block or not), and values keeping a block of class c at age a
 * by its Gittins index v_c(a), the best rate of hits per unit of cache
 * time it can still bring (pol_asym_stats.c has the estimator and the
 * index): a young chain whose class usually comes back after a few
 * minutes keeps its value through the quiet first minute, and an old
 * chain that should have come back by now loses it.  Ages past the
 * history have no data and value 0.  The victim is the block with the
 * lowest
 *
 *   v_c(age(b)) * 2^(priority(b) / 8),   -1 for a partial tail block
 *
 * (its hash changes when the sequence grows, it cannot be hit again);
 * among equals the cheaper miss (from the last tier the shallower block,
 * recomputation grows with the position), then the least recent.  The
 * miss cost is deliberately not a weight: weighting the leaves by their
 * recompute cost protects the deep leaves of long chains and lets short
 * chains go first, which loses hits and prefill time (Documentation/
 * policy.md has the figures).
 *
 * Ranking: each tier keeps one list per class of the blocks that may be
 * evicted structurally (with the prefix rule, the leaves: a hit stops at
 * the first missing block, so a chain is eaten from its end) and are
 * neither pinned nor referenced (parked while held: an open sequence's
 * blocks are never walked past), in the order of last use, the least
 * recent at the tail; a block that joins a list later (a parent whose
 * last child went, a block demoted into a lower tier, a block whose
 * last pin or reference went) is put in order of its last use, found
 * through the lists' end windows (pol_asym_win.c).  The candidate of a
 * list is the block of the lowest value among its SCAN_TAIL least
 * recent ones (the value of a class is not monotone in age: it rises
 * through the quiet time before the class's usual return, so the tail is
 * not always the lowest), valued from the tail window's keys alone and
 * kept while nothing it was chosen among changes; if that block may not
 * go (a TTL, or the cache set it aside), the first evictable block from
 * the tail: O(classes) per eviction, plus O(1) upkeep when a block
 * enters or leaves the reach.
 *
 * Nothing is fitted to one trace: the hazards are learned, the classes
 * come from the prefix tree.
 *
 * This file keeps the lists and their candidates and is the pol_ops;
 * pol_asym_victim.c chooses the victims, pol_asym_stats.c learns the
 * hazards and the values, pol_asym_win.c keeps the end windows, and
 * pol_asym_priv.h holds what they share.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "kvmm/policy/pol_asym_priv.h"

/* --- the candidates: the lowest value near each list's tail --- */

static inline uint64_t slot_tick(const struct asym_wslot *e)
{
	return (uint64_t)(e->key + (int64_t)(e->pos & ~WPOS_PARTIAL));
}

/*
 * The value of a whole block of class k in age bucket x: infinite at
 * age 0, so that within a list's window the block being admitted is
 * never chosen over an older one (in kvmmd its sequence holds it, and
 * demoting it means a copy of pages in use); alone in its window it is
 * still the list's candidate, valued by block_value().
 */
static inline double class_value(const struct asym *s, unsigned k, unsigned x)
{
	return x ? s->st->value[k][x] : HUGE_VAL;
}

/*
 * The value of the block in window slot e of list l at tick now (of its
 * class at its age; -1 for a partial block), read from the slot alone (a
 * block's tick is its key + position), and in *bound the tick at which
 * its age bucket changes.  For a valid candidate only: an age in the
 * candidate's bucket, most of the reach, is valued without finding its
 * bucket.
 */
static inline double slot_value(const struct asym *s, const struct asym_list *l,
				const struct asym_wslot *e, uint64_t now,
				uint64_t *bound)
{
	const struct asym_cand *c = &l->cand;
	uint64_t tick = slot_tick(e), a = now - tick;
	double v;

	if (a - c->alo < c->awid) {
		*bound = tick + c->alo + c->awid;
		v = c->xv;
	} else {
		unsigned x = age_bucket(a);

		*bound = x + 1 < AGE_BUCKETS ? tick + bucket_start(x + 1) :
					       UINT64_MAX;
		v = class_value(s, (unsigned)(l - s->list), x);
	}
	return e->pos & WPOS_PARTIAL ? -1 : v;
}

/*
 * Make index i of l's tail window, of value v, the candidate; `fresh`:
 * its bucket must be found (the values were rebuilt, or the candidate
 * was not valid), else only if it is not the old candidate's.
 */
void asym_cand_set(const struct asym *s, struct asym_list *l, uint32_t i,
		   double v, uint64_t now, bool fresh)
{
	struct asym_cand *c = &l->cand;
	const struct asym_wslot *e = win_at(&l->tw, i);
	uint64_t a;

	c->id = e->id;
	c->idx = i;
	c->valued = false;
	c->tick = slot_tick(e);
	c->v = v;
	a = now - c->tick;
	if (fresh || a - c->alo >= c->awid) {
		unsigned x = age_bucket(a);

		c->x = x;
		c->alo = bucket_start(x);
		c->awid = x + 1 < AGE_BUCKETS ? bucket_start(x + 1) - c->alo :
						0;
		c->xv = class_value(s, (unsigned)(l - s->list), x);
	}
}

/*
 * Block id left index i (< SCAN_TAIL) of list l's tail window: keep the
 * candidate up to date without a new scan where that is certain (true).
 * The block that comes into reach at the far end is the new candidate if
 * it is lower; otherwise the candidate stays, or, if it was the block
 * that left, the next block in its place takes over if it has the same
 * value (the candidate was the first lowest from the tail: none before
 * it is as low, none after it lower).
 */
static bool cand_removed(struct asym *s, struct asym_list *l, uint32_t id,
			 uint32_t i)
{
	struct asym_cand *c = &l->cand;
	uint32_t n = l->tw.n;
	uint64_t now, bi, be;
	double vi, ve;

	/* the tick (a call) only for a candidate of this window */
	if (c->ver != l->tw_ver)
		return false;
	now = pol_cache_ticks(s->c);
	if (now >= c->until)
		return false;
	if (n >= SCAN_TAIL) {
		const struct asym_wslot *e = win_at(&l->tw, SCAN_TAIL - 1);

		ve = slot_value(s, l, e, now, &be);
		if (ve < c->v) {
			c->until = be < c->until ? be : c->until;
			asym_cand_set(s, l, SCAN_TAIL - 1, ve, now, false);
			return true;
		}
		if (be < c->until)
			c->until = be;
	}
	/* another block left: the candidate stays the first lowest */
	if (c->id != id) {
		c->idx -= i < c->idx;
		return true;
	}
	if (i < n && i < SCAN_TAIL) {
		const struct asym_wslot *e = win_at(&l->tw, i);

		vi = slot_value(s, l, e, now, &bi);
		if (vi == c->v) {
			c->until = bi < c->until ? bi : c->until;
			asym_cand_set(s, l, i, vi, now, false);
			return true;
		}
	}
	return false;
}

/*
 * A block entered index i (< SCAN_TAIL) of list l's tail window: the new
 * candidate if it is lower than the one there, or as low and before it.
 */
static bool cand_inserted(struct asym *s, struct asym_list *l, uint32_t i)
{
	struct asym_cand *c = &l->cand;
	uint64_t now, b;
	double v;

	if (c->ver != l->tw_ver)
		return false;
	now = pol_cache_ticks(s->c);
	if (now >= c->until)
		return false;
	c->idx += i <= c->idx;
	if (c->idx >= SCAN_TAIL)
		return false; /* pushed out of reach */
	v = slot_value(s, l, win_at(&l->tw, i), now, &b);
	if (b < c->until)
		c->until = b;
	if (v < c->v || (v == c->v && i < c->idx))
		asym_cand_set(s, l, i, v, now, false);
	return true;
}

/* --- lists --- */

static void list_unlink(struct asym *s, uint32_t id)
{
	struct pol_slot *x = SLOT(s, id);
	struct asym_list *l = &s->list[x->list - 1];
	bool refill = l->len > WIN;

	if (x->flags & WIN_HEAD)
		win_remove(&l->hw, win_find(&l->hw, id));
	if (x->flags & WIN_TAIL) {
		uint32_t i = win_find(&l->tw, id);

		win_remove(&l->tw, i);
		if (i < SCAN_TAIL && !cand_removed(s, l, id, i))
			l->tw_ver++;
	}
	if (x->prev != POL_NONE)
		SLOT(s, x->prev)->next = x->next;
	else
		l->head = x->next;
	if (x->next != POL_NONE)
		SLOT(s, x->next)->prev = x->prev;
	else
		l->tail = x->prev;
	/* a window that lost a block takes the next one beyond it */
	if (refill && (x->flags & WIN_HEAD))
		win_refill(s, &l->hw, WIN_HEAD,
			   SLOT(s, win_at(&l->hw, WIN - 2)->id)->next);
	if (refill && (x->flags & WIN_TAIL))
		win_refill(s, &l->tw, WIN_TAIL,
			   SLOT(s, win_at(&l->tw, WIN - 2)->id)->prev);
	/*
	 * A new tail is the next victim of this list: start loading its
	 * parent (whose child counts its eviction changes) and the block
	 * before it (the tail after it).
	 */
	if (x->next == POL_NONE && l->tw.n > 0) {
		uint32_t pid = pol_index_at(s->ix, l->tail)->parent_id;

		if (pid < s->ix->high_water)
			pol_index_prefetch_entry(s->ix, pid, 1);
		if (l->tw.n > 1)
			win_prefetch(s, win_at(&l->tw, 1)->id);
	}
	if (!--l->len)
		s->nonempty &= ~(1u << (x->list - 1));
	x->prev = x->next = POL_NONE;
	x->list = 0;
	x->flags = 0;
	asym_win_check(s, l);
}

/* Insert id into list k at p. */
static void list_insert(struct asym *s, unsigned k, uint32_t id,
			struct asym_place p)
{
	struct pol_slot *x = SLOT(s, id);
	struct asym_list *l = &s->list[k];
	uint32_t after = p.after;
	struct asym_wslot e;
	uint32_t hi, ti;

	/*
	 * its index from the head and from the tail, if in the windows: the
	 * windows hold the first and the last WIN blocks, so one index
	 * gives the other
	 */
	if (after == POL_NONE) {
		hi = 0;
		ti = l->len < WIN ? (uint32_t)l->len : WIN;
	} else {
		uint64_t at = p.at, back;

		if (at == UINT64_MAX) {
			uint8_t af = SLOT(s, after)->flags;

			if (af & WIN_HEAD)
				at = win_find(&l->hw, after);
			else if (af & WIN_TAIL)
				at = l->len - 1 - win_find(&l->tw, after);
		}
		back = l->len - 1 - at; /* from the tail (at known) */
		hi = at < WIN ? (uint32_t)at + 1 : WIN;
		ti = at != UINT64_MAX && back < WIN ? (uint32_t)back : WIN;
#ifdef POL_ASYM_CHECK
		assert(hi == (SLOT(s, after)->flags & WIN_HEAD ?
				      win_find(&l->hw, after) + 1 :
				      WIN));
		assert(ti == (SLOT(s, after)->flags & WIN_TAIL ?
				      win_find(&l->tw, after) :
				      WIN));
#endif
	}
	win_slot(pol_index_at(s->ix, id), id, &e);
	x->flags = 0;
	win_enter(s, &l->hw, WIN_HEAD, hi, &e);
	win_enter(s, &l->tw, WIN_TAIL, ti, &e);
	if (ti < SCAN_TAIL && !cand_inserted(s, l, ti))
		l->tw_ver++;
	l->len++;
	s->nonempty |= 1u << k;
	x->list = (uint8_t)(k + 1);
	if (after == POL_NONE) {
		x->prev = POL_NONE;
		x->next = l->head;
		if (l->head != POL_NONE)
			SLOT(s, l->head)->prev = id;
		else
			l->tail = id;
		l->head = id;
		asym_win_check(s, l);
		return;
	}
	x->prev = after;
	x->next = SLOT(s, after)->next;
	if (x->next != POL_NONE)
		SLOT(s, x->next)->prev = id;
	else
		l->tail = id;
	SLOT(s, after)->next = id;
	asym_win_check(s, l);
}

/*
 * Put id in the place of pid in list k: what inserting id right behind
 * pid and then unlinking pid does, in one step (same links, same
 * windows with id's key in pid's slots, same length), without the
 * window shifts and refills of the two.
 */
static void list_replace(struct asym *s, unsigned k, uint32_t pid, uint32_t id)
{
	struct pol_slot *x = SLOT(s, id), *y = SLOT(s, pid);
	struct asym_list *l = &s->list[k];
	struct asym_wslot e;

	win_slot(pol_index_at(s->ix, id), id, &e);
	if (y->flags & WIN_HEAD) {
		*win_at(&l->hw, win_find(&l->hw, pid)) = e;
		win_bound(&l->hw, &e);
	}
	if (y->flags & WIN_TAIL) {
		uint32_t i = win_find(&l->tw, pid);

		*win_at(&l->tw, i) = e;
		win_bound(&l->tw, &e);
		l->tw_ver += i < SCAN_TAIL;
	}
	x->prev = y->prev;
	x->next = y->next;
	x->list = (uint8_t)(k + 1);
	x->flags = y->flags;
	if (x->prev != POL_NONE)
		SLOT(s, x->prev)->next = id;
	else
		l->head = id;
	if (x->next != POL_NONE)
		SLOT(s, x->next)->prev = id;
	else
		l->tail = id;
	y->prev = y->next = POL_NONE;
	y->list = 0;
	y->flags = 0;
	asym_win_check(s, l);
}

/*
 * b's parent if it was the use just before b's in this tier's list k
 * (same request, same class): b then goes right behind it.
 */
static uint32_t parent_just_used(struct asym *s, struct pol_block *b,
				 unsigned k)
{
	const struct pol_block *p;

	/*
	 * Only the block used at the tick before b's can qualify, and it is
	 * b's parent when it has the parent's hash (one entry per hash):
	 * that saves reading the parent's entry when b is hit alone.
	 */
	if (s->used_tick[1] + 1 == b->tick && s->used_id[1] != POL_NONE) {
		p = pol_index_at(s->ix, s->used_id[1]);
		if (!(b->flags & POL_BLOCK_HAS_PARENT) || !p->live ||
		    p->hash != b->parent_hash)
			return POL_NONE;
	} else {
		p = pol_cache_parent(s->c, b);
	}

	if (!p || p->tier != s->tier || p->slot[s->tier].list != k + 1 ||
	    p->tick + 1 != b->tick)
		return POL_NONE;
	return pol_index_id(s->ix, p);
}

/*
 * GPU instance: b was used at its tick (every use lands there), after
 * the use of used_id[0]; parent_just_used() looks one use back.
 */
static void note_use(struct asym *s, const struct pol_block *b)
{
	s->used_id[1] = s->used_id[0];
	s->used_tick[1] = s->used_tick[0];
	s->used_id[0] = pol_index_id(s->ix, b);
	s->used_tick[0] = b->tick;
}

/* --- pol_ops --- */

/*
 * pol_cache_is_leaf(), without the call for a block with no resident
 * child (a new block, most of the time): that one is a leaf whatever the
 * prefix rule and the tier.
 */
static inline __attribute__((always_inline)) bool
is_leaf(const struct asym *s, const struct pol_block *b)
{
	_Static_assert(POL_TIER_COUNT == 3, "is_leaf: three tiers");
	if (!(b->nchild[0] | b->nchild[1] | b->nchild[2]))
		return true;
	return pol_cache_is_leaf(s->c, b);
}

/*
 * Should b be in a list: a block that may be evicted structurally (with
 * the prefix rule, a leaf) and is not held.  Inline: out of line (gcc
 * chose so once held() came in) it cost each insert and change 20
 * instructions (bench/policy's callgrind count, performance.md).
 */
static inline __attribute__((always_inline)) bool
listed(const struct asym *s, const struct pol_block *b)
{
	return !held(b) && is_leaf(s, b);
}

/*
 * Only the blocks that may be evicted structurally and are not held are
 * in the lists (with the prefix rule, the leaves): a parent never sits
 * at a tail waiting for its children, nor a block at the tail waiting
 * for its sequence, and a scan for a victim stops at once.  A parent
 * enters its list when its last resident child goes, a held block when
 * its last pin or reference does (asym_change), in order of last use.
 */
static void place(struct asym *s, struct pol_block *b, bool used, bool entering)
{
	uint32_t id = pol_index_id(s->ix, b);
	unsigned k = block_class(b);

	if (!listed(s, b)) {
		SLOT(s, id)->list = 0;
		return;
	}
	if (used) {
		struct asym_place p = { parent_just_used(s, b, k), UINT64_MAX };

		/*
		 * b enters the tier behind its parent: with the prefix rule
		 * the cache then counts b in the parent, which stops being
		 * a leaf and leaves the list (asym_change finds it out
		 * already).  Most new blocks go this way.
		 */
		if (entering && s->prefix_rule && p.after != POL_NONE)
			list_replace(s, k, p.after, id);
		else
			list_insert(s, k, id, p);
	} else {
		list_insert(s, k, id, asym_sorted_place(s, k, b));
	}
}

static void asym_insert(void *priv, struct pol_block *b)
{
	struct asym *s = priv;
	bool used = s->tier == POL_TIER_GPU;

	if (used) {
		asym_learn(s, b);
		note_use(s, b);
	}
	place(s, b, used, true);
}

static void asym_access(void *priv, struct pol_block *b)
{
	struct asym *s = priv;

	asym_learn(s, b);
	note_use(s, b);
	if (b->slot[s->tier].list)
		list_unlink(s, pol_index_id(s->ix, b));
	place(s, b, true, false);
}

/*
 * b gained or lost its last resident child, or its first or last pin or
 * reference: it leaves its list or joins one (in order of last use, as
 * a demoted block does: asym_sorted_place()).  A TTL, a priority or a
 * block set aside stays where it is.
 */
static void asym_change(void *priv, struct pol_block *b)
{
	struct asym *s = priv;
	uint32_t id = pol_index_id(s->ix, b);
	unsigned k;
	bool want;

	if (b->tier != s->tier)
		return;
	/* a pin, a reference, a TTL or a priority: value it again (a
	 * candidate is in its list) */
	if (b->slot[s->tier].list &&
	    s->list[b->slot[s->tier].list - 1].cand.id == id)
		s->list[b->slot[s->tier].list - 1].cand.valued = false;
	want = listed(s, b);
	if (want == (b->slot[s->tier].list != 0))
		return;
	if (!want) {
		list_unlink(s, id);
		return;
	}
	/* place(), knowing that b goes into a list */
	k = block_class(b);
	list_insert(s, k, id, asym_sorted_place(s, k, b));
}

/*
 * b, in this tier, was used: its tick changed and it is about to leave
 * the tier.  Until then its window keys must follow, as a walk over the
 * list would read its new tick (a parent placed meanwhile).
 */
static void asym_touch(void *priv, struct pol_block *b)
{
	struct asym *s = priv;
	struct pol_slot *x = &b->slot[s->tier];
	uint32_t id = pol_index_id(s->ix, b);
	struct asym_list *l;

	if (!x->flags)
		return;
	l = &s->list[x->list - 1];
	if (x->flags & WIN_HEAD) {
		struct asym_wslot *e = win_at(&l->hw, win_find(&l->hw, id));

		win_slot(b, id, e);
		win_bound(&l->hw, e);
	}
	if (x->flags & WIN_TAIL) {
		uint32_t i = win_find(&l->tw, id);
		struct asym_wslot *e = win_at(&l->tw, i);

		win_slot(b, id, e);
		win_bound(&l->tw, e);
		l->tw_ver += i < SCAN_TAIL;
	}
	asym_win_check(s, l);
}

static void asym_remove(void *priv, struct pol_block *b)
{
	struct asym *s = priv;

	if (b->slot[s->tier].list)
		list_unlink(s, pol_index_id(s->ix, b));
}

static int asym_create(struct pol_cache *c, unsigned tier, void **priv)
{
	struct asym *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->c = c;
	s->ix = pol_cache_index(c);
	s->tier = tier;
	for (unsigned k = 0; k < NCLASS; k++) {
		s->list[k].head = s->list[k].tail = POL_NONE;
		s->list[k].cand.id = POL_NONE;
		s->list[k].cand.ver = UINT64_MAX;
		asym_win_init(&s->list[k].hw);
		asym_win_init(&s->list[k].tw);
	}
	s->used_id[0] = s->used_id[1] = POL_NONE;
	s->last_tier = pol_cache_lower_tier(c, tier) == POL_TIER_NONE;
	s->prefix_rule = pol_cache_prefix_rule(c);
	s->msa = pol_cache_msa(c);
	if (tier != POL_TIER_GPU) {
		s->st = ((struct asym *)pol_cache_gpu_policy(c))->st;
	} else {
		int e = asym_stats_create(c, &s->st);

		if (e) {
			free(s);
			return e;
		}
	}
	*priv = s;
	return 0;
}

static size_t asym_learned_save(void *priv, void *buf, size_t len)
{
	struct asym *s = priv;

	return asym_stats_save(s->st, pol_cache_ticks(s->c), buf, len);
}

static int asym_learned_load(void *priv, const void *buf, size_t len,
			     uint64_t *lives)
{
	struct asym *s = priv;

	/* its rebuild of the values moves st->gen: every tier's instance
	 * chooses its candidates again */
	return asym_stats_load(s->st, buf, len, lives);
}

static void asym_destroy(void *priv)
{
	struct asym *s = priv;

	if (s->tier == POL_TIER_GPU)
		asym_stats_destroy(s->st);
	free(s);
}

/* A tier joined or left (pol_cache_set_capacity()): is this one the
 * last now, where the tie-break goes by position (cheaper_miss())?  And
 * how long a history do the tiers' capacities ask for now? */
static void asym_capacity(void *priv)
{
	struct asym *s = priv;

	s->last_tier = pol_cache_lower_tier(s->c, s->tier) == POL_TIER_NONE;
	/* the statistics' owner sizes the history for the new capacities
	 * (on -ENOMEM it keeps the one it has: fewer ages learned, no
	 * wrong ones) */
	if (s->tier == POL_TIER_GPU)
		(void)asym_stats_fit(s->st, s->c, pol_cache_ticks(s->c));
}

const struct pol_ops pol_asym_ops = {
	.name = "asym",
	.create = asym_create,
	.destroy = asym_destroy,
	.on_insert = asym_insert,
	.on_access = asym_access,
	.on_remove = asym_remove,
	.on_change = asym_change,
	.on_touch = asym_touch,
	.victim = asym_victim,
	.learned_save = asym_learned_save,
	.learned_load = asym_learned_load,
	.learned_describe = asym_stats_describe,
	.on_capacity = asym_capacity,
};
