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
 * Per class asym learns online how long blocks stay away: the hazard of a
 * return at age x (in ticks, i.e. cache accesses, since the block's last
 * use), in log-spaced age buckets.  Every use starts a "life", recorded in
 * a ring indexed by tick that spans the last `history` uses; a use of a
 * block whose life is still in the ring ends that life as a return at its
 * age, whether the block was still cached or not (blocks stay in the
 * index as history while their life is in the ring), so the estimate does
 * not depend on what the policy kept.  A life counts as having reached
 * age x once the ring passes x ticks beyond it without a return before x
 * (lives still running are not counted as survivors early, which would
 * make every class look like it never comes back):
 *
 *   h_c(x) = (returns_c(x) + m * h_all(x)) / (reached_c(x) + m)
 *
 * with h_all the hazard of all classes pooled (m = SMOOTH: a class with
 * few lives borrows the pooled shape).  The value of keeping a block of
 * class c at age a is its Gittins index, the best rate of hits per unit
 * of cache time it can still bring:
 *
 *   v_c(a) = max over T >= a of
 *            sum_{x=a..T} S(x) h(x) / sum_{x=a..T} S(x) (1 - h(x)/2) width(x)
 *   S(x)   = prod_{y=a..x-1} (1 - h(y))     (still away at the start of x)
 *
 * so a young chain whose class usually comes back after a few minutes
 * keeps its value through the quiet first minute, and an old chain that
 * should have come back by now loses it.  Ages past the history have no
 * data and value 0.  The victim is the block with the lowest
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
 * the first missing block, so a chain is eaten from its end), in the
 * order of last use, the least recent at the tail; a block that joins a
 * list later (a parent whose last child went, a block demoted into a
 * lower tier) is put in order of its last use.  The candidates are the
 * first evictable block (pins, TTLs) from the tail of each list:
 * O(classes) per eviction.
 *
 * Nothing is fitted to one trace: the hazards are learned, the classes
 * come from the prefix tree.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef POL_ASYM_CHECK
#include <assert.h>
#endif

#include "kvmm/policy/pol_mem.h"
#include "kvmm/policy/policy.h"

#define TURNS 8 /* turn classes: 1..7, 8 and later */
#define NCLASS (2 * TURNS) /* x the request was short or not */
#define CLS_BITS 4 /* a class in a life code */
_Static_assert(NCLASS <= 1 << CLS_BITS && NCLASS <= 32, "asym classes");
#define AGE_BUCKETS 128 /* 4 per octave: ages up to 2^33 ticks */
#define SMOOTH 4.0 /* pseudo-lives of the pooled hazard per class */
/* history kept whatever the capacity (index entries, ~200 bytes each) */
#define HISTORY_MIN (1u << 17)
#define REBUILD_MIN 1024 /* uses between two rebuilds of the values */
#define SORT_MAX 256 /* list steps to place a demoted block in order */
#define SCAN_MAX 32 /* non-evictable blocks skipped per list */

/* Age bucket: exact below 4, then 4 sub-buckets per power of two. */
static unsigned age_bucket(uint64_t a)
{
	unsigned e, b;

	if (a < 4)
		return (unsigned)a;
	e = 63 - (unsigned)__builtin_clzll(a);
	b = 4 * (e - 1) + (unsigned)((a >> (e - 2)) & 3);
	return b < AGE_BUCKETS ? b : AGE_BUCKETS - 1;
}

static double bucket_width(unsigned b)
{
	return b < 4 ? 1 : (double)(1ull << (b / 4 - 1)); /* exact */
}

static uint64_t bucket_start(unsigned b)
{
	return b < 4 ? b : (uint64_t)(4 + b % 4) << (b / 4 - 1);
}

/*
 * One record per use (tick): the life that the use started, in a ring
 * indexed by tick modulo the history length, so the life of a block's
 * last use is found from its tick alone.  Every tick reaches the policy
 * (pol_cache_access ticks once and always inserts into or touches the GPU
 * tier), so slot t & (history - 1) holds the life of tick t for the
 * `history` ticks after t.  A life is its block's entry id and a 16-bit
 * code: its class and how far it got,
 *
 *   0                       no life (a partial block, or not yet used)
 *   LIFE_OPEN << 4 | class  still away
 *   (b + 1) << 4 | class    came back at an age in bucket b,
 *
 * so "reached the start of bucket x" is code >> 4 > x, and counting the
 * lives that reached an age scans 2 bytes a life.
 */
#define LIFE_OPEN 255u

static unsigned life_reach(uint16_t code)
{
	return code >> CLS_BITS;
}

static inline unsigned life_cls(uint16_t code)
{
	return code & (NCLASS - 1);
}

/* Learned statistics, shared by the tiers (owned by the GPU instance). */
struct asym_stats {
	double ret[NCLASS][AGE_BUCKETS]; /* lives that came back at age x */
	double reach[NCLASS][AGE_BUCKETS]; /* lives that reached age x */
	double value[NCLASS][AGE_BUCKETS]; /* Gittins index v_c(x) */
	uint32_t *life_id; /* history: a ring of `history` lives */
	uint16_t *life_code;
	uint64_t history; /* a power of two */
	unsigned hist_buckets; /* age buckets below `history` */
	uint64_t counted[AGE_BUCKETS]; /* lives counted in reach[][x] up to */
	uint64_t period, next_decay, next_rebuild;
	uint64_t rebuild_every;
	uint64_t gen; /* rebuilds of value[][] so far */
};

/*
 * The first and the last SORT_MAX blocks of a list, in list order from
 * the head (hw) and from the tail (tw), with the keys that order them
 * (see newer()): sorted_place() walks up to SORT_MAX blocks from each end,
 * and through these it reads a few KB kept in cache instead of chasing
 * links through the entries (one cache miss a step at 1M blocks).  The
 * result is the same as the walk's, block for block.  A deque: most
 * changes are near the ends.
 */
#define WIN SORT_MAX
#define WIN_HEAD 1 /* pol_slot.flags: in the list's head window */
#define WIN_TAIL 2 /* ... in its tail window */

struct asym_wslot {
	int64_t key; /* tick - position */
	uint32_t id, pos;
};

struct asym_win {
	uint32_t start, n;
	/*
	 * No block of the window is newer than top or older than bottom
	 * (bounds that only widen while blocks come and go): sorted_place()
	 * skips a window that cannot hold the place it looks for.
	 */
	struct asym_wslot top, bottom;
	struct asym_wslot e[WIN];
};

/*
 * The tail of a list as asym_victim() last valued it: block cand at the
 * use of tick cand_tick (a block and a tick name one state of a block:
 * any use changes the tick), evictable with no TTL, of value cand_v while
 * the ticks stay below cand_until (its age bucket) and the values are
 * those of rebuild cand_gen.  A pin, a reference, a TTL or a priority
 * goes through asym_change(), which forgets it.
 */
struct asym_cand {
	uint32_t id; /* POL_NONE: none */
	uint64_t tick, until, gen;
	double v;
};

struct asym_list {
	uint32_t head, tail; /* head = most recent */
	uint64_t len;
	struct asym_cand cand;
	struct asym_win hw, tw; /* blocks from the head, from the tail */
};

struct asym {
	struct pol_cache *c;
	struct pol_index *ix;
	unsigned tier;
	bool last_tier;
	bool prefix_rule; /* the cache's (fixed when it is created) */
	struct asym_list list[NCLASS];
	/* bit k: list[k] holds blocks; the victim scan visits only those
	 * (a list is 16 KB with its windows: its tail is a miss) */
	uint32_t nonempty;
	struct asym_stats *st; /* the GPU instance's */
	/* GPU instance: the blocks used at the last two ticks (learn()) */
	uint32_t used_id[2];
	uint64_t used_tick[2];
};

#define SLOT(s, id) (&(s)->ix->blocks[id].slot[(s)->tier])

/*
 * The class of a block: the turn of the request that last used it
 * (turn + access_count - 1 for linear sessions), capped at TURNS, then
 * TURNS more classes for the same turns when that request was short.
 */
static unsigned block_class(const struct pol_block *b)
{
	uint64_t t = (uint64_t)b->turn + b->access_count;

	t = t > 1 ? t - 1 : 1;
	return (t < TURNS ? (unsigned)t - 1 : TURNS - 1) +
	       (b->few_new ? TURNS : 0);
}

/*
 * 1 + the tick of the use that started the block's open life (0: none),
 * kept in the GPU slot's key (every use lands on the GPU tier; the cache
 * has already overwritten b->tick when the policy hears of it).
 */
static uint64_t seen_tick(const struct pol_block *b)
{
	return (uint64_t)b->slot[POL_TIER_GPU].key;
}

/* --- list end windows --- */

/*
 * Does a block with key ka, position pa come before one with kb, pb in a
 * list (more recent, or same request and nearer the root)?  A request
 * uses its blocks at consecutive ticks from the root on, so the key
 * tick - position is the same for all of them and grows from one request
 * to the next.  Ticks, not the owner's clock: the order must be the same
 * in kvmmd (ns) and in a replay.
 */
static bool newer_key(int64_t ka, uint32_t pa, int64_t kb, uint32_t pb)
{
	return ka > kb || (ka == kb && pa < pb);
}

static int64_t block_key(const struct pol_block *b)
{
	return (int64_t)(b->tick - b->position);
}

static bool newer(int64_t ka, uint32_t pa, const struct pol_block *b)
{
	return newer_key(ka, pa, block_key(b), b->position);
}

/* e entered window w, or its key changed: widen w's bounds to it. */
static inline void win_bound(struct asym_win *w, const struct asym_wslot *e)
{
	if (newer_key(e->key, e->pos, w->top.key, w->top.pos))
		w->top = *e;
	if (newer_key(w->bottom.key, w->bottom.pos, e->key, e->pos))
		w->bottom = *e;
}

static void win_init(struct asym_win *w)
{
	w->top.key = INT64_MIN;
	w->top.pos = UINT32_MAX; /* older than any block */
	w->top.id = POL_NONE;
	w->bottom.key = INT64_MAX;
	w->bottom.pos = 0; /* newer than any block */
	w->bottom.id = POL_NONE;
}

static struct asym_wslot *win_at(struct asym_win *w, uint32_t i)
{
	return &w->e[(w->start + i) & (WIN - 1)];
}

static uint32_t win_find(struct asym_win *w, uint32_t id)
{
	uint32_t i = 0;

	while (win_at(w, i)->id != id)
		i++;
	return i;
}

/* Insert at index i (<= n < WIN), moving the shorter side. */
static void win_insert(struct asym_win *w, uint32_t i,
		       const struct asym_wslot *e)
{
	if (i < w->n - i) {
		w->start = (w->start - 1) & (WIN - 1);
		for (uint32_t j = 0; j < i; j++)
			*win_at(w, j) = *win_at(w, j + 1);
	} else {
		for (uint32_t j = w->n; j > i; j--)
			*win_at(w, j) = *win_at(w, j - 1);
	}
	*win_at(w, i) = *e;
	w->n++;
	win_bound(w, e);
}

static void win_remove(struct asym_win *w, uint32_t i)
{
	if (i < w->n - 1 - i) {
		for (uint32_t j = i; j > 0; j--)
			*win_at(w, j) = *win_at(w, j - 1);
		w->start = (w->start + 1) & (WIN - 1);
	} else {
		for (uint32_t j = i; j + 1 < w->n; j++)
			*win_at(w, j) = *win_at(w, j + 1);
	}
	w->n--;
}

static void win_slot(const struct pol_block *b, uint32_t id,
		     struct asym_wslot *e)
{
	e->key = block_key(b);
	e->id = id;
	e->pos = b->position;
}

/*
 * Put id at index i of window w (flag f) unless i is past the window;
 * a full window drops its last block.
 */
static void win_enter(struct asym *s, struct asym_win *w, unsigned f,
		      uint32_t i, const struct asym_wslot *e)
{
	if (i >= WIN)
		return;
	if (w->n == WIN)
		SLOT(s, win_at(w, --w->n)->id)->flags &= (uint8_t)~f;
	win_insert(w, i, e);
	SLOT(s, e->id)->flags |= (uint8_t)f;
}

/* Start loading what the windows read and write of block id. */
static void win_prefetch(struct asym *s, uint32_t id)
{
	if (id != POL_NONE) {
		__builtin_prefetch(pol_index_at(s->ix, id), 1);
		__builtin_prefetch(SLOT(s, id), 1);
	}
}

/*
 * Append block id (the next one past a window that lost a block) and
 * start loading the one after it, which the next refill takes.
 */
static void win_refill(struct asym *s, struct asym_win *w, unsigned f,
		       uint32_t id)
{
	struct pol_slot *x = SLOT(s, id);
	struct asym_wslot e;

	win_slot(pol_index_at(s->ix, id), id, &e);
	*win_at(w, w->n++) = e;
	win_bound(w, &e);
	x->flags |= (uint8_t)f;
	win_prefetch(s, f == WIN_TAIL ? x->prev : x->next);
}

#ifdef POL_ASYM_CHECK
/* Windows against a walk of the list (test builds, -DPOL_ASYM_CHECK). */
static void win_check(struct asym *s, struct asym_list *l)
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
#else
static inline void win_check(struct asym *s, struct asym_list *l)
{
	(void)s;
	(void)l;
}
#endif

static void list_unlink(struct asym *s, uint32_t id)
{
	struct pol_slot *x = SLOT(s, id);
	struct asym_list *l = &s->list[x->list - 1];
	bool refill = l->len > WIN;

	if (x->flags & WIN_HEAD)
		win_remove(&l->hw, win_find(&l->hw, id));
	if (x->flags & WIN_TAIL)
		win_remove(&l->tw, win_find(&l->tw, id));
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
	win_check(s, l);
}

/*
 * Where a block goes in list k: after block `after` (toward the tail), or
 * at the head (POL_NONE).  `at` is after's place from the head when the
 * caller knows it (UINT64_MAX: not known).
 */
struct asym_place {
	uint32_t after;
	uint64_t at;
};

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
		win_check(s, l);
		return;
	}
	x->prev = after;
	x->next = SLOT(s, after)->next;
	if (x->next != POL_NONE)
		SLOT(s, x->next)->prev = id;
	else
		l->tail = id;
	SLOT(s, after)->next = id;
	win_check(s, l);
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
		*win_at(&l->tw, win_find(&l->tw, pid)) = e;
		win_bound(&l->tw, &e);
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
	win_check(s, l);
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

/* --- statistics --- */

/*
 * *r += 1, n times: one addition when every partial sum is exact (always,
 * in practice: the counts are far below 2^53 times their finest bit), so
 * the result is the same as adding one life at a time.
 */
static void add_ones(double *r, uint64_t n)
{
	double limit;
	int e;

	if (*r > 0) {
		/* *r = m 2^(e - 53): its lowest set bit is 2^low */
		uint64_t m = (uint64_t)ldexp(frexp(*r, &e), 53);
		int low = e - 53 + __builtin_ctzll(m);

		limit = ldexp(1, 53 + (low < 0 ? low : 0));
	} else {
		limit = ldexp(1, 53);
	}
	if (*r >= 0 && *r < limit && (double)n < limit - *r) {
		*r += (double)n;
		return;
	}
	while (n--)
		*r += 1;
}

/*
 * Add d to hist[code] for the lives of ticks lo..hi: a life's code is its
 * how far << CLS_BITS | class, so the histogram is indexed by the code itself.
 * The ring is read in runs without wrapping (4 lives a step), the
 * innermost loop of the recount.
 */
static void hist_range(const struct asym_stats *st, uint32_t *hist, uint64_t lo,
		       uint64_t hi, uint32_t d)
{
	uint64_t mask = st->history - 1;

	while (lo <= hi) {
		uint64_t i = lo & mask, n = hi - lo + 1;
		const uint16_t *p = st->life_code + i, *end;

		if (n > st->history - i)
			n = st->history - i;
		end = p + n;
		for (; end - p >= 4; p += 4) {
			hist[p[0]] += d;
			hist[p[1]] += d;
			hist[p[2]] += d;
			hist[p[3]] += d;
		}
		for (; p < end; p++)
			hist[*p] += d;
		lo += n;
	}
}

/*
 * Count in reach[][x] the lives that have reached the start of age
 * bucket x since the last call: the lives started at ticks up to
 * now - start(x), still away or back no sooner than that.  The tick
 * ranges of neighbouring buckets overlap (all but the oldest buckets are
 * narrower than the time between two calls), so one histogram of the
 * lives by class and how far they got follows the range from bucket to
 * bucket, which reads each life a few times instead of once per bucket.
 */
static void count_reach(struct asym_stats *st, uint64_t now)
{
	uint32_t hist[256
		      << CLS_BITS]; /* by life code (how far << CLS_BITS | class) */
	uint64_t wlo = 0, whi = 0; /* the histogram's ticks, when valid */
	bool valid = false;

	for (unsigned x = 1; x < st->hist_buckets; x++) {
		uint64_t age = bucket_start(x), lo = st->counted[x], hi;

		if (now < age)
			break;
		hi = now - age;
		st->counted[x] = hi + 1;
		if (lo > hi)
			continue;
		if (valid && lo <= whi && wlo <= hi &&
		    (lo > wlo ? lo - wlo : wlo - lo) +
				    (hi > whi ? hi - whi : whi - hi) <
			    hi - lo) {
			/* move the histogram's range to lo..hi */
			if (lo < wlo)
				hist_range(st, hist, lo, wlo - 1, 1);
			else if (lo > wlo)
				hist_range(st, hist, wlo, lo - 1, UINT32_MAX);
			if (hi > whi)
				hist_range(st, hist, whi + 1, hi, 1);
			else if (hi < whi)
				hist_range(st, hist, hi + 1, whi, UINT32_MAX);
		} else {
			memset(hist, 0, sizeof(hist));
			hist_range(st, hist, lo, hi, 1);
		}
		valid = true;
		wlo = lo;
		whi = hi;
		for (unsigned k = 0; k < NCLASS; k++) {
			/* how far: LIFE_OPEN, or a bucket + 1 <= AGE_BUCKETS */
			uint64_t n = hist[LIFE_OPEN << CLS_BITS | k];

			for (unsigned r = x + 1; r <= AGE_BUCKETS; r++)
				n += hist[r << CLS_BITS | k];
#ifdef POL_ASYM_CHECK
			uint64_t m = 0;

			for (uint64_t t = lo; t <= hi; t++) {
				uint16_t c =
					st->life_code[t & (st->history - 1)];

				m += life_cls(c) == k && life_reach(c) > x;
			}
			assert(m == n);
#endif
			add_ones(&st->reach[k][x], n);
		}
	}
}

static void rebuild(struct asym_stats *st)
{
	st->gen++;
	double hall[AGE_BUCKETS], h[AGE_BUCKETS];

	for (unsigned x = 0; x < AGE_BUCKETS; x++) {
		double r = 0, n = 0;

		for (unsigned k = 0; k < NCLASS; k++) {
			r += st->ret[k][x];
			n += st->reach[k][x];
		}
		hall[x] = n > 0 ? r / n : 0;
	}
	for (unsigned k = 0; k < NCLASS; k++) {
		for (unsigned x = 0; x < AGE_BUCKETS; x++) {
			double hx = (st->ret[k][x] + SMOOTH * hall[x]) /
				    (st->reach[k][x] + SMOOTH);

			h[x] = x < st->hist_buckets ? fmin(hx, 1) : 0;
		}
		for (unsigned a = 0; a < AGE_BUCKETS; a++) {
			double num = 0, den = 0, surv = 1, best = 0;
			unsigned end = st->hist_buckets;

			for (unsigned x = a; x < end; x++) {
				num += surv * h[x];
				den += surv * (1 - h[x] / 2) * bucket_width(x);
				surv *= 1 - h[x];
				if (den > 0 && num / den > best)
					best = num / den;
				if (surv < 1e-4)
					break;
			}
			st->value[k][a] = best;
		}
	}
}

static void periodic(struct asym_stats *st, uint64_t now)
{
	if (now >= st->next_decay) {
		st->next_decay = now + st->period;
		for (unsigned i = 0; i < NCLASS; i++)
			for (unsigned j = 0; j < AGE_BUCKETS; j++) {
				st->ret[i][j] /= 2;
				st->reach[i][j] /= 2;
			}
	}
	if (now >= st->next_rebuild) {
		st->next_rebuild = now + st->rebuild_every;
		count_reach(st, now);
		rebuild(st);
	}
}

/* Ticks ahead at which learn() starts loading an expiring life's entry,
 * and then that block's index slot (freed if it is in no tier). */
#define EXPIRE_AHEAD 8
#define EXPIRE_AHEAD_SLOT 4

/* A use of b at tick now (GPU instance: every use lands there). */
static void learn(struct asym *s, struct pol_block *b)
{
	struct asym_stats *st = s->st;
	uint64_t now = b->tick, seen = seen_tick(b), mask = st->history - 1;
	uint32_t id = pol_index_id(s->ix, b), slot = (uint32_t)(now & mask);
	uint16_t *code = st->life_code;

	/* the lives that end unresolved a few uses from now */
	if (life_reach(code[(now + EXPIRE_AHEAD) & mask]) == LIFE_OPEN)
		pol_index_prefetch_entry(
			s->ix, st->life_id[(now + EXPIRE_AHEAD) & mask], 1);
	if (life_reach(code[(now + EXPIRE_AHEAD_SLOT) & mask]) == LIFE_OPEN)
		pol_index_prefetch(
			s->ix,
			pol_index_at(
				s->ix,
				st->life_id[(now + EXPIRE_AHEAD_SLOT) & mask])
				->hash);
	/*
	 * The slot of this use holds the life started `history` ticks ago:
	 * if it is still open, it ends unresolved and the block is no
	 * longer history (b itself stays: it is in a tier now).
	 */
	if (life_reach(code[slot]) == LIFE_OPEN) {
		struct pol_block *o = pol_index_at(s->ix, st->life_id[slot]);

		o->slot[POL_TIER_GPU].key = 0;
		if (o == b)
			seen = 0;
		pol_cache_release(s->c, o);
	}
	code[slot] = 0;
	/*
	 * The previous life of b came back: a block's last life is open
	 * until it ends here or at its slot's turn above, which clears the
	 * block's seen tick; its class is kept in the block.
	 */
	if (seen) {
		uint64_t age = now - (seen - 1);
		unsigned cls = b->slot[POL_TIER_GPU].aux, x = age_bucket(age);

#ifdef POL_ASYM_CHECK
		assert(code[(seen - 1) & mask] ==
			       (LIFE_OPEN << CLS_BITS | cls) &&
		       st->life_id[(seen - 1) & mask] == id);
#endif
		code[(seen - 1) & mask] = (uint16_t)((x + 1) << CLS_BITS | cls);
		st->ret[cls][x] += 1;
	} else if (!(b->flags & POL_BLOCK_PARTIAL)) {
		pol_cache_hold(s->c, b);
	}
	b->slot[POL_TIER_GPU].key = 0;
	if (!(b->flags & POL_BLOCK_PARTIAL)) {
		/* a partial block never comes back under this hash */
		unsigned cls = block_class(b);

		st->life_id[slot] = id;
		code[slot] = (uint16_t)(LIFE_OPEN << CLS_BITS | cls);
		st->reach[cls][0] += 1;
		b->slot[POL_TIER_GPU].key = (double)(now + 1);
		b->slot[POL_TIER_GPU].aux = (uint8_t)cls;
	} else if (seen) {
		pol_cache_release(s->c, b);
	}
	s->used_id[1] = s->used_id[0];
	s->used_tick[1] = s->used_tick[0];
	s->used_id[0] = id;
	s->used_tick[0] = now;
	periodic(st, now);
}

/* --- pol_ops --- */

/*
 * pol_cache_is_leaf(), without the call for a block with no resident
 * child (a new block, most of the time): that one is a leaf whatever the
 * prefix rule and the tier.
 */
static bool is_leaf(const struct asym *s, const struct pol_block *b)
{
	_Static_assert(POL_TIER_COUNT == 3, "is_leaf: three tiers");
	if (!(b->nchild[0] | b->nchild[1] | b->nchild[2]))
		return true;
	return pol_cache_is_leaf(s->c, b);
}

/*
 * A demoted block keeps its place by last use among the tier's blocks of
 * its class (lists then stay in age order, which the victim choice
 * relies on): search from both ends, SORT_MAX steps each (in the end
 * windows, which hold just the blocks these steps would visit).
 */
static struct asym_place sorted_place(struct asym *s, unsigned k,
				      const struct pol_block *b)
{
	struct asym_list *l = &s->list[k];
	struct asym_place p = { POL_NONE, UINT64_MAX };
	int64_t kb = block_key(b);

	/* the tail window's top is not newer: none of its blocks is */
	if (newer_key(l->tw.top.key, l->tw.top.pos, kb, b->position)) {
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
		l->tw.top.pos = b->position;
		l->tw.top.id = POL_NONE;
	}
	if (l->len <= WIN)
		return p; /* newer than all */
	/* the head window's bottom is newer: all of its blocks are */
	if (!newer_key(l->hw.bottom.key, l->hw.bottom.pos, kb, b->position)) {
		for (uint32_t i = 0; i < WIN; i++) {
			const struct asym_wslot *e = win_at(&l->hw, i);

			if (!newer(e->key, e->pos, b))
				return p;
			p.after = e->id;
			p.at = i;
		}
		/* b is older than all of them: a tighter bottom */
		l->hw.bottom.key = kb;
		l->hw.bottom.pos = b->position;
		l->hw.bottom.id = POL_NONE;
	}
	/* somewhere in the middle: near enough (the window is full) */
	p.after = win_at(&l->hw, WIN - 1)->id;
	p.at = WIN - 1;
	return p;
}

/*
 * Only the blocks that may be evicted structurally are in the lists (with
 * the prefix rule, the leaves): a parent never sits at a tail waiting for
 * its children, and a scan for a victim stops at once.  A parent enters
 * its list when its last resident child goes (asym_change).
 */
static void place(struct asym *s, struct pol_block *b, bool used, bool entering)
{
	uint32_t id = pol_index_id(s->ix, b);
	unsigned k = block_class(b);

	if (!is_leaf(s, b)) {
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
		list_insert(s, k, id, sorted_place(s, k, b));
	}
}

static void asym_insert(void *priv, struct pol_block *b)
{
	struct asym *s = priv;
	bool used = s->tier == POL_TIER_GPU;

	if (used)
		learn(s, b);
	place(s, b, used, true);
}

static void asym_access(void *priv, struct pol_block *b)
{
	struct asym *s = priv;

	learn(s, b);
	if (b->slot[s->tier].list)
		list_unlink(s, pol_index_id(s->ix, b));
	place(s, b, true, false);
}

/* b gained or lost its last resident child (or a pin: nothing to do). */
static void asym_change(void *priv, struct pol_block *b)
{
	struct asym *s = priv;
	uint32_t id = pol_index_id(s->ix, b);
	unsigned k;
	bool leaf;

	if (b->tier != s->tier)
		return;
	/* a pin, a reference, a TTL or a priority: value it again */
	if (s->list[block_class(b)].cand.id == id)
		s->list[block_class(b)].cand.id = POL_NONE;
	leaf = is_leaf(s, b);
	if (leaf == (b->slot[s->tier].list != 0))
		return;
	if (!leaf) {
		list_unlink(s, id);
		return;
	}
	/* place(), knowing that b is a leaf */
	k = block_class(b);
	list_insert(s, k, id, sorted_place(s, k, b));
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
		struct asym_wslot *e = win_at(&l->tw, win_find(&l->tw, id));

		win_slot(b, id, e);
		win_bound(&l->tw, e);
	}
	win_check(s, l);
}

static void asym_remove(void *priv, struct pol_block *b)
{
	struct asym *s = priv;

	if (b->slot[s->tier].list)
		list_unlink(s, pol_index_id(s->ix, b));
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
 * Is a (value va) a better victim than b (vb)?  The lower value; among
 * equals (without statistics yet every value is 0) the lower client
 * priority, then the cheaper miss (from the last tier recomputation grows
 * with the position; a reload costs the same for every block), then the
 * less recently used.
 */
static bool better_victim(const struct asym *s, const struct pol_block *a,
			  double va, const struct pol_block *b, double vb)
{
	if (va != vb)
		return va < vb;
	/* without statistics yet values tie at 0: the priority still ranks */
	if (a->priority != b->priority)
		return a->priority < b->priority;
	if (s->last_tier && a->position != b->position)
		return a->position < b->position;
	return a->tick < b->tick;
}

/*
 * pol_cache_evictable() for a block in a list: the lists hold only the
 * blocks that may go structurally (asym_change keeps them so), which
 * leaves the pins, references and TTLs to check, without two calls per
 * list at every decision.
 */
static bool list_evictable(const struct asym *s, const struct pol_block *b,
			   uint64_t clock)
{
	/* a live TTL may still let the block go down a tier (a demotable
	 * TTL in make_room's second pass): the cache decides those */
	bool e = !b->pins && !b->refcount &&
		 (!(b->ttl_expiry && b->ttl_expiry > clock) ||
		  pol_cache_evictable(s->c, b));

#ifdef POL_ASYM_CHECK
	assert(e == pol_cache_evictable(s->c, b));
#endif
	return e;
}

static struct pol_block *asym_victim(void *priv)
{
	struct asym *s = priv;
	uint64_t now = pol_cache_ticks(s->c), clock = pol_cache_clock(s->c);
	struct pol_block *best = NULL;
	double best_v = 0;

	for (unsigned pass = 0; pass < 2 && !best; pass++) {
		/* the lists with blocks, in class order as before */
		for (uint32_t m = s->nonempty; m; m &= m - 1) {
			unsigned k = (unsigned)__builtin_ctz(m);
			struct asym_cand *cand = &s->list[k].cand;
			uint32_t id = s->list[k].tail;
			unsigned skipped = 0;
			struct pol_block *b = NULL;
			double v;

			if (id == POL_NONE)
				continue;
			b = pol_index_at(s->ix, id);
			if (id == cand->id && b->tick == cand->tick &&
			    now < cand->until && cand->gen == s->st->gen &&
			    !(b->ttl_expiry && b->ttl_expiry > clock)) {
				/* valued before, and nothing changed since */
				v = cand->v;
#ifdef POL_ASYM_CHECK
				assert(list_evictable(s, b, clock) &&
				       v == block_value(s, b, now));
#endif
				goto compare;
			}
			while (id != POL_NONE) {
				b = pol_index_at(s->ix, id);
				if (list_evictable(s, b, clock))
					break;
				b = NULL;
				/* a bounded look first, all of it if need be */
				if (!pass && ++skipped > SCAN_MAX)
					break;
				id = SLOT(s, id)->prev;
			}
			if (!b)
				continue;
			v = block_value(s, b, now);
			if (!skipped && !b->ttl_expiry) {
				unsigned x = age_bucket(now - b->tick);

				cand->id = id;
				cand->tick = b->tick;
				cand->v = v;
				cand->gen = s->st->gen;
				cand->until =
					x + 1 < AGE_BUCKETS ?
						b->tick + bucket_start(x + 1) :
						UINT64_MAX;
			}
compare:
			if (!best || better_victim(s, b, v, best, best_v)) {
				best = b;
				best_v = v;
			}
		}
	}
	return best;
}

static void life_unmap(struct asym_stats *st)
{
	pol_mem_unmap(st->life_id, st->history * sizeof(*st->life_id));
	pol_mem_unmap(st->life_code, st->history * sizeof(*st->life_code));
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
		win_init(&s->list[k].hw);
		win_init(&s->list[k].tw);
	}
	s->used_id[0] = s->used_id[1] = POL_NONE;
	s->last_tier = pol_cache_lower_tier(c, tier) == POL_TIER_NONE;
	s->prefix_rule = pol_cache_prefix_rule(c);
	if (tier != POL_TIER_GPU) {
		s->st = ((struct asym *)pol_cache_gpu_policy(c))->st;
	} else {
		uint64_t total = 0;

		s->st = calloc(1, sizeof(*s->st));
		if (!s->st) {
			free(s);
			return -ENOMEM;
		}
		for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
			uint64_t cap = pol_cache_capacity(c, t);

			total += cap < (1ull << 24) ? cap : 1ull << 24;
		}
		/*
		 * History is cheap next to a KV block (an index entry per
		 * block and 6 bytes per use): follow every life for at
		 * least HISTORY_MIN uses whatever the capacity, so a small
		 * cache still sees the returns that come minutes later, and
		 * for twice the capacity in a large one; halve the counts
		 * every 4 x that many uses, so they follow the workload.
		 */
		s->st->history = HISTORY_MIN;
		while (s->st->history < 2 * total)
			s->st->history *= 2;
		s->st->hist_buckets = age_bucket(s->st->history);
		s->st->period = 4 * s->st->history;
		s->st->rebuild_every = s->st->history / 64 > REBUILD_MIN ?
					       s->st->history / 64 :
					       REBUILD_MIN;
		s->st->next_decay = s->st->period;
		/* read and written at random by returns: huge pages */
		s->st->life_id =
			pol_mem_map(s->st->history * sizeof(*s->st->life_id));
		s->st->life_code =
			pol_mem_map(s->st->history * sizeof(*s->st->life_code));
		if (!s->st->life_id || !s->st->life_code) {
			life_unmap(s->st);
			free(s->st);
			free(s);
			return -ENOMEM;
		}
	}
	*priv = s;
	return 0;
}

static void asym_destroy(void *priv)
{
	struct asym *s = priv;

	if (s->tier == POL_TIER_GPU) {
		life_unmap(s->st);
		free(s->st);
	}
	free(s);
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
};
