/* SPDX-License-Identifier: MIT */
/*
 * asym: the online learning of the return hazards, and the value of
 * keeping a block of a class at an age, which the victim choice in
 * pol_asym.c reads from value[][] (struct asym_stats).
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
 * data and value 0.  The counts are halved every 4 x `history` uses, so
 * they follow the workload, and the values are rebuilt from them every
 * history/64 uses.
 */
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "kvmm/policy/pol_asym_priv.h"
#include "kvmm/policy/pol_mem.h"

static double bucket_width(unsigned b)
{
	return b < 4 ? 1 : (double)(1ull << (b / 4 - 1)); /* exact */
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

/*
 * 1 + the tick of the use that started the block's open life (0: none),
 * kept in the GPU slot's key (every use lands on the GPU tier; the cache
 * has already overwritten b->tick when the policy hears of it).
 */
static uint64_t seen_tick(const struct pol_block *b)
{
	return (uint64_t)b->slot[POL_TIER_GPU].key;
}

/*
 * *r += 1, n times: one addition when every partial sum is exact (always,
 * in practice: the counts are far below 2^53 times their finest bit), so
 * the result is the same as adding one life at a time.
 */
static void add_ones(double *r, uint64_t n)
{
	double limit;
	int e;

	if (!n)
		return; /* most classes, most buckets: no frexp() */
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
	/*
	 * A life comes back within the history (its slot is reused after
	 * `history` ticks): at an age below history, in a bucket <=
	 * hist_buckets, so no code reaches further than this.
	 */
	unsigned rmax = st->hist_buckets + 1 < AGE_BUCKETS ?
				st->hist_buckets + 1 :
				AGE_BUCKETS;

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
			/* the codes that occur: reach 0 .. rmax, LIFE_OPEN */
			memset(hist, 0,
			       sizeof(hist[0]) * (rmax + 1) << CLS_BITS);
			memset(&hist[LIFE_OPEN << CLS_BITS], 0,
			       sizeof(hist[0]) << CLS_BITS);
			hist_range(st, hist, lo, hi, 1);
		}
		valid = true;
		wlo = lo;
		whi = hi;
		for (unsigned k = 0; k < NCLASS; k++) {
			/* how far: LIFE_OPEN, or a bucket + 1 <= rmax */
			uint64_t n = hist[LIFE_OPEN << CLS_BITS | k];

			for (unsigned r = x + 1; r <= rmax; r++)
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

/* No life of class k counted yet (its hazard is the pooled one)? */
static bool class_unseen(const struct asym_stats *st, unsigned k)
{
	for (unsigned x = 0; x < AGE_BUCKETS; x++)
		if (st->ret[k][x] != 0 || st->reach[k][x] != 0)
			return false;
	return true;
}

static void rebuild(struct asym_stats *st)
{
	double hall[AGE_BUCKETS], h[AGE_BUCKETS], width[AGE_BUCKETS];
	int unseen = -1; /* a class without lives, valued */

	st->gen++;
	for (unsigned x = 0; x < AGE_BUCKETS; x++)
		width[x] = bucket_width(x);

	for (unsigned x = 0; x < AGE_BUCKETS; x++) {
		double r = 0, n = 0;

		for (unsigned k = 0; k < NCLASS; k++) {
			r += st->ret[k][x];
			n += st->reach[k][x];
		}
		hall[x] = n > 0 ? r / n : 0;
	}
	for (unsigned k = 0; k < NCLASS; k++) {
		bool none = class_unseen(st, k);

		/* the classes without lives have the same values */
		if (none && unseen >= 0) {
			memcpy(st->value[k], st->value[unseen],
			       sizeof(st->value[k]));
			continue;
		}
		if (none)
			unseen = (int)k;
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
				den += surv * (1 - h[x] / 2) * width[x];
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

/*
 * The learned state: the counts the hazards come from, ret[][] and
 * reach[][] (values are rebuilt from them), as
 *
 *   u32 classes, u32 age buckets, u64 ticks to the next halving of the
 *   counts, then ret and reach row by row, each count the IEEE-754 bits
 *   of its double as a little-endian u64,
 *
 * so that a build with other classes or buckets refuses it (-ESTALE)
 * instead of reading it wrong, and the halvings keep their pace across a
 * restart (a restart before each one would otherwise make the counts
 * remember the whole past alike).  The ring of open lives is not kept:
 * the blocks it follows are gone with the cache.
 */
#define STATE_COUNTS (2 * NCLASS * AGE_BUCKETS)
#define STATE_BYTES (16 + 8 * STATE_COUNTS)

size_t asym_stats_save(struct asym_stats *st, uint64_t now, void *buf,
		       size_t len)
{
	unsigned char *p = buf;
	uint32_t dims[2] = { htole32(NCLASS), htole32(AGE_BUCKETS) };
	uint64_t decay_in;

	if (len < STATE_BYTES)
		return STATE_BYTES;
	count_reach(st, now); /* the lives the ring passed since a rebuild */
	decay_in = htole64(st->next_decay > now ? st->next_decay - now : 1);
	memcpy(p, dims, sizeof(dims));
	p += sizeof(dims);
	memcpy(p, &decay_in, sizeof(decay_in));
	p += sizeof(decay_in);
	for (unsigned i = 0; i < 2; i++) {
		double(*m)[AGE_BUCKETS] = i ? st->reach : st->ret;

		for (unsigned k = 0; k < NCLASS; k++) {
			for (unsigned x = 0; x < AGE_BUCKETS; x++) {
				uint64_t u;

				memcpy(&u, &m[k][x], sizeof(u));
				u = htole64(u);
				memcpy(p, &u, sizeof(u));
				p += sizeof(u);
			}
		}
	}
	return STATE_BYTES;
}

/* The counts of a saved state into m[0] (ret) and m[1] (reach). */
static int state_parse(const void *buf, size_t len,
		       double (*m)[NCLASS][AGE_BUCKETS], uint64_t *decay_in)
{
	const unsigned char *p = buf;
	uint32_t dims[2];

	if (len < sizeof(dims))
		return -EINVAL;
	memcpy(dims, p, sizeof(dims));
	if (le32toh(dims[0]) != NCLASS || le32toh(dims[1]) != AGE_BUCKETS)
		return -ESTALE;
	if (len != STATE_BYTES)
		return -EINVAL;
	p += sizeof(dims);
	memcpy(decay_in, p, sizeof(*decay_in));
	p += sizeof(*decay_in);
	*decay_in = le64toh(*decay_in);
	if (!*decay_in)
		return -EINVAL;
	for (unsigned i = 0; i < 2; i++) {
		for (unsigned k = 0; k < NCLASS; k++) {
			for (unsigned x = 0; x < AGE_BUCKETS; x++) {
				uint64_t u;
				double v;

				memcpy(&u, p, sizeof(u));
				p += sizeof(u);
				u = le64toh(u);
				memcpy(&v, &u, sizeof(v));
				/* counts: finite, not negative */
				if (!(v >= 0 && v <= 1e300))
					return -EINVAL;
				m[i][k][x] = v;
			}
		}
	}
	return 0;
}

/*
 * A loaded state is a prior, not the truth: it weighs at most as much as
 * LOAD_PRIOR_SHARE of a history of new lives, so what this run sees soon
 * outweighs it.  A state from the same workload keeps nearly all its use
 * (kvmm-replay --restart-every, the conversation trace: hit blocks within
 * 1 % of the full weight's), one from another workload costs about half
 * as much as at full weight (policy.md, "Restarts").
 */
#define LOAD_PRIOR_SHARE 0.5

int asym_stats_load(struct asym_stats *st, const void *buf, size_t len,
		    uint64_t *lives)
{
	double cap = LOAD_PRIOR_SHARE * (double)st->history, f;
	double(*m)[NCLASS][AGE_BUCKETS] = malloc(2 * sizeof(*m));
	uint64_t decay_in;
	double n = 0;
	int e;

	if (!m)
		return -ENOMEM;
	e = state_parse(buf, len, m, &decay_in);
	if (e) {
		free(m);
		return e;
	}
	/* every life is counted at age 0 when it starts */
	for (unsigned k = 0; k < NCLASS; k++)
		n += m[1][k][0];
	f = n > cap ? cap / n : 1;
	for (unsigned k = 0; k < NCLASS; k++) {
		for (unsigned x = 0; x < AGE_BUCKETS; x++) {
			st->ret[k][x] = m[0][k][x] * f;
			st->reach[k][x] = m[1][k][x] * f;
		}
	}
	free(m);
	/* the same pace (a shorter period, another capacity: at most one) */
	st->next_decay = decay_in < st->period ? decay_in : st->period;
	rebuild(st);
	if (lives) /* as saved, before the cap */
		*lives = n < 1.8e19 ? (uint64_t)n : UINT64_MAX;
	return 0;
}

/* The age (block uses) by which a share q of ret[0..) had come back. */
static uint64_t return_age(const double *ret, double total, double q)
{
	double sum = 0;

	for (unsigned x = 0; x < AGE_BUCKETS; x++) {
		sum += ret[x];
		if (sum >= q * total)
			return bucket_start(x);
	}
	return 0;
}

int asym_stats_describe(const void *buf, size_t len,
			struct pol_learned_summary *out)
{
	double(*m)[NCLASS][AGE_BUCKETS] = malloc(2 * sizeof(*m));
	int e;

	if (!m)
		return -ENOMEM;
	e = state_parse(buf, len, m, &out->decay_in);
	if (e) {
		free(m);
		return e;
	}
	out->nclass = NCLASS;
	for (unsigned k = 0; k < NCLASS; k++) {
		struct pol_learned_class *c = &out->cls[k];
		unsigned t = k % TURNS + 1;
		double r = 0;

		snprintf(c->name, sizeof(c->name), "class %u%s%s", t,
			 t == TURNS ? "+" : "", k >= TURNS ? ", few new" : "");
		for (unsigned x = 0; x < AGE_BUCKETS; x++)
			r += m[0][k][x];
		c->lives = m[1][k][0];
		c->returns = r;
		c->median_age = r > 0 ? return_age(m[0][k], r, 0.5) : 0;
		c->p90_age = r > 0 ? return_age(m[0][k], r, 0.9) : 0;
	}
	free(m);
	return 0;
}

/* Ticks ahead at which asym_learn() starts loading an expiring life's
 * entry, and then that block's index slot (freed if it is in no tier). */
#define EXPIRE_AHEAD 8
#define EXPIRE_AHEAD_SLOT 4

/* A use of b at tick now (GPU instance: every use lands there). */
void asym_learn(struct asym *s, struct pol_block *b)
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
	periodic(st, now);
}

static void life_unmap(struct asym_stats *st)
{
	pol_mem_unmap(st->life_id, st->history * sizeof(*st->life_id));
	pol_mem_unmap(st->life_code, st->history * sizeof(*st->life_code));
}

/*
 * History is cheap next to a KV block (an index entry per block and
 * 6 bytes per use): follow every life for at least HISTORY_MIN uses
 * whatever the capacity, so a small cache still sees the returns that
 * come minutes later, and for twice the capacity of all tiers in a large
 * one; halve the counts every 4 x that many uses, so they follow the
 * workload.
 */
static uint64_t history_for(const struct pol_cache *c)
{
	uint64_t total = 0, history = HISTORY_MIN;

	for (unsigned t = 0; t < POL_TIER_COUNT; t++) {
		uint64_t cap = pol_cache_capacity(c, t);

		total += cap < (1ull << 24) ? cap : 1ull << 24;
	}
	while (history < 2 * total)
		history *= 2;
	return history;
}

/* The paces that follow from st->history. */
static void set_history(struct asym_stats *st, uint64_t history)
{
	st->history = history;
	st->hist_buckets = age_bucket(history);
	st->period = 4 * history;
	st->rebuild_every = history / 64 > REBUILD_MIN ? history / 64 :
							 REBUILD_MIN;
}

/* The statistics of cache c (its GPU instance creates them). */
int asym_stats_create(struct pol_cache *c, struct asym_stats **out)
{
	struct asym_stats *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	set_history(st, history_for(c));
	st->next_decay = st->period;
	/* read and written at random by returns: huge pages */
	st->life_id = pol_mem_map(st->history * sizeof(*st->life_id));
	st->life_code = pol_mem_map(st->history * sizeof(*st->life_code));
	if (!st->life_id || !st->life_code) {
		life_unmap(st);
		free(st);
		return -ENOMEM;
	}
	*out = st;
	return 0;
}

/*
 * A tier joined the cache at tick now (kvmmd's NVMe tier whose file
 * opened late, pol_cache_set_capacity()): follow the lives as long as
 * asym_stats_create() would have with that capacity from the start, or
 * a large late tier keeps the history of the tiers above it, and returns
 * at the ages its blocks are kept for are never learned (they value 0).
 *
 * The ring grows, never shrinks (a tier emptied to 0 may come back, and
 * the lives in the ring are what the values stand on).  Slot
 * t & (history - 1) holds the life of tick t for `history` ticks, so the
 * last old-history ticks move to their slots in the larger ring and the
 * others start empty (their lives had ended when their slots were
 * reused); every open life is among those moved, so each block's seen
 * tick still finds its life.  The age buckets the old ring did not span
 * count their lives from the oldest moved tick on: before it there are
 * none.  On -ENOMEM the history stays as it was.
 */
int asym_stats_fit(struct asym_stats *st, const struct pol_cache *c,
		   uint64_t now)
{
	uint64_t history = history_for(c), old = st->history, from;
	unsigned old_buckets = st->hist_buckets;
	uint32_t *id;
	uint16_t *code;

	if (history <= old)
		return 0;
	id = pol_mem_map(history * sizeof(*id));
	code = pol_mem_map(history * sizeof(*code));
	if (!id || !code) {
		if (id)
			pol_mem_unmap(id, history * sizeof(*id));
		if (code)
			pol_mem_unmap(code, history * sizeof(*code));
		return -ENOMEM;
	}
	from = now >= old ? now - old + 1 : 0;
	for (uint64_t t = from; t <= now; t++) {
		id[t & (history - 1)] = st->life_id[t & (old - 1)];
		code[t & (history - 1)] = st->life_code[t & (old - 1)];
	}
	life_unmap(st);
	st->life_id = id;
	st->life_code = code;
	set_history(st, history);
	for (unsigned x = old_buckets; x < st->hist_buckets; x++)
		st->counted[x] = from;
	/* the next decay as due; the ones after it at the new pace */
	return 0;
}

void asym_stats_destroy(struct asym_stats *st)
{
	life_unmap(st);
	free(st);
}
