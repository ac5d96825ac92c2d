/* SPDX-License-Identifier: MIT */
/*
 * Private to the asym policy: the state its files share and the calls
 * between them.  pol_asym.c keeps the lists (its top comment is the
 * overview), pol_asym_victim.c chooses the victims, pol_asym_stats.c
 * learns the return hazards and values the blocks, pol_asym_win.c keeps
 * the end windows of the lists.  What one file runs at every decision on
 * another's data is static inline here: the class and age of a block,
 * whether it is held, and the windows' deque steps that every list
 * change takes.
 */
#ifndef KVMM_POLICY_POL_ASYM_PRIV_H
#define KVMM_POLICY_POL_ASYM_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#ifdef POL_ASYM_CHECK
#include <assert.h>
#endif

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
#ifndef SCAN_TAIL /* tests/policy-asym-windows.c: 1 is the tail alone */
#define SCAN_TAIL 64 /* least recent blocks of a list valued for a victim */
#endif

/* Age bucket: exact below 4, then 4 sub-buckets per power of two. */
static inline unsigned age_bucket(uint64_t a)
{
	unsigned e, b;

	if (a < 4)
		return (unsigned)a;
	e = 63 - (unsigned)__builtin_clzll(a);
	b = 4 * (e - 1) + (unsigned)((a >> (e - 2)) & 3);
	return b < AGE_BUCKETS ? b : AGE_BUCKETS - 1;
}

static inline uint64_t bucket_start(unsigned b)
{
	return b < 4 ? b : (uint64_t)(4 + b % 4) << (b / 4 - 1);
}

/*
 * Learned statistics, shared by the tiers (owned by the GPU instance);
 * pol_asym_stats.c describes the lives and the values.
 */
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
 * (see newer_key()); pol_asym_win.c says why.
 */
#define WIN SORT_MAX
_Static_assert(SCAN_TAIL < WIN, "asym: the victim scan stays in the window");
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
	 * (bounds that only widen while blocks come and go): a place search
	 * (asym_sorted_place()) skips a window that cannot hold the place.
	 */
	struct asym_wslot top, bottom;
	struct asym_wslot e[WIN];
};

/*
 * The candidate of a list as asym_victim() last chose it: block id at
 * the use of tick `tick` (a block and a tick name one state of a block:
 * any use changes the tick), evictable with no TTL, of value v while the
 * ticks stay below `until` (the first tick at which one of the blocks it
 * was chosen among changes its age bucket) and the tail window is at
 * change `ver` of the list's tw_ver (a rebuild of the values counts as a
 * change of every window: asym_victim()).  A pin, a reference, a TTL or
 * a priority goes through asym_change(), which unvalues it.
 */
struct asym_cand {
	uint32_t id; /* POL_NONE: none */
	uint32_t idx; /* its index in the tail window (< SCAN_TAIL) */
	bool valued; /* bv is its block_value(), and it may be evicted */
	unsigned x; /* its age bucket */
	uint64_t tick, until, ver;
	/*
	 * Ages alo .. alo + awid - 1 are bucket x (awid 0 for the last
	 * bucket), of value xv for a whole block: a slot of that age is
	 * valued without finding its bucket (most of the reach is there).
	 */
	uint64_t alo, awid;
	double xv;
	double v; /* its class's value at its age (-1: partial) */
	double bv;
};

struct asym_list {
	uint32_t head, tail; /* head = most recent */
	uint64_t len;
	uint64_t tw_ver; /* changes of the tail window (tw) so far */
	struct asym_cand cand;
	struct asym_win hw, tw; /* blocks from the head, from the tail */
};

struct asym {
	struct pol_cache *c;
	struct pol_index *ix;
	unsigned tier;
	bool last_tier;
	bool prefix_rule; /* the cache's (fixed when it is created) */
	bool msa; /* pol_cache_msa(): a miss costs its own position */
	struct asym_list list[NCLASS];
	/* bit k: list[k] holds blocks; the victim scan visits only those
	 * (a list is 16 KB with its windows: its tail is a miss) */
	uint32_t nonempty;
	struct asym_stats *st; /* the GPU instance's */
	uint64_t gen; /* st->gen when the candidates were last chosen */
	/* GPU instance: the blocks used at the last two ticks (note_use()) */
	uint32_t used_id[2];
	uint64_t used_tick[2];
};

#define SLOT(s, id) (&(s)->ix->blocks[id].slot[(s)->tier])

/*
 * Where a block goes in list k: after block `after` (toward the tail), or
 * at the head (POL_NONE).  `at` is after's place from the head when the
 * caller knows it (UINT64_MAX: not known).
 */
struct asym_place {
	uint32_t after;
	uint64_t at;
};

/*
 * The class of a block: the turn of the request that last used it
 * (turn + access_count - 1 for linear sessions), capped at TURNS, then
 * TURNS more classes for the same turns when that request was short.
 */
static inline unsigned block_class(const struct pol_block *b)
{
	uint64_t t = (uint64_t)b->turn + b->access_count;

	t = t > 1 ? t - 1 : 1;
	return (t < TURNS ? (unsigned)t - 1 : TURNS - 1) +
	       (b->few_new ? TURNS : 0);
}

/*
 * Does a block with key ka, position pa come before one with kb, pb in a
 * list (more recent, or same request and nearer the root)?  A request
 * uses its blocks at consecutive ticks from the root on, so the key
 * tick - position is the same for all of them and grows from one request
 * to the next.  Ticks, not the owner's clock: the order must be the same
 * in kvmmd (ns) and in a replay.
 */
static inline bool newer_key(int64_t ka, uint32_t pa, int64_t kb, uint32_t pb)
{
	return ka > kb || (ka == kb && pa < pb);
}

static inline int64_t block_key(const struct pol_block *b)
{
	return (int64_t)(b->tick - b->position);
}

/*
 * Pinned or referenced (an in-flight step, an open sequence): such a
 * block stays out of the lists while held (parked), so that a decision
 * never walks past it, however many a tier holds.
 */
static inline bool held(const struct pol_block *b)
{
	return b->pins || b->refcount;
}

/*
 * A block's position in the windows, with a bit for a partial block (the
 * victim scan reads the windows alone).  A partial block is the last of
 * its request, the deepest of its key, so the bit keeps every order.
 */
#define WPOS_PARTIAL (1u << 31)

static inline uint32_t win_pos(const struct pol_block *b)
{
	return (b->position & ~WPOS_PARTIAL) |
	       (b->flags & POL_BLOCK_PARTIAL ? WPOS_PARTIAL : 0);
}

/* e entered window w, or its key changed: widen w's bounds to it. */
static inline void win_bound(struct asym_win *w, const struct asym_wslot *e)
{
	if (newer_key(e->key, e->pos, w->top.key, w->top.pos))
		w->top = *e;
	if (newer_key(w->bottom.key, w->bottom.pos, e->key, e->pos))
		w->bottom = *e;
}

static inline struct asym_wslot *win_at(struct asym_win *w, uint32_t i)
{
	return &w->e[(w->start + i) & (WIN - 1)];
}

static inline uint32_t win_find(struct asym_win *w, uint32_t id)
{
	uint32_t i = 0;

	while (win_at(w, i)->id != id)
		i++;
	return i;
}

static inline void win_slot(const struct pol_block *b, uint32_t id,
			    struct asym_wslot *e)
{
	e->key = block_key(b);
	e->id = id;
	e->pos = win_pos(b);
}

/* Start loading what the windows read and write of block id. */
static inline void win_prefetch(struct asym *s, uint32_t id)
{
	if (id != POL_NONE) {
		__builtin_prefetch(pol_index_at(s->ix, id), 1);
		__builtin_prefetch(SLOT(s, id), 1);
	}
}

/*
 * The windows' deque steps.  The list code in pol_asym.c takes them at
 * every change of a list; called out of line in pol_asym_win.c they cost
 * about 1 % more instructions a decision (bench/policy under callgrind).
 */

/* Insert at index i (<= n < WIN), moving the shorter side. */
static inline void win_insert(struct asym_win *w, uint32_t i,
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

static inline void win_remove(struct asym_win *w, uint32_t i)
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

/*
 * Put id at index i of window w (flag f) unless i is past the window;
 * a full window drops its last block.
 */
static inline void win_enter(struct asym *s, struct asym_win *w, unsigned f,
			     uint32_t i, const struct asym_wslot *e)
{
	if (i >= WIN)
		return;
	if (w->n == WIN)
		SLOT(s, win_at(w, --w->n)->id)->flags &= (uint8_t)~f;
	win_insert(w, i, e);
	SLOT(s, e->id)->flags |= (uint8_t)f;
}

/*
 * Append block id (the next one past a window that lost a block) and
 * start loading the one after it, which the next refill takes.
 */
static inline void win_refill(struct asym *s, struct asym_win *w, unsigned f,
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

/* pol_asym_stats.c */
int asym_stats_create(struct pol_cache *c, struct asym_stats **st);
void asym_stats_destroy(struct asym_stats *st);
int asym_stats_fit(struct asym_stats *st, const struct pol_cache *c,
		   uint64_t now);
void asym_learn(struct asym *s, struct pol_block *b);
/* pol_ops.learned_save / learned_load of the GPU instance's statistics
 * (now: the cache's tick, to count the lives the ring has passed). */
size_t asym_stats_save(struct asym_stats *st, uint64_t now, void *buf,
		       size_t len);
int asym_stats_load(struct asym_stats *st, const void *buf, size_t len,
		    uint64_t *lives);
/* pol_learned_describe() of asym's bytes */
int asym_stats_describe(const void *buf, size_t len,
			struct pol_learned_summary *out);

/* pol_asym_win.c */
void asym_win_init(struct asym_win *w);
struct asym_place asym_sorted_place(struct asym *s, unsigned k,
				    const struct pol_block *b);
#ifdef POL_ASYM_CHECK
void asym_win_check(struct asym *s, struct asym_list *l);
#else
static inline void asym_win_check(struct asym *s, struct asym_list *l)
{
	(void)s;
	(void)l;
}
#endif

/* pol_asym.c: make index i of l's tail window, of value v, the candidate */
void asym_cand_set(const struct asym *s, struct asym_list *l, uint32_t i,
		   double v, uint64_t now, bool fresh);

/* pol_asym_victim.c: pol_ops.victim */
struct pol_block *asym_victim(void *priv);

#endif
