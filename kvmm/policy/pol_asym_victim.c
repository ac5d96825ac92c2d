/* SPDX-License-Identifier: MIT */
/*
 * asym: the victim choice.  Each list's candidate is the block of the
 * lowest value among its SCAN_TAIL least recent (tail_lowest(), kept by
 * pol_asym.c's upkeep while nothing it was chosen among changes); the
 * victim is the best of the lists' candidates that may go
 * (better_victim(): the lower value, then the lower priority, the
 * cheaper miss, the less recent), or the first evictable block from a
 * list's tail when its candidate may not.  pol_asym.c's top comment is
 * the overview; apart from the list upkeep there so that each file has
 * one job and stays under 800 lines.
 */
#include <math.h>

#include "kvmm/policy/pol_asym_priv.h"

/*
 * Is l's candidate still the one chosen at this change of its window,
 * before tick `until`?  (No candidate yet: its ver, UINT64_MAX, is no
 * change of the window.)  Between a rebuild of the values and the next
 * victim choice, which counts the rebuild as a change of every window,
 * the upkeep may keep a candidate that choice drops: it costs nothing
 * but the upkeep.
 */
static inline bool cand_valid(const struct asym_list *l, uint64_t now)
{
	return l->cand.ver == l->tw_ver && now < l->cand.until;
}

/*
 * Expected hits per unit of cache time the block can still bring (its
 * class's Gittins index at its age), -1 for a partial tail block: its
 * hash changes when the sequence grows, it cannot be hit again.
 */
static double block_value(const struct asym *s, const struct pol_block *b,
			  uint64_t now)
{
	double v;

	if (b->flags & POL_BLOCK_PARTIAL)
		return -1;
	v = s->st->value[block_class(b)][age_bucket(now - b->tick)];
	if (b->priority)
		v *= exp2(b->priority / 8.0);
	return v;
}

/*
 * Does a miss of a cost less than one of b, both in this tier?  From the
 * last tier recomputation grows with the position; in a tier with a
 * lower tier a reload costs the same for every block, except with
 * Multi-Segment Attention (pol_cache_msa(), kvmm-replay --msa), where a
 * miss costs what the block's own recomputation, at its position, costs
 * beyond the reload: the shallower block is the cheaper one in every
 * tier.  (Without MSA a miss also costs every block after it in the
 * request, which the prefix rule's leaves make the same thing from the
 * last tier.)  Only a tie-break: as a weight of the value the position
 * loses, with and without MSA (Documentation/policy.md has the figures).
 */
static bool cheaper_miss(const struct asym *s, const struct pol_block *a,
			 const struct pol_block *b)
{
	return (s->last_tier || s->msa) && a->position < b->position;
}

/*
 * Is a (value va) a better victim than b (vb)?  The lower value; among
 * equals (without statistics yet every value is 0) the lower client
 * priority, then the cheaper miss (cheaper_miss()), then the less
 * recently used.
 */
static bool better_victim(const struct asym *s, const struct pol_block *a,
			  double va, const struct pol_block *b, double vb)
{
	if (va != vb)
		return va < vb;
	/* without statistics yet values tie at 0: the priority still ranks */
	if (a->priority != b->priority)
		return a->priority < b->priority;
	if (cheaper_miss(s, a, b) || cheaper_miss(s, b, a))
		return cheaper_miss(s, a, b);
	return a->tick < b->tick;
}

/*
 * pol_cache_evictable() for a block in a list: the lists hold only the
 * blocks that may go structurally and are neither pinned nor referenced
 * (asym_change keeps them so), which leaves the blocks set aside and the
 * TTLs to check, without two calls per list at every decision.
 */
static bool list_evictable(const struct asym *s, const struct pol_block *b,
			   uint64_t clock)
{
	/* a live TTL may still let the block go down a tier (a demotable
	 * TTL in make_room's second pass): the cache decides those */
	bool e = !(b->flags & POL_BLOCK_ASIDE) &&
		 (!(b->ttl_expiry && b->ttl_expiry > clock) ||
		  pol_cache_evictable(s->c, b));

#ifdef POL_ASYM_CHECK
	assert(!held(b) && e == pol_cache_evictable(s->c, b));
#endif
	return e;
}

/*
 * The least recent SCAN_TAIL blocks of list k (its tail window, index 0
 * the tail): the index of the one with the lowest value of the class at
 * its age (the first from the tail among equals), read from the window's
 * keys alone (a block's tick is its key + position), and in *until the
 * first tick at which one of them changes its age bucket.  The value of
 * a class is not monotone in age: it rises through the quiet time before
 * the class's usual return, so a block a little younger than the tail
 * can be worth less (Documentation/policy.md has the figures).
 *
 * Out of line: a rescan is rare (a window change the upkeep could not
 * follow, a bucket change, a rebuild), and inlined into asym_victim() it
 * costs the loop over the lists 26 instructions a decision (callgrind).
 */
static __attribute__((noinline)) uint32_t
tail_lowest(const struct asym *s, unsigned k, uint64_t now, uint64_t *until)
{
	const struct asym_win *w = &s->list[k].tw;
	const double *value = s->st->value[k];
	uint32_t n = w->n < SCAN_TAIL ? w->n : SCAN_TAIL, best = 0;
	/* the ticks lo..hi of age bucket x, and the oldest seen in it */
	uint64_t u = UINT64_MAX, lo = 1, hi = 0, first = UINT64_MAX;
	unsigned x = 0;
	double v = 0, best_v = 0;

	/*
	 * Ticks grow from the tail but for the blocks of one request, so the
	 * bucket (and the value) is found again only where it changes.
	 */
	for (uint32_t i = 0; i < n; i++) {
		const struct asym_wslot *e = &w->e[(w->start + i) & (WIN - 1)];
		uint64_t tick =
			(uint64_t)(e->key + (int64_t)(e->pos & ~WPOS_PARTIAL));
		double ve;

		if (tick < lo || tick > hi) {
			if (first != UINT64_MAX && x + 1 < AGE_BUCKETS &&
			    first + bucket_start(x + 1) < u)
				u = first + bucket_start(x + 1);
			x = age_bucket(now - tick);
			v = x ? value[x] : HUGE_VAL;
			hi = now - bucket_start(x);
			lo = x + 1 < AGE_BUCKETS && bucket_start(x + 1) <= now ?
				     now - bucket_start(x + 1) + 1 :
				     0;
			first = tick;
		} else if (tick < first) {
			first = tick;
		}
#ifdef POL_ASYM_CHECK
		assert(age_bucket(now - tick) == x);
#endif
		ve = e->pos & WPOS_PARTIAL ? -1 : v;
		if (!i || ve < best_v) {
			best = i;
			best_v = ve;
		}
	}
	if (first != UINT64_MAX && x + 1 < AGE_BUCKETS &&
	    first + bucket_start(x + 1) < u)
		u = first + bucket_start(x + 1);
	*until = u;
	return best;
}

struct pol_block *asym_victim(void *priv)
{
	struct asym *s = priv;
	uint64_t now = pol_cache_ticks(s->c), clock = pol_cache_clock(s->c);
	struct pol_block *best = NULL;
	double best_v = 0;

	/* the values were rebuilt: every candidate is chosen anew */
	if (s->gen != s->st->gen) {
		s->gen = s->st->gen;
		for (unsigned k = 0; k < NCLASS; k++)
			s->list[k].tw_ver++;
	}

	for (unsigned pass = 0; pass < 2 && !best; pass++) {
		/* the lists with blocks, in class order as before */
		for (uint32_t m = s->nonempty; m; m &= m - 1) {
			unsigned k = (unsigned)__builtin_ctz(m);
			struct asym_list *l = &s->list[k];
			struct asym_cand *cand = &l->cand;
			unsigned skipped = 0;
			struct pol_block *b = NULL;
			uint32_t id;
			double v;

#ifdef POL_ASYM_CHECK
			assert(l->tail != POL_NONE); /* nonempty */
#endif
			if (cand_valid(l, now)) {
				/* chosen before, nothing changed since */
				id = cand->id;
				b = pol_index_at(s->ix, id);
#ifdef POL_ASYM_CHECK
				uint64_t u;

				assert(b->tick == cand->tick &&
				       win_at(&l->tw,
					      tail_lowest(s, k, now, &u))
						       ->id == id &&
				       win_at(&l->tw, cand->idx)->id == id);
#endif
				if (cand->valued) {
					/*
					 * and valued, evictable: valued only
					 * without a TTL, and a pin, a
					 * reference, a TTL or a priority
					 * unvalues it (asym_change)
					 */
					v = cand->bv;
#ifdef POL_ASYM_CHECK
					assert(list_evictable(s, b, clock) &&
					       v == block_value(s, b, now));
#endif
					goto compare;
				}
			} else {
				uint32_t i =
					tail_lowest(s, k, now, &cand->until);

				asym_cand_set(s, l, i, 0, now, true);
				/* the slot's value, from the bucket just found */
				cand->v = win_at(&l->tw, i)->pos &
							  WPOS_PARTIAL ?
						  -1 :
						  cand->xv;
				cand->ver = l->tw_ver;
				id = cand->id;
				b = pol_index_at(s->ix, id);
			}
			/* the lowest value near the tail, if it may go */
			if (list_evictable(s, b, clock)) {
				const struct pol_slot *x = SLOT(s, id);

				/* the slot's value is the block's but at age
				 * 0 or with a priority */
				v = cand->x && !b->priority ?
					    cand->v :
					    block_value(s, b, now);
#ifdef POL_ASYM_CHECK
				assert(v == block_value(s, b, now));
#endif
				if (!b->ttl_expiry) {
					cand->bv = v;
					cand->valued = true;
				}
				/*
				 * what its eviction changes (its list
				 * neighbours, its parent's child counts):
				 * a candidate valued anew is often the
				 * victim of this decision or the next
				 */
				win_prefetch(s, x->prev);
				win_prefetch(s, x->next);
				if (b->parent_id < s->ix->high_water)
					pol_index_prefetch_entry(
						s->ix, b->parent_id, 1);
				goto compare;
			}
			/* it may not: the first evictable block from the tail */
			for (id = l->tail; id != POL_NONE;
			     id = SLOT(s, id)->prev) {
				b = pol_index_at(s->ix, id);
				if (list_evictable(s, b, clock))
					break;
				b = NULL;
				/* a bounded look first, all of it if need be */
				if (!pass && ++skipped > SCAN_MAX)
					break;
			}
			if (!b)
				continue;
			v = block_value(s, b, now);
compare:
			if (!best || better_victim(s, b, v, best, best_v)) {
				best = b;
				best_v = v;
			}
		}
	}
	return best;
}
