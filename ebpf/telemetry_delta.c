// SPDX-License-Identifier: MIT
/*
 * The loader's BPF poll, in proportion to what changed.
 *
 * The programs queue each kvmm_blocks entry that changes on the
 * kvmm_dirty ring once per poll epoch (kvmm.bpf.c).  A poll bumps the
 * epoch, drains the ring and looks up the entries it names, and keeps
 * from poll to poll
 *
 *  - the entries as it last read them (`raw`: key -> name the rename
 *    hook gave, stats), and
 *  - for each name, the keys of the entries that carry it (`names`), so
 *    that the snapshot's merged block of a name is built again from its
 *    own entries when one of them changed, never from the whole map.
 *
 * The poll is in two halves, as tel_poll_begin()/tel_poll_end() split
 * it: tel_delta_collect() (the poll's thread) reads the kernel and
 * lists the entries that changed against `raw`, which it only reads;
 * tel_delta_apply() (the caller's loop) takes them into `raw`, `names`
 * and the snapshot, and feeds the sink the blocks that changed.
 *
 * No count is lost: an access is counted before its entry is marked
 * with the epoch it reads, so an access that did not queue its entry
 * (another one did, in the same epoch) was counted before that epoch
 * ended; a record read while its epoch is still the current one is read
 * again at the next poll, after the epoch moved on (the argument is in
 * Documentation/telemetry.md).  The whole map is walked instead at the
 * first poll, after the rename hook changed, when the ring was full
 * (that poll and the next: a record it lost may belong to the epoch then
 * current), when `raw` holds an eighth more entries than the map can
 * (entries the LRU dropped are only seen gone by a walk), and when the
 * ring named more than a fifth of the map (a walk is cheaper then).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_int.h"

/* An entry as the last poll read it. */
struct raw_ent {
	struct kvmm_block_key key;
	uint64_t name; /* the rename hook's (the hash without one) */
	struct kvmm_block_stats s;
	uint32_t walk; /* the latest walk of the map that found it */
	bool used;
	bool keep; /* the hook kept it: it counts for `name` */
};

/* The keys that carry one name (nr of them: key0, then more[]). */
struct name_ent {
	uint64_t name;
	uint32_t nr, cap_more;
	struct kvmm_block_key key0;
	struct kvmm_block_key *more;
	bool used;
};

/* What collect found of one entry, for apply. */
struct tel_change {
	struct kvmm_block_key key;
	uint64_t name;
	struct kvmm_block_stats s;
	bool gone; /* not in the map any more */
	bool keep;
};

struct tel_delta {
	uint32_t max_blocks; /* the map's capacity */
	/* the loop's, read by collect on the poll's thread */
	struct raw_ent *raw;
	size_t raw_cap, raw_nr;
	struct name_ent *names;
	size_t names_cap, names_nr;
	/* collect's own */
	int walks_due; /* polls that must walk the map (first: 1) */
	uint64_t dropped_seen; /* kvmm_dirty_dropped at the last poll */
	struct kvmm_block_key *keys; /* this poll's to read */
	size_t nr_keys, cap_keys;
	struct kvmm_block_key *carry; /* read again at the next poll */
	size_t nr_carry, cap_carry;
	uint64_t epoch; /* the epoch this poll began */
	uint32_t walk_gen; /* walks of the map so far */
	/* collect's output, apply's input */
	struct tel_change *changes;
	size_t nr_changes, cap_changes;
	/* the names apply touched */
	uint64_t *touched;
	size_t nr_touched, cap_touched;
	/* what the polls did: run is collect's, stats the loop's, which
	 * apply adds run to (tel_poll_stats() reads it while a poll runs) */
	struct tel_poll_stats run, stats;
};

static uint64_t key_hash(const struct kvmm_block_key *k)
{
	uint64_t h = k->hash ^
		     ((uint64_t)k->uid << 32 | k->gid) * 0xff51afd7ed558ccdull;

	return h * 0x9e3779b97f4a7c15ull;
}

static size_t home(uint64_t h, size_t cap)
{
	return (size_t)(h >> 17) & (cap - 1);
}

static bool key_eq(const struct kvmm_block_key *a,
		   const struct kvmm_block_key *b)
{
	return a->hash == b->hash && a->uid == b->uid && a->gid == b->gid;
}

/* Grow an array of elements of size esz to hold one more. */
static int grow(void **v, size_t *cap, size_t nr, size_t esz)
{
	size_t c = *cap ? 2 * *cap : 1024;
	void *p;

	if (nr < *cap)
		return 0;
	p = realloc(*v, c * esz);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

/* ---- raw: key -> the entry as last read (open addressing) ---- */

static struct raw_ent *raw_find(const struct tel_delta *d,
				const struct kvmm_block_key *k)
{
	size_t i;

	if (!d->raw_cap)
		return NULL;
	for (i = home(key_hash(k), d->raw_cap); d->raw[i].used;
	     i = (i + 1) & (d->raw_cap - 1))
		if (key_eq(&d->raw[i].key, k))
			return &d->raw[i];
	return NULL;
}

static int raw_rehash(struct tel_delta *d, size_t cap)
{
	struct raw_ent *nv = calloc(cap, sizeof(*nv));
	size_t i, j;

	if (!nv)
		return -ENOMEM;
	for (i = 0; i < d->raw_cap; i++) {
		if (!d->raw[i].used)
			continue;
		for (j = home(key_hash(&d->raw[i].key), cap); nv[j].used;
		     j = (j + 1) & (cap - 1))
			;
		nv[j] = d->raw[i];
	}
	free(d->raw);
	d->raw = nv;
	d->raw_cap = cap;
	return 0;
}

/* The entry of k, added (zeroed but for the key) if there is none. */
static struct raw_ent *raw_get(struct tel_delta *d,
			       const struct kvmm_block_key *k)
{
	struct raw_ent *e = raw_find(d, k);
	size_t i;

	if (e)
		return e;
	if ((d->raw_nr + 1) * 4 > d->raw_cap * 3 &&
	    raw_rehash(d, d->raw_cap ? 2 * d->raw_cap : 1024))
		return NULL;
	for (i = home(key_hash(k), d->raw_cap); d->raw[i].used;
	     i = (i + 1) & (d->raw_cap - 1))
		;
	d->raw[i] = (struct raw_ent){ .key = *k, .used = true };
	d->raw_nr++;
	return &d->raw[i];
}

/* Whether home slot h lies cyclically in (i, j]: then an entry at j
 * whose home is h cannot move back to i. */
static bool home_between(size_t h, size_t i, size_t j)
{
	return i <= j ? (h > i && h <= j) : (h > i || h <= j);
}

/* Remove e, shifting back the entries after it that may move (linear
 * probing without tombstones). */
static void raw_del(struct tel_delta *d, struct raw_ent *e)
{
	size_t mask = d->raw_cap - 1, i = (size_t)(e - d->raw), j = i;

	for (;;) {
		j = (j + 1) & mask;
		if (!d->raw[j].used)
			break;
		if (home_between(home(key_hash(&d->raw[j].key), d->raw_cap), i,
				 j))
			continue;
		d->raw[i] = d->raw[j];
		i = j;
	}
	memset(&d->raw[i], 0, sizeof(d->raw[i]));
	d->raw_nr--;
}

/* ---- names: name -> the keys that carry it ---- */

static struct name_ent *name_find(const struct tel_delta *d, uint64_t name)
{
	size_t i;

	if (!d->names_cap)
		return NULL;
	for (i = home(name * 0x9e3779b97f4a7c15ull, d->names_cap);
	     d->names[i].used; i = (i + 1) & (d->names_cap - 1))
		if (d->names[i].name == name)
			return &d->names[i];
	return NULL;
}

static int names_rehash(struct tel_delta *d, size_t cap)
{
	struct name_ent *nv = calloc(cap, sizeof(*nv));
	size_t i, j;

	if (!nv)
		return -ENOMEM;
	for (i = 0; i < d->names_cap; i++) {
		if (!d->names[i].used)
			continue;
		for (j = home(d->names[i].name * 0x9e3779b97f4a7c15ull, cap);
		     nv[j].used; j = (j + 1) & (cap - 1))
			;
		nv[j] = d->names[i];
	}
	free(d->names);
	d->names = nv;
	d->names_cap = cap;
	return 0;
}

static const struct kvmm_block_key *name_key(const struct name_ent *n,
					     uint32_t i)
{
	return i ? &n->more[i - 1] : &n->key0;
}

/* k now carries name. */
static int name_add(struct tel_delta *d, uint64_t name,
		    const struct kvmm_block_key *k)
{
	struct name_ent *n = name_find(d, name);
	size_t i;

	if (!n) {
		if ((d->names_nr + 1) * 4 > d->names_cap * 3 &&
		    names_rehash(d, d->names_cap ? 2 * d->names_cap : 1024))
			return -ENOMEM;
		for (i = home(name * 0x9e3779b97f4a7c15ull, d->names_cap);
		     d->names[i].used; i = (i + 1) & (d->names_cap - 1))
			;
		d->names[i] = (struct name_ent){
			.name = name, .nr = 1, .key0 = *k, .used = true
		};
		d->names_nr++;
		return 0;
	}
	for (i = 0; i < n->nr; i++)
		if (key_eq(name_key(n, (uint32_t)i), k))
			return 0;
	if (n->nr - 1 == n->cap_more) {
		uint32_t cap = n->cap_more ? 2 * n->cap_more : 2;
		void *p = realloc(n->more, cap * sizeof(*n->more));

		if (!p)
			return -ENOMEM;
		n->more = p;
		n->cap_more = cap;
	}
	n->more[n->nr - 1] = *k;
	n->nr++;
	return 0;
}

static void name_del(struct tel_delta *d, struct name_ent *n)
{
	size_t mask = d->names_cap - 1, i = (size_t)(n - d->names), j = i;

	free(n->more);
	for (;;) {
		j = (j + 1) & mask;
		if (!d->names[j].used)
			break;
		if (home_between(home(d->names[j].name * 0x9e3779b97f4a7c15ull,
				      d->names_cap),
				 i, j))
			continue;
		d->names[i] = d->names[j];
		i = j;
	}
	memset(&d->names[i], 0, sizeof(d->names[i]));
	d->names_nr--;
}

/* k no longer carries name (the name goes with its last key). */
static void name_remove(struct tel_delta *d, uint64_t name,
			const struct kvmm_block_key *k)
{
	struct name_ent *n = name_find(d, name);
	uint32_t i;

	if (!n)
		return;
	for (i = 0; i < n->nr; i++) {
		if (!key_eq(name_key(n, i), k))
			continue;
		if (n->nr == 1) {
			name_del(d, n);
			return;
		}
		/* the last key takes its place */
		if (i == 0)
			n->key0 = n->more[n->nr - 2];
		else
			n->more[i - 1] = n->more[n->nr - 2];
		n->nr--;
		return;
	}
}

/* ---- collect: the poll's thread ---- */

void (*tel_delta_after_bump)(void);

int tel_delta_new(uint32_t max_blocks, struct tel_delta **out)
{
	struct tel_delta *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->max_blocks = max_blocks ? max_blocks : 65536;
	d->walks_due = 1; /* the first poll reads what is there */
	*out = d;
	return 0;
}

void tel_delta_free(struct tel_delta *d)
{
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->names_cap; i++)
		if (d->names[i].used)
			free(d->names[i].more);
	free(d->names);
	free(d->raw);
	free(d->keys);
	free(d->carry);
	free(d->changes);
	free(d->touched);
	free(d);
}

void tel_delta_resync(struct tel_delta *d)
{
	if (d && d->walks_due < 1)
		d->walks_due = 1;
}

void tel_delta_stats(const struct tel_delta *d, struct tel_poll_stats *out)
{
	if (d)
		*out = d->stats;
}

static int push_key(struct kvmm_block_key **v, size_t *nr, size_t *cap,
		    const struct kvmm_block_key *k)
{
	if (grow((void **)v, cap, *nr, sizeof(**v)))
		return -ENOMEM;
	(*v)[(*nr)++] = *k;
	return 0;
}

/* A ring record: read its entry now, and again at the next poll when
 * its epoch is still the current one (an access of that epoch may be
 * counted after this poll's read, and queues nothing). */
static int on_dirty_key(void *arg, const struct kvmm_block_key *k,
			uint64_t epoch)
{
	struct tel_delta *d = arg;

	if (push_key(&d->keys, &d->nr_keys, &d->cap_keys, k))
		return -ENOMEM;
	if (epoch >= d->epoch &&
	    push_key(&d->carry, &d->nr_carry, &d->cap_carry, k))
		return -ENOMEM;
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	const struct kvmm_block_key *x = a, *y = b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	return x->gid < y->gid ? -1 : x->gid > y->gid;
}

/* The entry of k as read now (gone: the map has none) against raw: a
 * change to list when they differ. */
static int note(struct tel *t, struct tel_delta *d,
		const struct kvmm_block_key *k,
		const struct kvmm_block_stats *st)
{
	const struct raw_ent *r = raw_find(d, k);
	struct tel_change c = { .key = *k, .gone = !st };

	if (st) {
		struct tel_origin o = { .src = TEL_SRC_BPF,
					.pid = st->last_pid,
					.uid = k->uid,
					.gid = k->gid };

		c.s = *st;
		c.name = k->hash;
		c.keep = !t->rename || t->rename(t->rename_arg, &o, &c.name);
		if (r && r->name == c.name && r->keep == c.keep &&
		    !memcmp(&r->s, st, sizeof(*st)))
			return 0;
	} else if (!r) {
		return 0;
	}
	if (grow((void **)&d->changes, &d->cap_changes, d->nr_changes,
		 sizeof(*d->changes)))
		return -ENOMEM;
	d->changes[d->nr_changes++] = c;
	return 0;
}

/* A walk of the whole map: every entry that differs from raw, and the
 * ones raw has that the map does not (each entry found is marked with
 * the walk's number: raw is ours while the poll runs). */
struct walk {
	struct tel *t;
	struct tel_delta *d;
};

static int walk_entry(void *arg, const struct kvmm_block_key *k,
		      const struct kvmm_block_stats *st)
{
	struct walk *w = arg;
	struct raw_ent *r = raw_find(w->d, k);

	if (r)
		r->walk = w->d->walk_gen;
	return note(w->t, w->d, k, st);
}

static int walk_map(struct tel *t, struct tel_delta *d)
{
	struct walk w = { .t = t, .d = d };
	size_t i;
	int err;

	d->walk_gen++;
	err = tel_bpf_read_blocks(t, walk_entry, &w);
	for (i = 0; !err && i < d->raw_cap; i++)
		if (d->raw[i].used && d->raw[i].walk != d->walk_gen)
			err = note(t, d, &d->raw[i].key, NULL);
	d->run.full_walks++;
	return err;
}

int tel_delta_collect(struct tel *t)
{
	struct tel_delta *d = t->delta;
	struct kvmm_block_key *prev = d->carry;
	size_t nr_prev = d->nr_carry, i;
	struct kvmm_block_stats st;
	uint64_t dropped;
	bool walk;
	int err;

	d->nr_changes = 0;
	d->nr_keys = 0;
	/* this poll's carry is a new list; the last one is read now */
	d->carry = NULL;
	d->nr_carry = d->cap_carry = 0;
	d->epoch = tel_bpf_epoch_next(t);
	if (tel_delta_after_bump)
		tel_delta_after_bump();
	err = tel_bpf_dirty_drain(t, on_dirty_key, d);
	for (i = 0; !err && i < nr_prev; i++)
		err = push_key(&d->keys, &d->nr_keys, &d->cap_keys, &prev[i]);
	free(prev);
	if (err)
		goto out;
	/* read after the drain: a record the ring lost is counted by now */
	dropped = tel_bpf_dirty_dropped(t);
	if (dropped != d->dropped_seen) {
		d->dropped_seen = dropped;
		d->run.ring_full++;
		/* this poll and the next: the lost record's epoch may be the
		 * one that begins now */
		d->walks_due = 2;
	}
	/* past a fifth of the map, the lookups one by one cost about as
	 * much as a walk (bench/tel-poll-delta --changed) */
	walk = d->walks_due > 0 ||
	       d->raw_nr > (size_t)d->max_blocks + d->max_blocks / 8 ||
	       d->nr_keys > d->max_blocks / 5;
	if (walk) {
		err = walk_map(t, d);
		if (!err && d->walks_due > 0)
			d->walks_due--;
		goto out;
	}
	if (d->nr_keys) /* NULL until the first */
		qsort(d->keys, d->nr_keys, sizeof(*d->keys), key_cmp);
	for (i = 0; !err && i < d->nr_keys; i++) {
		if (i && !key_cmp(&d->keys[i - 1], &d->keys[i]))
			continue;
		d->run.keys_read++;
		err = tel_bpf_lookup_block(t, &d->keys[i], &st);
		if (err == -ENOENT) /* the LRU dropped it */
			err = note(t, d, &d->keys[i], NULL);
		else if (!err)
			err = note(t, d, &d->keys[i], &st);
	}
out:
	if (err) /* what this poll missed is read at the next, by a walk */
		d->walks_due = d->walks_due > 1 ? d->walks_due : 1;
	d->run.polls++;
	d->run.dirty_dropped = d->dropped_seen;
	return err;
}

/* ---- apply: the loop ---- */

static int touch(struct tel_delta *d, uint64_t name)
{
	if (grow((void **)&d->touched, &d->cap_touched, d->nr_touched,
		 sizeof(*d->touched)))
		return -ENOMEM;
	d->touched[d->nr_touched++] = name;
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The block of name in the snapshot, built again from its entries. */
static int rebuild_name(struct tel *t, struct tel_delta *d, uint64_t name)
{
	const struct name_ent *n = name_find(d, name);
	struct kvmm_block_stats old, cur = { 0 };
	bool had = !tel_snap_get(t->snap, name, &old);
	uint32_t i;
	int err;

	for (i = 0; n && i < n->nr; i++) {
		const struct raw_ent *r = raw_find(d, name_key(n, i));

		if (r)
			tel_stats_merge(&cur, &r->s);
	}
	if (!cur.count) {
		tel_snap_del(t->snap, name);
		return 0;
	}
	err = tel_snap_set(t->snap, name, &cur);
	if (err)
		return err;
	if (t->sink.block &&
	    (!had || old.count != cur.count || old.last_ns != cur.last_ns))
		t->sink.block(t->sink.arg, name, &cur);
	return 0;
}

/*
 * Out of memory half-way: raw, names and the snapshot may disagree, and a
 * walk compares with raw.  So forget them all: the next poll walks the
 * map and builds them again (feeding every block, as a first poll does).
 */
static void forget_all(struct tel *t, struct tel_delta *d)
{
	size_t i;

	for (i = 0; i < d->names_cap; i++)
		if (d->names[i].used)
			free(d->names[i].more);
	free(d->names);
	free(d->raw);
	d->names = NULL;
	d->raw = NULL;
	d->names_cap = d->names_nr = d->raw_cap = d->raw_nr = 0;
	tel_snap_clear(t->snap);
	tel_delta_resync(d);
}

int tel_delta_apply(struct tel *t)
{
	struct tel_delta *d = t->delta;
	size_t i;
	int err = 0;

	/* the polls that failed since the last apply count too */
	d->stats.polls += d->run.polls;
	d->stats.full_walks += d->run.full_walks;
	d->stats.keys_read += d->run.keys_read;
	d->stats.ring_full += d->run.ring_full;
	d->stats.dirty_dropped = d->run.dirty_dropped;
	memset(&d->run, 0, sizeof(d->run));
	d->nr_touched = 0;
	for (i = 0; !err && i < d->nr_changes; i++) {
		const struct tel_change *c = &d->changes[i];
		struct raw_ent *r = raw_find(d, &c->key);

		if (r && r->keep) {
			name_remove(d, r->name, &c->key);
			err = touch(d, r->name);
		}
		if (c->gone) {
			if (r)
				raw_del(d, r);
			continue;
		}
		r = err ? NULL : raw_get(d, &c->key);
		if (!r) {
			err = err ? err : -ENOMEM;
			break;
		}
		r->name = c->name;
		r->keep = c->keep;
		r->s = c->s;
		r->walk = d->walk_gen; /* read since the last walk, if any */
		if (c->keep) {
			err = name_add(d, c->name, &c->key);
			if (!err)
				err = touch(d, c->name);
		}
	}
	d->nr_changes = 0;
	if (d->nr_touched) /* NULL until the first */
		qsort(d->touched, d->nr_touched, sizeof(*d->touched), u64_cmp);
	for (i = 0; !err && i < d->nr_touched; i++)
		if (!i || d->touched[i] != d->touched[i - 1])
			err = rebuild_name(t, d, d->touched[i]);
	if (err)
		forget_all(t, d);
	return err;
}
