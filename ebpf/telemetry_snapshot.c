// SPDX-License-Identifier: MIT
/*
 * Telemetry snapshots: the tables every poll builds and every lookup
 * reads, whichever the source (struct tel_snapshot, telemetry_int.h).
 *
 * A snapshot is an open-addressing table of block statistics (linear
 * probing, a power of two at most 3/4 full, no tombstones), a sorted
 * array of histogram rows and the summed counters.  The same table holds
 * the shm source's retired blocks, which tel_snap_prune() keeps to their
 * bound.  Merging the same block from several sessions (or BPF entries
 * of several uids) adds counts and access rates (the gap EWMAs combine
 * as 1/g = 1/g1 + 1/g2) and keeps the latest access; counts stop at
 * UINT64_MAX instead of wrapping.
 *
 * Apart from the sources and the polls (telemetry_shm_source.c,
 * telemetry_poll.c, telemetry_delta.c) because it is plain data
 * structure code they all share: no BPF, no shared memory, no threads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_int.h"
#include "ebpf/telemetry_shm.h" /* kvmm_tel_hist_key_pack() */

struct tel_snapshot *tel_snap_new(size_t want_blocks)
{
	struct tel_snapshot *s = calloc(1, sizeof(*s));
	size_t cap = 64;

	if (!s)
		return NULL;
	while (cap < want_blocks * 2)
		cap <<= 1;
	s->blocks = calloc(cap, sizeof(*s->blocks));
	if (!s->blocks) {
		free(s);
		return NULL;
	}
	s->cap = cap;
	return s;
}

void tel_snap_free(struct tel_snapshot *s)
{
	if (!s)
		return;
	free(s->blocks);
	free(s->rows);
	free(s);
}

static size_t slot_of(uint64_t hash, size_t cap)
{
	return (size_t)((hash * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

const struct tel_block_ent *tel_snap_find(const struct tel_snapshot *s,
					  uint64_t hash)
{
	size_t i, n;

	if (!s)
		return NULL;
	for (i = slot_of(hash, s->cap), n = 0; n < s->cap;
	     i = (i + 1) & (s->cap - 1), n++) {
		if (!s->blocks[i].used)
			return NULL;
		if (s->blocks[i].hash == hash)
			return &s->blocks[i];
	}
	return NULL;
}

static int snap_grow(struct tel_snapshot *s)
{
	struct tel_block_ent *old = s->blocks, *nb;
	size_t oldcap = s->cap, i, j;

	nb = calloc(oldcap * 2, sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	s->blocks = nb;
	s->cap = oldcap * 2;
	for (i = 0; i < oldcap; i++) {
		if (!old[i].used)
			continue;
		for (j = slot_of(old[i].hash, s->cap); nb[j].used;
		     j = (j + 1) & (s->cap - 1))
			;
		nb[j] = old[i];
	}
	free(old);
	return 0;
}

/* Combine two views of one block (see the header comment). */
void tel_stats_merge(struct kvmm_block_stats *d,
		     const struct kvmm_block_stats *s)
{
	if (!d->count) {
		*d = *s;
		return;
	}
	if (d->ewma_gap_ns && s->ewma_gap_ns)
		d->ewma_gap_ns =
			(uint64_t)(1.0 / (1.0 / (double)d->ewma_gap_ns +
					  1.0 / (double)s->ewma_gap_ns));
	else if (!d->ewma_gap_ns)
		d->ewma_gap_ns = s->ewma_gap_ns;
	d->count = tel_sat_add(d->count, s->count);
	if (s->first_ns < d->first_ns)
		d->first_ns = s->first_ns;
	if (s->last_ns > d->last_ns) {
		d->last_ns = s->last_ns;
		d->last_seq = s->last_seq;
		d->last_tier = s->last_tier;
		d->last_pid = s->last_pid;
	}
}

/* Add a block's report to s (merged with s's), by owner (0: none); the
 * entry's owner is the one of its latest access. */
int tel_snap_put(struct tel_snapshot *s, uint64_t hash,
		 const struct kvmm_block_stats *st, uint64_t owner)
{
	size_t i;

	if (!st->count)
		return 0;
	if ((s->nr_blocks + 1) * 4 > s->cap * 3 && snap_grow(s))
		return -ENOMEM;
	for (i = slot_of(hash, s->cap);; i = (i + 1) & (s->cap - 1)) {
		struct tel_block_ent *e = &s->blocks[i];

		if (!e->used) {
			e->used = 1;
			e->hash = hash;
			e->owner = owner;
			e->s = *st;
			s->nr_blocks++;
			return 0;
		}
		if (e->hash == hash) {
			if (st->last_ns >= e->s.last_ns)
				e->owner = owner;
			tel_stats_merge(&e->s, st);
			return 0;
		}
	}
}

int tel_snap_get(const struct tel_snapshot *s, uint64_t hash,
		 struct kvmm_block_stats *out)
{
	const struct tel_block_ent *e = tel_snap_find(s, hash);

	if (!e)
		return -ENOENT;
	*out = e->s;
	return 0;
}

int tel_snap_set(struct tel_snapshot *s, uint64_t hash,
		 const struct kvmm_block_stats *st)
{
	struct tel_block_ent *e =
		(struct tel_block_ent *)tel_snap_find(s, hash);

	if (e) {
		e->s = *st;
		return 0;
	}
	return tel_snap_put(s, hash, st, 0);
}

/* Linear probing without tombstones: the entries after the removed one
 * move back unless their home slot lies between (cyclically). */
void tel_snap_del(struct tel_snapshot *s, uint64_t hash)
{
	const struct tel_block_ent *e = tel_snap_find(s, hash);
	size_t mask = s->cap - 1, i, j, h;

	if (!e)
		return;
	i = j = (size_t)(e - s->blocks);
	for (;;) {
		j = (j + 1) & mask;
		if (!s->blocks[j].used)
			break;
		h = slot_of(s->blocks[j].hash, s->cap);
		if (i <= j ? (h > i && h <= j) : (h > i || h <= j))
			continue;
		s->blocks[i] = s->blocks[j];
		i = j;
	}
	memset(&s->blocks[i], 0, sizeof(s->blocks[i]));
	s->nr_blocks--;
}

void tel_snap_clear(struct tel_snapshot *s)
{
	memset(s->blocks, 0, s->cap * sizeof(*s->blocks));
	s->nr_blocks = 0;
}

static int row_cmp(const void *a, const void *b)
{
	const struct tel_hist_row *x = a, *y = b;

	return x->packed < y->packed ? -1 : x->packed > y->packed;
}

struct tel_hist_row *tel_snap_find_row(const struct tel_snapshot *s,
				       uint64_t packed)
{
	struct tel_hist_row key = { .packed = packed };

	if (!s || !s->nr_rows)
		return NULL;
	return bsearch(&key, s->rows, s->nr_rows, sizeof(key), row_cmp);
}

/* Rows are appended unsorted while building and sorted by tel_snap_finish(). */
int tel_snap_add_hist(void *arg, const struct kvmm_hist_key *key,
		      const struct kvmm_hist *h)
{
	struct tel_snapshot *s = arg;
	uint64_t packed = kvmm_tel_hist_key_pack(key);
	struct tel_hist_row *r = NULL;
	size_t i;

	for (i = 0; i < s->nr_rows; i++) {
		if (s->rows[i].packed == packed) {
			r = &s->rows[i];
			break;
		}
	}
	if (!r) {
		if (s->nr_rows == s->cap_rows) {
			size_t cap = s->cap_rows ? s->cap_rows * 2 : 32;
			void *p = realloc(s->rows, cap * sizeof(*s->rows));

			if (!p)
				return -ENOMEM;
			s->rows = p;
			s->cap_rows = cap;
		}
		r = &s->rows[s->nr_rows++];
		memset(r, 0, sizeof(*r));
		r->packed = packed;
		r->key = *key;
	}
	r->h.count = tel_sat_add(r->h.count, h->count);
	r->h.sum_ns = tel_sat_add(r->h.sum_ns, h->sum_ns);
	r->h.sum_bytes = tel_sat_add(r->h.sum_bytes, h->sum_bytes);
	for (i = 0; i < KVMM_TEL_HIST_BUCKETS; i++)
		r->h.buckets[i] = tel_sat_add(r->h.buckets[i], h->buckets[i]);
	return 0;
}

void tel_snap_finish(struct tel_snapshot *s)
{
	if (s->nr_rows)
		qsort(s->rows, s->nr_rows, sizeof(*s->rows), row_cmp);
}

void tel_counters_add(struct kvmm_counters *d, const struct kvmm_counters *s)
{
	/* the fields' own type: a uint64_t (long) would not alias them */
	const __u64 *src = (const __u64 *)s;
	__u64 *dst = (__u64 *)d;
	size_t i;

	for (i = 0; i < sizeof(*d) / sizeof(*dst); i++)
		dst[i] = tel_sat_add(dst[i], src[i]);
}

/* The rows and counters of one snapshot into another (blocks apart). */
int tel_snap_merge_rows(struct tel_snapshot *d, const struct tel_snapshot *s)
{
	size_t i;
	int err;

	for (i = 0; i < s->nr_rows; i++) {
		err = tel_snap_add_hist(d, &s->rows[i].key, &s->rows[i].h);
		if (err)
			return err;
	}
	tel_counters_add(&d->counters, &s->counters);
	return 0;
}

/* An entry of a table being pruned, as tel_snap_prune() orders them. */
struct prune_ent {
	uint64_t owner, last_ns;
	size_t idx; /* in the table */
	bool over; /* past its owner's share */
};

/* By owner, then the latest access first. */
static int prune_by_owner(const void *a, const void *b)
{
	const struct prune_ent *x = a, *y = b;

	if (x->owner != y->owner)
		return x->owner < y->owner ? -1 : 1;
	return x->last_ns > y->last_ns ? -1 : x->last_ns < y->last_ns;
}

/* The order entries leave in: those past their owner's share, then the
 * others, each the least recently accessed first. */
static int prune_order(const void *a, const void *b)
{
	const struct prune_ent *x = a, *y = b;

	if (x->over != y->over)
		return x->over ? -1 : 1;
	return x->last_ns < y->last_ns ? -1 : x->last_ns > y->last_ns;
}

/*
 * Keep `keep` blocks of s, in a table rebuilt without the others: the
 * least recently accessed leave first (the LRU's choice, by last_ns),
 * except that entries past the `share` latest of their owner (an owner
 * 0 included) leave before any other.  One writer can thus push out of
 * the table only its own entries once it holds its share, however many
 * blocks it makes up; alone, it is kept as an LRU would keep it.
 */
int tel_snap_prune(struct tel_snapshot *s, size_t keep, size_t share)
{
	struct tel_block_ent *nb;
	struct prune_ent *pe;
	size_t i, j, n = 0, run = 0;

	if (s->nr_blocks <= keep)
		return 0;
	pe = malloc(s->nr_blocks * sizeof(*pe));
	nb = calloc(s->cap, sizeof(*nb));
	if (!pe || !nb) {
		free(pe);
		free(nb);
		return -ENOMEM;
	}
	for (i = 0; i < s->cap; i++)
		if (s->blocks[i].used)
			pe[n++] = (struct prune_ent){
				.owner = s->blocks[i].owner,
				.last_ns = s->blocks[i].s.last_ns,
				.idx = i,
			};
	qsort(pe, n, sizeof(*pe), prune_by_owner);
	for (i = 0; i < n; i++) {
		run = i && pe[i].owner == pe[i - 1].owner ? run + 1 : 0;
		pe[i].over = run >= share;
	}
	qsort(pe, n, sizeof(*pe), prune_order);
	/* the first n - keep leave */
	for (i = n - keep; i < n; i++) {
		const struct tel_block_ent *e = &s->blocks[pe[i].idx];

		for (j = slot_of(e->hash, s->cap); nb[j].used;
		     j = (j + 1) & (s->cap - 1))
			;
		nb[j] = *e;
	}
	free(pe);
	free(s->blocks);
	s->blocks = nb;
	s->nr_blocks = keep;
	return 0;
}
