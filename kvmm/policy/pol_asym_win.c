/* SPDX-License-Identifier: MIT */
/*
 * asym: the end windows of its lists, and the place of a block that
 * joins a list out of turn, found through them.
 *
 * A block that joins a list later than its last use (a parent whose last
 * child went, a block demoted into a lower tier) is put in order of its
 * last use, by asym_sorted_place(): a walk of up to SORT_MAX blocks from
 * each end of the list.  Each list keeps its first and its last SORT_MAX
 * blocks, in list order from the head (hw) and from the tail (tw), with
 * the keys that order them (newer_key()), so the walk reads a few KB kept
 * in cache instead of chasing links through the entries (one cache miss
 * a step at 1M blocks).  The result is the same as the walk's, block for
 * block.  A window is a deque: most changes are near the ends.  The list
 * code in pol_asym.c moves blocks in and out of the windows as it links
 * and unlinks them, with the deque steps of pol_asym_priv.h (inline:
 * they run at every list change); a block's pol_slot.flags say which
 * windows hold it.  This file starts the windows, checks them against
 * the lists in test builds, and finds places through them.
 */
#include "kvmm/policy/pol_asym_priv.h"

static bool newer(int64_t ka, uint32_t pa, const struct pol_block *b)
{
	return newer_key(ka, pa, block_key(b), win_pos(b));
}

void asym_win_init(struct asym_win *w)
{
	w->top.key = INT64_MIN;
	w->top.pos = UINT32_MAX; /* older than any block */
	w->top.id = POL_NONE;
	w->bottom.key = INT64_MAX;
	w->bottom.pos = 0; /* newer than any block */
	w->bottom.id = POL_NONE;
}

#ifdef POL_ASYM_CHECK
/* Windows against a walk of the list (test builds, -DPOL_ASYM_CHECK). */
void asym_win_check(struct asym *s, struct asym_list *l)
{
	uint32_t x = l->head, n = 0;
	struct asym_wslot e;

	for (; x != POL_NONE && n < WIN; x = SLOT(s, x)->next, n++) {
		win_slot(pol_index_at(s->ix, x), x, &e);
		assert(n < l->hw.n && win_at(&l->hw, n)->id == x);
		assert(win_at(&l->hw, n)->key == e.key &&
		       win_at(&l->hw, n)->pos == e.pos);
		assert(SLOT(s, x)->flags & WIN_HEAD);
		assert(!newer_key(l->hw.bottom.key, l->hw.bottom.pos, e.key,
				  e.pos));
	}
	assert(n == l->hw.n);
	assert(x == POL_NONE || !(SLOT(s, x)->flags & WIN_HEAD));
	for (x = l->tail, n = 0; x != POL_NONE && n < WIN;
	     x = SLOT(s, x)->prev, n++) {
		win_slot(pol_index_at(s->ix, x), x, &e);
		assert(n < l->tw.n && win_at(&l->tw, n)->id == x);
		assert(win_at(&l->tw, n)->key == e.key &&
		       win_at(&l->tw, n)->pos == e.pos);
		assert(SLOT(s, x)->flags & WIN_TAIL);
		assert(!newer_key(e.key, e.pos, l->tw.top.key, l->tw.top.pos));
	}
	assert(n == l->tw.n);
	assert(x == POL_NONE || !(SLOT(s, x)->flags & WIN_TAIL));
	assert(l->len >= n && (l->len <= WIN) == (x == POL_NONE));
}
#endif

/*
 * A demoted block keeps its place by last use among the tier's blocks of
 * its class (lists then stay in age order, which the victim choice
 * relies on): search from both ends, SORT_MAX steps each (in the end
 * windows, which hold just the blocks these steps would visit).
 */
struct asym_place asym_sorted_place(struct asym *s, unsigned k,
				    const struct pol_block *b)
{
	struct asym_list *l = &s->list[k];
	struct asym_place p = { POL_NONE, UINT64_MAX };
	int64_t kb = block_key(b);

	/* the tail window's top is not newer: none of its blocks is */
	if (newer_key(l->tw.top.key, l->tw.top.pos, kb, win_pos(b))) {
		for (uint32_t i = 0; i < l->tw.n; i++) {
			const struct asym_wslot *e = win_at(&l->tw, i);

			if (newer(e->key, e->pos, b)) {
				p.after = e->id;
				p.at = l->len - 1 - i;
				return p;
			}
		}
		/* b is newer than all of them: a tighter top */
		l->tw.top.key = kb;
		l->tw.top.pos = win_pos(b);
		l->tw.top.id = POL_NONE;
	}
	if (l->len <= WIN)
		return p; /* newer than all */
	/* the head window's bottom is newer: all of its blocks are */
	if (!newer_key(l->hw.bottom.key, l->hw.bottom.pos, kb, win_pos(b))) {
		for (uint32_t i = 0; i < WIN; i++) {
			const struct asym_wslot *e = win_at(&l->hw, i);

			if (!newer(e->key, e->pos, b))
				return p;
			p.after = e->id;
			p.at = i;
		}
		/* b is older than all of them: a tighter bottom */
		l->hw.bottom.key = kb;
		l->hw.bottom.pos = win_pos(b);
		l->hw.bottom.id = POL_NONE;
	}
	/* somewhere in the middle: near enough (the window is full) */
	p.after = win_at(&l->hw, WIN - 1)->id;
	p.at = WIN - 1;
	return p;
}
