// SPDX-License-Identifier: MIT
/*
 * Telemetry core: the source-independent half of ebpf/telemetry.h.
 *
 * A snapshot is an open-addressing table of block statistics, a sorted
 * array of histogram rows and the summed counters.  tel_poll() builds a
 * new snapshot from the source (a walk of the BPF maps through
 * telemetry_bpf.c, or a merge of every registered shm region with the
 * retired totals), compares it with the previous one to feed the sink,
 * and swaps; a loader's BPF poll instead takes the entries that changed
 * into the snapshot it has (telemetry_delta.c) and replaces only the
 * rows and counters.
 *
 * The shm source keeps, per region, its own view of each block slot (the
 * hash it saw there, the count it took in), so what it credits is its
 * own arithmetic on deltas, clamped to what the session could have done,
 * never a client's number.  What ended sessions measured, and cold slots
 * the daemon took back from live ones (telemetry_shm.h), go to the
 * retired table: bounded like the BPF LRU (the blocks accessed longest
 * ago leave first), and not copied at each poll: a poll merges into the
 * live blocks the retired entries of their hashes, adds the retired
 * entries that changed at that poll, and the lookups fall back to the
 * retired table for the rest.  Merging
 * the same block from several sessions (or BPF entries of several uids)
 * adds counts and access rates (the gap EWMAs combine as
 * 1/g = 1/g1 + 1/g2) and keeps the latest access; with a rename hook
 * each report is renamed before, so only reports that name one block for
 * their owner meet.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_int.h"
#include "ebpf/telemetry_shm.h"
#include "vmm/vmm.h"

struct tel_block_ent {
	uint64_t hash;
	uint64_t used;
	/* the retired table: whose report it is (shm_owner()), for the
	 * share each writer may hold */
	uint64_t owner;
	struct kvmm_block_stats s;
};

struct tel_hist_row {
	uint64_t packed; /* kvmm_tel_hist_key_pack(), the sort key */
	struct kvmm_hist_key key;
	struct kvmm_hist h;
};

struct tel_snapshot {
	struct tel_block_ent *blocks;
	size_t cap, nr_blocks; /* cap is a power of two */
	struct tel_hist_row *rows;
	size_t nr_rows, cap_rows;
	struct kvmm_counters counters;
};

/* The daemon's view of one block slot of a region. */
struct tel_slot {
	uint64_t key; /* the hash it saw there last (0: none) */
	uint64_t credited; /* what the block is credited with */
	uint32_t seen; /* the slot's count taken in (its merged baseline) */
	uint32_t idle; /* polls since the count last moved */
};

struct tel_shm_src {
	uint64_t id;
	struct kvmm_tel_shm *shm;
	uint32_t nr_blocks; /* computed from the size we were given */
	uint32_t pid; /* the writer, as the daemon knows it (0: unknown) */
	struct tel_slot *slots; /* nr_blocks */
	uint32_t used; /* slots with a key at the last read */
	uint64_t read_ns; /* when it was read last (or added) */
	/* each histogram row's latest whole copy (NULL: none yet) */
	struct kvmm_hist *rows[KVMM_TEL_SHM_HIST_SLOTS];
	uint64_t row_keys[KVMM_TEL_SHM_HIST_SLOTS];
	/* rows not read whole since row_since (0: read whole), their begin
	 * and end counters then the same (folded); stuck: so for
	 * TEL_SHM_ROW_STUCK_NS */
	uint64_t row_since[KVMM_TEL_SHM_HIST_SLOTS];
	uint64_t row_counters[KVMM_TEL_SHM_HIST_SLOTS];
	bool row_stuck[KVMM_TEL_SHM_HIST_SLOTS];
	bool row_stuck_said; /* a stuck row was logged */
	/* the counters taken in, and what they are credited with */
	struct kvmm_counters seen, credited;
	/* what the blocks' counts may still be credited with together: the
	 * accesses credited, less what the blocks were */
	uint64_t budget;
};

/*
 * What a session can have done between two reads, to clamp what a
 * client writes (its region is its own to scribble on): access probes
 * one per TEL_SHM_PROBE_NS, other events TEL_SHM_EVENTS_PER_S, each plus
 * TEL_SHM_SLACK; the accesses at most KVMM_TEL_MAX_ACCESS_RECORDS per
 * access probe credited.  A legitimate client never comes near (a decode
 * step takes milliseconds); what is over stays to be credited at later
 * reads.  The blocks' counts are credited with no more, over the
 * session, than its accesses were (each access counts the accesses
 * first, then its block): a budget that carries over, since a poll can
 * read an access in the counters and not yet in its block.  So a client
 * that keeps to the clamps loses nothing; at a session's final read,
 * what is over them is not credited (only a forgery is: it is logged).
 */
#define TEL_SHM_PROBE_NS 10000ull
#define TEL_SHM_EVENTS_PER_S 10000000ull
#define TEL_SHM_SLACK 1024ull
/* Slots idle this many polls are taken back once a region is half full. */
#define TEL_SHM_IDLE_POLLS 4
/* Tries to copy a histogram row no writer is inside of; after this long
 * without a whole copy nor a write (a writer stopped inside: the row is
 * never whole again), one try a poll until it moves. */
#define TEL_SHM_ROW_TRIES 64
#define TEL_SHM_ROW_STUCK_NS 500000000ull
/* The retired table, like the BPF map's LRU (tel_opts.max_blocks); a
 * writer's share of it when it is pruned, 1/TEL_RETIRED_SHARES. */
#define TEL_RETIRED_MAX 65536
#define TEL_RETIRED_SHARES 8

void tel_log(int level, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	vmm_log(level, "telemetry: %s", buf);
}

static const char *const event_names[KVMM_TEL_NR_EVENTS] = {
	[KVMM_TEL_ACCESS] = "access",	[KVMM_TEL_ATTENTION] = "attention",
	[KVMM_TEL_PREFILL] = "prefill", [KVMM_TEL_EXTEND] = "extend",
	[KVMM_TEL_RESTORE] = "restore", [KVMM_TEL_RECOMPUTE] = "recompute",
	[KVMM_TEL_REVOKE] = "revoke",	[KVMM_TEL_MIGRATE] = "migrate",
	[KVMM_TEL_EVICT] = "evict",
};

static const char *const tier_names[KVMM_TEL_NR_TIERS] = {
	[KVMM_TEL_TIER_GPU] = "gpu",   [KVMM_TEL_TIER_HOST] = "host",
	[KVMM_TEL_TIER_NVME] = "nvme", [KVMM_TEL_TIER_REMOTE] = "remote",
	[KVMM_TEL_TIER_MISS] = "miss",
};

const char *tel_event_string(uint32_t kind)
{
	return kind < KVMM_TEL_NR_EVENTS ? event_names[kind] : "unknown";
}

const char *tel_tier_string(uint32_t tier)
{
	return tier < KVMM_TEL_NR_TIERS ? tier_names[tier] : "unknown";
}

const char *tel_source_string(enum tel_source s)
{
	switch (s) {
	case TEL_SOURCE_OFF:
		return "off";
	case TEL_SOURCE_BPF:
		return "bpf";
	case TEL_SOURCE_SHM:
		return "shm";
	}
	return "unknown";
}

const char *tel_mode_string(enum tel_mode m)
{
	switch (m) {
	case TEL_MODE_AUTO:
		return "auto";
	case TEL_MODE_BPF:
		return "bpf";
	case TEL_MODE_SHM:
		return "shm";
	case TEL_MODE_OFF:
		return "off";
	case TEL_MODE_PINNED:
		return "pinned";
	}
	return "unknown";
}

int tel_mode_parse(const char *s, enum tel_mode *out)
{
	static const enum tel_mode all[] = { TEL_MODE_AUTO, TEL_MODE_BPF,
					     TEL_MODE_SHM, TEL_MODE_OFF,
					     TEL_MODE_PINNED };
	size_t i;

	for (i = 0; s && i < sizeof(all) / sizeof(all[0]); i++) {
		if (!strcmp(s, tel_mode_string(all[i]))) {
			*out = all[i];
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- snapshots ---- */

static struct tel_snapshot *snap_new(size_t want_blocks)
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

static void snap_free(struct tel_snapshot *s)
{
	if (!s)
		return;
	free(s->blocks);
	free(s->rows);
	free(s);
}

/* Counts only ever stop at UINT64_MAX: a client's number never wraps one. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static size_t slot_of(uint64_t hash, size_t cap)
{
	return (size_t)((hash * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

static const struct tel_block_ent *snap_find(const struct tel_snapshot *s,
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
	d->count = sat_add(d->count, s->count);
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
static int snap_put(struct tel_snapshot *s, uint64_t hash,
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

static int snap_add_block(void *arg, uint64_t hash,
			  const struct kvmm_block_stats *st)
{
	return snap_put(arg, hash, st, 0);
}

int tel_snap_get(const struct tel_snapshot *s, uint64_t hash,
		 struct kvmm_block_stats *out)
{
	const struct tel_block_ent *e = snap_find(s, hash);

	if (!e)
		return -ENOENT;
	*out = e->s;
	return 0;
}

int tel_snap_set(struct tel_snapshot *s, uint64_t hash,
		 const struct kvmm_block_stats *st)
{
	struct tel_block_ent *e = (struct tel_block_ent *)snap_find(s, hash);

	if (e) {
		e->s = *st;
		return 0;
	}
	return snap_put(s, hash, st, 0);
}

/* Linear probing without tombstones: the entries after the removed one
 * move back unless their home slot lies between (cyclically). */
void tel_snap_del(struct tel_snapshot *s, uint64_t hash)
{
	const struct tel_block_ent *e = snap_find(s, hash);
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

static struct tel_hist_row *snap_find_row(const struct tel_snapshot *s,
					  uint64_t packed)
{
	struct tel_hist_row key = { .packed = packed };

	if (!s || !s->nr_rows)
		return NULL;
	return bsearch(&key, s->rows, s->nr_rows, sizeof(key), row_cmp);
}

/* Rows are appended unsorted while building and sorted by snap_finish(). */
static int snap_add_hist(void *arg, const struct kvmm_hist_key *key,
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
	r->h.count = sat_add(r->h.count, h->count);
	r->h.sum_ns = sat_add(r->h.sum_ns, h->sum_ns);
	r->h.sum_bytes = sat_add(r->h.sum_bytes, h->sum_bytes);
	for (i = 0; i < KVMM_TEL_HIST_BUCKETS; i++)
		r->h.buckets[i] = sat_add(r->h.buckets[i], h->buckets[i]);
	return 0;
}

static void snap_finish(struct tel_snapshot *s)
{
	if (s->nr_rows)
		qsort(s->rows, s->nr_rows, sizeof(*s->rows), row_cmp);
}

static void counters_add(struct kvmm_counters *d, const struct kvmm_counters *s)
{
	/* the fields' own type: a uint64_t (long) would not alias them */
	const __u64 *src = (const __u64 *)s;
	__u64 *dst = (__u64 *)d;
	size_t i;

	for (i = 0; i < sizeof(*d) / sizeof(*dst); i++)
		dst[i] = sat_add(dst[i], src[i]);
}

/* The rows and counters of one snapshot into another (blocks apart). */
static int snap_merge_rows(struct tel_snapshot *d, const struct tel_snapshot *s)
{
	size_t i;
	int err;

	for (i = 0; i < s->nr_rows; i++) {
		err = snap_add_hist(d, &s->rows[i].key, &s->rows[i].h);
		if (err)
			return err;
	}
	counters_add(&d->counters, &s->counters);
	return 0;
}

/* An entry of a table being pruned, as snap_prune() orders them. */
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
static int snap_prune(struct tel_snapshot *s, size_t keep, size_t share)
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

/*
 * A block's statistics into the retired table (an ended session's, a slot
 * taken back), noted as changed at this poll.  retired_bound() keeps the
 * table to its bound once the poll added what it had to.
 */
static int retired_add(struct tel *t, uint64_t hash,
		       const struct kvmm_block_stats *st, uint64_t owner)
{
	int err;

	if (!st->count)
		return 0;
	err = snap_put(t->retired, hash, st, owner);
	if (err)
		return err;
	if (t->nr_touched == t->cap_touched) {
		size_t cap = t->cap_touched ? 2 * t->cap_touched : 1024;
		void *p = realloc(t->touched, cap * sizeof(*t->touched));

		if (!p)
			return -ENOMEM;
		t->touched = p;
		t->cap_touched = cap;
	}
	t->touched[t->nr_touched++] = hash;
	return 0;
}

/* Over its bound, the retired table loses the blocks accessed longest
 * ago, an eighth more than it must so that it is not sorted at every
 * poll; those past their writer's share of an eighth of the bound go
 * first (snap_prune()). */
static int retired_bound(struct tel *t)
{
	if (t->retired->nr_blocks <= t->max_retired)
		return 0;
	return snap_prune(t->retired, t->max_retired - t->max_retired / 8,
			  t->max_retired / TEL_RETIRED_SHARES);
}

/* ---- shared-memory sources ---- */

/* Credit what a counter grew by, at most cap: 0 when the client set it
 * back (then counting goes on from there). */
static uint64_t credit(uint64_t raw, __u64 *seen, uint64_t cap)
{
	uint64_t d;

	if (raw < *seen)
		*seen = raw;
	d = raw - *seen;
	if (d > cap)
		d = cap;
	*seen += d;
	return d;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* Credit what a counter grew by within what its parent counter credited
 * allows over the session: total less what it was credited already. */
static uint64_t credit_within(uint64_t raw, __u64 *seen, __u64 *credited,
			      uint64_t total)
{
	uint64_t d =
		credit(raw, seen, total > *credited ? total - *credited : 0);

	*credited = sat_add(*credited, d);
	return d;
}

/*
 * The region's counters: what grew since the last read, clamped to what
 * the session can have done in dt_ns (the events), or over the session
 * to what the counters they follow from were credited with (the
 * accesses, their tiers, the drops: each access counts the accesses
 * first, then its tier, so a read can catch one between).  The
 * accesses credited go to the blocks' budget.  The counts left over the
 * clamps (not credited, yet).
 */
static uint64_t shm_credit_counters(struct tel_shm_src *src, uint64_t dt_ns)
{
	const __u64 *shared = (const __u64 *)&src->shm->counters;
	struct kvmm_counters raw, *seen = &src->seen, *cr = &src->credited;
	const __u64 *rp = (const __u64 *)&raw, *sp = (const __u64 *)seen;
	uint64_t ev =
		dt_ns / 1000000000ull * TEL_SHM_EVENTS_PER_S +
		dt_ns % 1000000000ull * TEL_SHM_EVENTS_PER_S / 1000000000ull +
		TEL_SHM_SLACK;
	uint64_t probes = dt_ns / TEL_SHM_PROBE_NS + TEL_SHM_SLACK;
	uint64_t left = 0, d;
	size_t i;

	/* Read before the block counts (acquire keeps them after): the
	 * counts may run ahead of these (accesses in flight, counted here
	 * after this read), never behind; the budget carries that over. */
	for (i = 0; i < sizeof(raw) / sizeof(uint64_t); i++)
		((__u64 *)&raw)[i] =
			__atomic_load_n(shared + i, __ATOMIC_ACQUIRE);
	for (i = 0; i < KVMM_TEL_NR_EVENTS; i++) {
		d = credit(raw.events[i], &seen->events[i],
			   i == KVMM_TEL_ACCESS ? probes : ev);
		cr->events[i] = sat_add(cr->events[i], d);
	}
	d = credit_within(raw.accesses, &seen->accesses, &cr->accesses,
			  sat_mul(cr->events[KVMM_TEL_ACCESS],
				  KVMM_TEL_MAX_ACCESS_RECORDS));
	src->budget = sat_add(src->budget, d);
	for (i = 0; i < KVMM_TEL_NR_TIERS; i++)
		credit_within(raw.tier_accesses[i], &seen->tier_accesses[i],
			      &cr->tier_accesses[i], cr->accesses);
	/* a probe of n records drops n - KVMM_TEL_MAX_ACCESS_RECORDS */
	credit_within(raw.access_dropped, &seen->access_dropped,
		      &cr->access_dropped,
		      sat_mul(cr->events[KVMM_TEL_ACCESS], UINT32_MAX));
	credit_within(raw.blocks_dropped, &seen->blocks_dropped,
		      &cr->blocks_dropped, cr->accesses);
	d = credit(raw.hist_dropped, &seen->hist_dropped, ev);
	cr->hist_dropped = sat_add(cr->hist_dropped, d);
	d = credit(raw.events_dropped, &seen->events_dropped, ev);
	cr->events_dropped = sat_add(cr->events_dropped, d);
	for (i = 0; i < sizeof(raw) / sizeof(uint64_t); i++)
		if (rp[i] > sp[i])
			left = sat_add(left, rp[i] - sp[i]);
	return left;
}

/* Copy row h when no writer is inside it (telemetry_shm.h): false when
 * writers were inside at each of `tries` tries (*counters: the begin and
 * end counters the last one read, folded). */
static bool shm_row_copy(const struct kvmm_tel_shm_hist *h,
			 struct kvmm_hist *out, int tries, uint64_t *counters)
{
	const __u64 *p = (const __u64 *)&h->hist;
	__u64 *o = (__u64 *)out, begin, end;
	size_t i;

	while (tries-- > 0) {
		/* acquire: the adds of every writer that ended are seen */
		end = __atomic_load_n(&h->seq_end, __ATOMIC_ACQUIRE);
		for (i = 0; i < sizeof(*out) / sizeof(*o); i++)
			o[i] = __atomic_load_n(p + i, __ATOMIC_RELAXED);
		/* the copy is done before begin is read */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		begin = __atomic_load_n(&h->seq_begin, __ATOMIC_RELAXED);
		if (begin == end)
			return true;
		*counters = begin * 0x9e3779b97f4a7c15ull ^ end;
	}
	return false;
}

/* What slot b of a region says of its block: its count the credited
 * one, its estimates as the client wrote them, sanitized. */
static void shm_block_stats(const struct kvmm_tel_shm_block *b,
			    const struct tel_slot *sl, uint32_t pid,
			    uint64_t now, struct kvmm_block_stats *st)
{
	*st = (struct kvmm_block_stats){
		.count = sl->credited,
		.first_ns =
			__atomic_load_n(&b->stats.first_ns, __ATOMIC_RELAXED),
		.last_ns = __atomic_load_n(&b->stats.last_ns, __ATOMIC_RELAXED),
		.ewma_gap_ns = __atomic_load_n(&b->stats.ewma_gap_ns,
					       __ATOMIC_RELAXED),
		.last_seq =
			__atomic_load_n(&b->stats.last_seq, __ATOMIC_RELAXED),
		.last_tier =
			__atomic_load_n(&b->stats.last_tier, __ATOMIC_RELAXED),
		/* who wrote it is the daemon's to say, not the client's */
		.last_pid = pid,
	};
	if (st->last_tier >= KVMM_TEL_NR_TIERS)
		st->last_tier = KVMM_TEL_TIER_MISS;
	if (st->last_ns > now)
		st->last_ns = now;
	if (st->first_ns > st->last_ns)
		st->first_ns = st->last_ns;
}

/* Whose the reports of src are, for the retired table's shares: its
 * writer process (a process with several sessions has one share), else
 * the session. */
static uint64_t shm_owner(const struct tel_shm_src *src)
{
	return src->pid ? src->pid : (1ull << 63) | src->id;
}

/* The name a block of src goes by (the rename hook): false to leave it. */
static bool shm_name(const struct tel *t, const struct tel_shm_src *src,
		     uint64_t *hash)
{
	return !t->rename || t->rename(t->rename_arg,
				       &(struct tel_origin){ .src = src->id,
							     .pid = src->pid },
				       hash);
}

/*
 * Read one region into d: each slot's growth since the last read, as far
 * as the session's accesses account for it (a client's counts are only
 * ever taken as deltas, never as they are), its estimates as the client
 * wrote them (sanitized), the histogram rows read whole, the credited
 * counters.  Slots idle TEL_SHM_IDLE_POLLS polls of a region half full
 * go to the retired table and are given back to the writers, unless
 * `final` (the session ended: everything goes to d).
 */
static int shm_read(struct tel *t, struct tel_shm_src *src,
		    struct tel_snapshot *d, bool final)
{
	char *base = (char *)src->shm;
	size_t boff = kvmm_tel_shm_align(sizeof(*src->shm));
	size_t hoff =
		boff + kvmm_tel_shm_align((size_t)src->nr_blocks *
					  sizeof(struct kvmm_tel_shm_block));
	struct kvmm_tel_shm_block *b =
		(struct kvmm_tel_shm_block *)(base + boff);
	const struct kvmm_tel_shm_hist *h =
		(const struct kvmm_tel_shm_hist *)(base + hoff);
	uint64_t now = kvmm_tel_now_ns(), left;
	bool take = !final && src->used >= src->nr_blocks / 2;
	uint32_t i, used = 0;
	int err = 0;

	left = shm_credit_counters(src,
				   now > src->read_ns ? now - src->read_ns : 0);
	src->read_ns = now;
	for (i = 0; i < src->nr_blocks && !err; i++) {
		struct tel_slot *sl = &src->slots[i];
		/* the key, then the word: this generation's (telemetry_shm.h) */
		uint64_t hash = __atomic_load_n(&b[i].hash, __ATOMIC_ACQUIRE);
		uint64_t raw, old = sl->key, grew;
		struct kvmm_block_stats st;
		bool named;

		if (hash != sl->key) {
			/* only a client scribbling moves a key under the
			 * daemon: what the old one was credited stays */
			if (old && sl->credited && shm_name(t, src, &old)) {
				st = (struct kvmm_block_stats){
					.count = sl->credited,
					.last_tier = KVMM_TEL_TIER_MISS,
					.last_pid = src->pid,
				};
				err = final ? snap_put(d, old, &st,
						       shm_owner(src)) :
					      retired_add(t, old, &st,
							  shm_owner(src));
			}
			*sl = (struct tel_slot){ .key = hash };
		}
		if (!hash)
			continue;
		used++;
		raw = __atomic_load_n(&b[i].stats.count, __ATOMIC_ACQUIRE);
		if (raw & KVMM_TEL_SHM_FROZEN)
			continue; /* the daemon clears its own: a scribble */
		/* the count field grew by this, modulo 2^32 */
		grew = (uint32_t)(kvmm_tel_shm_word_count(raw) - sl->seen);
		if (grew > src->budget) {
			left = sat_add(left, grew - src->budget);
			grew = src->budget;
		}
		src->budget -= grew;
		sl->seen += (uint32_t)grew;
		sl->credited = sat_add(sl->credited, grew);
		sl->idle = grew || kvmm_tel_shm_word_count(raw) != sl->seen ?
				   0 :
				   sl->idle + 1;
		if (sl->credited)
			shm_block_stats(&b[i], sl, src->pid, now, &st);
		/* a key claimed and never counted (its writer died) too */
		if (take && sl->idle >= TEL_SHM_IDLE_POLLS &&
		    kvmm_tel_shm_block_take(&b[i], raw)) {
			if (sl->credited && shm_name(t, src, &hash))
				err = retired_add(t, hash, &st, shm_owner(src));
			*sl = (struct tel_slot){ 0 };
			used--;
			continue;
		}
		if (!sl->credited)
			continue;
		named = shm_name(t, src, &hash);
		if (named)
			err = snap_put(d, hash, &st, shm_owner(src));
	}
	src->used = used;
	if (final && left && !err)
		tel_log(VMM_LOG_WARN,
			"session %llu: %llu counts over what its accesses "
			"account for, not credited",
			(unsigned long long)src->id, (unsigned long long)left);
	for (i = 0; i < KVMM_TEL_SHM_HIST_SLOTS && !err; i++) {
		uint64_t packed = __atomic_load_n(&h[i].key, __ATOMIC_ACQUIRE);
		struct kvmm_hist_key key;
		struct kvmm_hist hist;
		uint64_t counters = 0;

		if (!packed)
			continue;
		kvmm_tel_hist_key_unpack(packed, &key);
		if (key.kind >= KVMM_TEL_NR_EVENTS ||
		    key.tier >= KVMM_TEL_NR_TIERS ||
		    key.dst_tier >= KVMM_TEL_NR_TIERS ||
		    key.segments > KVMM_TEL_MAX_SEGMENTS)
			continue;
		if (src->row_keys[i] != packed) {
			free(src->rows[i]);
			src->rows[i] = NULL;
			src->row_keys[i] = packed;
			src->row_since[i] = 0;
			src->row_stuck[i] = false;
		}
		/* a row writers never left alone: its last whole copy */
		if (shm_row_copy(&h[i], &hist,
				 src->row_stuck[i] ? 1 : TEL_SHM_ROW_TRIES,
				 &counters)) {
			if (!src->rows[i])
				src->rows[i] = malloc(sizeof(hist));
			if (!src->rows[i])
				return -ENOMEM;
			*src->rows[i] = hist;
			src->row_since[i] = 0;
			src->row_stuck[i] = false;
		} else if (!src->row_since[i] ||
			   counters != src->row_counters[i]) {
			/* writers at it: not stuck (yet) */
			src->row_counters[i] = counters;
			src->row_since[i] = now;
			src->row_stuck[i] = false;
		} else if (!src->row_stuck[i] &&
			   now - src->row_since[i] >= TEL_SHM_ROW_STUCK_NS) {
			src->row_stuck[i] = true;
			if (!src->row_stuck_said)
				tel_log(VMM_LOG_WARN,
					"session %llu: histogram row %s "
					"%s->%s not read whole nor written "
					"in %llu ms (a writer stopped inside "
					"it?): its last whole copy stands, "
					"tried once a poll",
					(unsigned long long)src->id,
					tel_event_string(key.kind),
					tel_tier_string(key.tier),
					tel_tier_string(key.dst_tier),
					TEL_SHM_ROW_STUCK_NS / 1000000);
			src->row_stuck_said = true;
		}
		if (src->rows[i])
			err = snap_add_hist(d, &key, src->rows[i]);
	}
	if (!err)
		counters_add(&d->counters, &src->credited);
	return err;
}

static void shm_src_free(struct tel_shm_src *src)
{
	free(src->slots);
	for (size_t i = 0; i < KVMM_TEL_SHM_HIST_SLOTS; i++)
		free(src->rows[i]);
}

int tel_shm_add(struct tel *t, uint64_t id, uint32_t pid, void *base,
		size_t size)
{
	uint32_t n = kvmm_tel_shm_nr_slots(size);
	struct tel_slot *slots;
	size_t i;
	int err;

	if (!t || !base || !n)
		return -EINVAL;
	for (i = 0; i < t->nr_srcs; i++)
		if (t->srcs[i].id == id)
			return -EEXIST;
	if (t->nr_srcs == t->cap_srcs) {
		size_t cap = t->cap_srcs ? t->cap_srcs * 2 : 8;
		void *p = realloc(t->srcs, cap * sizeof(*t->srcs));

		if (!p)
			return -ENOMEM;
		t->srcs = p;
		t->cap_srcs = cap;
	}
	slots = calloc(n, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	err = kvmm_tel_shm_init(base, size);
	if (err) {
		free(slots);
		return err;
	}
	/* Clients write only when the daemon reads shared memory. */
	__atomic_store_n(&((struct kvmm_tel_shm *)base)->enabled,
			 t->source == TEL_SOURCE_SHM, __ATOMIC_RELEASE);
	t->srcs[t->nr_srcs++] = (struct tel_shm_src){
		.id = id,
		.shm = base,
		.nr_blocks = n,
		.pid = pid,
		.slots = slots,
		.read_ns = kvmm_tel_now_ns(),
	};
	return 0;
}

static int poll_join(struct tel *t, bool wait);

void tel_set_rename(struct tel *t, tel_rename_fn fn, void *arg)
{
	if (t)
		poll_join(t, true); /* it renames with the hook it began with */
	t->rename = fn;
	t->rename_arg = arg;
	/* every entry may have another name now: read them all */
	tel_delta_resync(t->delta);
}

void tel_shm_remove(struct tel *t, uint64_t id)
{
	size_t i;

	for (i = 0; t && i < t->nr_srcs; i++) {
		if (t->srcs[i].id != id)
			continue;
		/* Keep what the session measured in the totals: in the
		 * retired table from the next poll on, so that the snapshot
		 * the readers see until then counts it once. */
		if (t->source == TEL_SOURCE_SHM &&
		    shm_read(t, &t->srcs[i], t->pending, true))
			tel_log(VMM_LOG_WARN,
				"session %llu: stats lost (ENOMEM)",
				(unsigned long long)id);
		shm_src_free(&t->srcs[i]);
		t->srcs[i] = t->srcs[--t->nr_srcs];
		return;
	}
}

/*
 * The shm source's poll into s: the sessions ended since the last one
 * into the retired table, each region read (slots taken back go there
 * too), then each live block completed with its retired entry and the
 * retired entries that changed added, so a block is counted once
 * whichever table holds which part, and the retired table is not copied.
 */
static int shm_poll(struct tel *t, struct tel_snapshot *s)
{
	struct tel_snapshot *p = t->pending;
	size_t i, overlap = 0;
	int err = 0;

	t->nr_touched = 0;
	for (i = 0; i < p->cap && !err; i++)
		if (p->blocks[i].used)
			err = retired_add(t, p->blocks[i].hash, &p->blocks[i].s,
					  p->blocks[i].owner);
	if (!err)
		err = snap_merge_rows(t->retired, p);
	/* folded, or lost to ENOMEM (the poll fails): never twice */
	memset(p->blocks, 0, p->cap * sizeof(*p->blocks));
	p->nr_blocks = 0;
	p->nr_rows = 0;
	memset(&p->counters, 0, sizeof(p->counters));
	for (i = 0; i < t->nr_srcs && !err; i++)
		err = shm_read(t, &t->srcs[i], s, false);
	if (!err)
		err = retired_bound(t);
	if (!err)
		err = snap_merge_rows(s, t->retired);
	if (err)
		return err;
	for (i = 0; i < s->cap; i++) {
		const struct tel_block_ent *r;

		if (!s->blocks[i].used)
			continue;
		r = snap_find(t->retired, s->blocks[i].hash);
		if (r) {
			tel_stats_merge(&s->blocks[i].s, &r->s);
			overlap++;
		}
	}
	for (i = 0; i < t->nr_touched && !err; i++) {
		const struct tel_block_ent *r =
			snap_find(t->retired, t->touched[i]);

		if (!r || snap_find(s, t->touched[i]))
			continue; /* pruned since, or live */
		err = snap_add_block(s, t->touched[i], &r->s);
		overlap++;
	}
	if (err)
		return err;
	t->nr_retired_only = t->retired->nr_blocks - overlap;
	snap_finish(s);
	return 0;
}

/* ---- the BPF source ---- */

struct bpf_read {
	const struct tel *t;
	struct tel_snapshot *snap;
};

/* One kvmm_blocks entry into the snapshot, renamed by whose it is. */
static int bpf_add_block(void *arg, const struct kvmm_block_key *key,
			 const struct kvmm_block_stats *st)
{
	const struct bpf_read *r = arg;
	const struct tel *t = r->t;
	struct tel_origin o = {
		.src = TEL_SRC_BPF,
		.pid = st->last_pid,
		.uid = key->uid,
		.gid = key->gid,
	};
	uint64_t hash = key->hash;

	if (t->rename && !t->rename(t->rename_arg, &o, &hash))
		return 0;
	return snap_add_block(r->snap, hash, st);
}

/* ---- open / close / poll ---- */

int tel_open(const struct tel_opts *opts, struct tel **out)
{
	struct tel_opts o = { .size = sizeof(o) };
	struct tel *t;
	int err;

	if (!out)
		return -EINVAL;
	if (opts) {
		if (opts->size < offsetof(struct tel_opts, quiet) ||
		    opts->size > sizeof(o))
			return -EINVAL;
		memcpy(&o, opts, opts->size);
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	if (o.pin_root && strlen(o.pin_root) >= TEL_PIN_ROOT_MAX) {
		free(t);
		return -ENAMETOOLONG;
	}
	t->mode = o.mode;
	t->keep_pins = o.keep_pins;
	snprintf(t->pin_root, sizeof(t->pin_root), "%s",
		 o.pin_root ? o.pin_root : TEL_DEFAULT_PIN_ROOT);
	t->snap = snap_new(64);
	t->retired = snap_new(64);
	t->pending = snap_new(64);
	t->max_retired = o.max_blocks ? o.max_blocks : TEL_RETIRED_MAX;
	if (!t->snap || !t->retired || !t->pending) {
		err = -ENOMEM;
		goto err_free;
	}
	switch (o.mode) {
	case TEL_MODE_OFF:
		t->source = TEL_SOURCE_OFF;
		snprintf(t->reason, sizeof(t->reason), "telemetry is off");
		break;
	case TEL_MODE_SHM:
		t->source = TEL_SOURCE_SHM;
		snprintf(t->reason, sizeof(t->reason),
			 "shared-memory telemetry requested");
		break;
	case TEL_MODE_PINNED:
		err = tel_bpf_open_pinned(t);
		if (err) {
			tel_log(VMM_LOG_WARN, "%s", t->reason);
			goto err_free;
		}
		t->source = TEL_SOURCE_BPF;
		t->keep_pins = true;
		break;
	case TEL_MODE_AUTO:
	case TEL_MODE_BPF:
		err = tel_bpf_open(t, &o);
		if (!err) {
			t->source = TEL_SOURCE_BPF;
			t->reason[0] = 0;
			err = tel_delta_new(o.max_blocks, &t->delta);
			if (err) {
				tel_bpf_close(t, false);
				goto err_free;
			}
			break;
		}
		if (o.mode == TEL_MODE_BPF) {
			tel_log(VMM_LOG_ERR, "BPF unavailable: %s", t->reason);
			goto err_free;
		}
		t->source = TEL_SOURCE_SHM;
		if (!o.quiet)
			tel_log(VMM_LOG_WARN,
				"BPF unavailable (%s); using shared-memory counters",
				t->reason);
		break;
	default:
		err = -EINVAL;
		goto err_free;
	}
	*out = t;
	return 0;

err_free:
	snap_free(t->snap);
	snap_free(t->retired);
	snap_free(t->pending);
	free(t);
	return err;
}

void tel_close(struct tel *t)
{
	if (!t)
		return;
	if (t->polling) { /* what it found goes unread */
		pthread_join(t->poll_thread, NULL);
		snap_free(t->next);
	}
	free(t->changed);
	tel_delta_free(t->delta);
	if (t->bpf)
		tel_bpf_close(t, t->keep_pins);
	snap_free(t->snap);
	snap_free(t->retired);
	snap_free(t->pending);
	free(t->touched);
	for (size_t i = 0; i < t->nr_srcs; i++)
		shm_src_free(&t->srcs[i]);
	free(t->srcs);
	free(t);
}

/* Call fn for each block of cur that changed since old (new, or another
 * count or last access); stops at fn's first nonzero return. */
static int for_changed(const struct tel_snapshot *old,
		       const struct tel_snapshot *cur,
		       int (*fn)(void *arg, const struct tel_block_ent *e),
		       void *arg)
{
	for (size_t i = 0; i < cur->cap; i++) {
		const struct tel_block_ent *e = &cur->blocks[i], *p;
		int err;

		if (!e->used)
			continue;
		p = snap_find(old, e->hash);
		if (p && p->s.count == e->s.count &&
		    p->s.last_ns == e->s.last_ns)
			continue;
		err = fn(arg, e);
		if (err)
			return err;
	}
	return 0;
}

static int sink_block(void *arg, const struct tel_block_ent *e)
{
	struct tel *t = arg;

	t->sink.block(t->sink.arg, e->hash, &e->s);
	return 0;
}

/* Tell the sink what the latency rows gained between two snapshots. */
static void feed_rows(struct tel *t, const struct tel_snapshot *old,
		      const struct tel_snapshot *cur)
{
	size_t i, b;

	if (!t->sink.latency)
		return;
	for (i = 0; i < cur->nr_rows; i++) {
		const struct tel_hist_row *r = &cur->rows[i], *p;
		struct kvmm_hist d = r->h;

		p = snap_find_row(old, r->packed);
		if (p) {
			if (p->h.count >= d.count)
				continue;
			/* a sum that stopped at UINT64_MAX (or a client's
			 * scribble) may not have grown with the count */
			d.count -= p->h.count;
			d.sum_ns = d.sum_ns > p->h.sum_ns ?
					   d.sum_ns - p->h.sum_ns :
					   0;
			d.sum_bytes = d.sum_bytes > p->h.sum_bytes ?
					      d.sum_bytes - p->h.sum_bytes :
					      0;
			for (b = 0; b < KVMM_TEL_HIST_BUCKETS; b++)
				d.buckets[b] =
					d.buckets[b] > p->h.buckets[b] ?
						d.buckets[b] - p->h.buckets[b] :
						0;
		}
		if (d.count)
			t->sink.latency(t->sink.arg, &r->key, d.count, d.sum_ns,
					d.sum_bytes);
	}
}

/* The maps (blocks, renamed as read; rows; counters) into s. */
static int bpf_read_maps(struct tel *t, struct tel_snapshot *s)
{
	int err;

	err = tel_bpf_read_blocks(t, bpf_add_block,
				  &(struct bpf_read){ .t = t, .snap = s });
	if (!err)
		err = tel_bpf_read_hist(t, snap_add_hist, s);
	if (!err)
		err = tel_bpf_read_counters(t, &s->counters);
	if (!err)
		snap_finish(s);
	return err;
}

/* The snapshot s is the latest now: feed what changed, keep it. */
static void swap_in(struct tel *t, struct tel_snapshot *s)
{
	feed_rows(t, t->snap, s);
	snap_free(t->snap);
	t->snap = s;
}

static int collect_changed(void *arg, const struct tel_block_ent *e)
{
	struct tel *t = arg;

	if (t->nr_changed == t->cap_changed) {
		size_t cap = t->cap_changed ? 2 * t->cap_changed : 1024;
		void *p = realloc(t->changed, cap * sizeof(*t->changed));

		if (!p)
			return -ENOMEM;
		t->changed = p;
		t->cap_changed = cap;
	}
	t->changed[t->nr_changed++] = e;
	return 0;
}

/*
 * The BPF poll's first half (on the poll's thread, or in tel_poll()):
 * the rows and counters into t->next, and the blocks that changed.  A
 * loader's poll reads what the dirty ring names (tel_delta_collect()); a
 * pin reader's walks the map into a whole new snapshot and compares it
 * with the last one.  t->snap is only read here (the loop does not
 * change it before this half is joined).
 */
static int bpf_collect(struct tel *t)
{
	struct tel_snapshot *s = snap_new(t->delta ? 0 : t->snap->nr_blocks);
	int err;

	if (!s)
		return -ENOMEM;
	if (t->delta) {
		err = tel_bpf_read_hist(t, snap_add_hist, s);
		if (!err)
			err = tel_bpf_read_counters(t, &s->counters);
		if (!err) {
			snap_finish(s);
			err = tel_delta_collect(t);
		}
	} else {
		err = bpf_read_maps(t, s);
		/* collected whether or not a sink is set yet: the feed
		 * feeds it */
		t->nr_changed = 0;
		if (!err)
			err = for_changed(t->snap, s, collect_changed, t);
	}
	if (err) {
		snap_free(s);
		s = NULL;
	}
	t->next = s;
	return err;
}

/* The second half, on the caller's loop: the blocks that changed into
 * the snapshot and the sink, then the latency rows and the counters. */
static int bpf_feed(struct tel *t)
{
	struct tel_snapshot *s = t->next;
	int err = 0;

	t->next = NULL;
	if (!t->delta) {
		for (size_t i = 0; t->sink.block && i < t->nr_changed; i++)
			sink_block(t, t->changed[i]);
		t->nr_changed = 0;
		swap_in(t, s);
		return 0;
	}
	err = tel_delta_apply(t);
	feed_rows(t, t->snap, s);
	free(t->snap->rows);
	t->snap->rows = s->rows;
	t->snap->nr_rows = s->nr_rows;
	t->snap->cap_rows = s->cap_rows;
	t->snap->counters = s->counters;
	s->rows = NULL;
	snap_free(s);
	return err;
}

/* The thread of tel_poll_begin(): the first half, off the caller's loop. */
static void *poll_thread(void *arg)
{
	struct tel *t = arg;

	t->poll_err = bpf_collect(t);
	return NULL;
}

int tel_poll_begin(struct tel *t)
{
	int err;

	if (!t)
		return -EINVAL;
	if (t->polling)
		return -EBUSY;
	if (t->source != TEL_SOURCE_BPF)
		return tel_poll(t);
	t->next = NULL;
	err = -pthread_create(&t->poll_thread, NULL, poll_thread, t);
	if (err)
		return err;
	t->polling = true;
	return 0;
}

/* Join the poll thread and feed what it found (wait: block until it is
 * done).  1 when fed, 0 when it still runs, -errno when it failed. */
static int poll_join(struct tel *t, bool wait)
{
	int err, ferr;

	if (!t->polling)
		return 1;
	err = wait ? pthread_join(t->poll_thread, NULL) :
		     pthread_tryjoin_np(t->poll_thread, NULL);
	if (err == EBUSY) {
		/* the event ring is the caller's: not left to fill */
		err = tel_bpf_drain_events(t);
		return err ? err : 0;
	}
	t->polling = false;
	/* the event ring is the caller's (its records feed the sink) */
	err = tel_bpf_drain_events(t);
	if (t->poll_err)
		return t->poll_err;
	ferr = bpf_feed(t);
	if (ferr)
		return ferr;
	return err ? err : 1;
}

int tel_poll_end(struct tel *t)
{
	if (!t)
		return -EINVAL;
	return poll_join(t, false);
}

int tel_poll(struct tel *t)
{
	struct tel_snapshot *s;
	int err = 0;

	if (!t)
		return -EINVAL;
	if (t->source == TEL_SOURCE_OFF)
		return 0;
	/* a poll still running on its thread first: in order */
	err = poll_join(t, true);
	if (err < 0)
		return err;
	if (t->source == TEL_SOURCE_BPF) {
		int ferr;

		err = bpf_collect(t);
		if (err)
			return err;
		err = tel_bpf_drain_events(t);
		ferr = bpf_feed(t); /* what was read is kept, whatever */
		return err ? err : ferr;
	}
	s = snap_new(t->snap->nr_blocks);
	if (!s)
		return -ENOMEM;
	err = shm_poll(t, s);
	if (err) {
		snap_free(s);
		return err;
	}
	if (t->sink.block)
		for_changed(t->snap, s, sink_block, t);
	swap_in(t, s);
	return 0;
}

void tel_poll_stats(const struct tel *t, struct tel_poll_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (t)
		tel_delta_stats(t->delta, out);
}

/* ---- accessors ---- */

enum tel_source tel_source(const struct tel *t)
{
	return t ? t->source : TEL_SOURCE_OFF;
}

const char *tel_unavailable_reason(const struct tel *t)
{
	return t ? t->reason : "no telemetry";
}

const char *tel_pin_dir(const struct tel *t)
{
	return t && t->source == TEL_SOURCE_BPF ? t->pin_dir : "";
}

unsigned int tel_attachments(const struct tel *t)
{
	return t && t->bpf ? tel_bpf_attachments(t) : 0;
}

void tel_set_sink(struct tel *t, const struct tel_sink *sink)
{
	if (!t)
		return;
	poll_join(t, true); /* a running poll feeds the sink it began with */
	if (sink)
		t->sink = *sink;
	else
		memset(&t->sink, 0, sizeof(t->sink));
}

int tel_block_lookup(const struct tel *t, uint64_t hash,
		     struct kvmm_block_stats *out)
{
	const struct tel_block_ent *e = t ? snap_find(t->snap, hash) : NULL;

	/* a block no live session accessed: its retired totals */
	if (!e && t)
		e = snap_find(t->retired, hash);
	if (!e)
		return -ENOENT;
	if (out)
		*out = e->s;
	return 0;
}

size_t tel_block_count(const struct tel *t)
{
	return t ? t->snap->nr_blocks + t->nr_retired_only : 0;
}

int tel_block_foreach(const struct tel *t, tel_block_fn fn, void *arg)
{
	size_t i;
	int r;

	for (i = 0; t && i < t->snap->cap; i++) {
		if (!t->snap->blocks[i].used)
			continue;
		r = fn(arg, t->snap->blocks[i].hash, &t->snap->blocks[i].s);
		if (r)
			return r;
	}
	/* then the retired blocks the snapshot does not hold */
	for (i = 0; t && i < t->retired->cap; i++) {
		const struct tel_block_ent *e = &t->retired->blocks[i];

		if (!e->used || snap_find(t->snap, e->hash))
			continue;
		r = fn(arg, e->hash, &e->s);
		if (r)
			return r;
	}
	return 0;
}

int tel_hist_lookup(const struct tel *t, const struct kvmm_hist_key *key,
		    struct kvmm_hist *out)
{
	const struct tel_hist_row *r;

	if (!t || !key)
		return -EINVAL;
	r = snap_find_row(t->snap, kvmm_tel_hist_key_pack(key));
	if (!r)
		return -ENOENT;
	if (out)
		*out = r->h;
	return 0;
}

int tel_hist_foreach(const struct tel *t, tel_hist_fn fn, void *arg)
{
	size_t i;
	int r;

	for (i = 0; t && i < t->snap->nr_rows; i++) {
		r = fn(arg, &t->snap->rows[i].key, &t->snap->rows[i].h);
		if (r)
			return r;
	}
	return 0;
}

int tel_bpf_entry_foreach(struct tel *t, tel_bpf_block_fn fn, void *arg)
{
	if (!t || !fn)
		return -EINVAL;
	if (t->source != TEL_SOURCE_BPF)
		return -ENOTSUP;
	if (t->polling)
		return -EBUSY;
	return tel_bpf_read_blocks(t, fn, arg);
}

void tel_counters(const struct tel *t, struct kvmm_counters *out)
{
	if (t)
		*out = t->snap->counters;
	else
		memset(out, 0, sizeof(*out));
}

uint64_t tel_hist_percentile(const struct kvmm_hist *h, double pct)
{
	uint64_t want, seen = 0;
	unsigned int b;

	if (!h->count)
		return 0;
	want = (uint64_t)((double)h->count * pct / 100.0 + 0.5);
	if (!want)
		want = 1;
	for (b = 0; b < KVMM_TEL_HIST_BUCKETS; b++) {
		seen += h->buckets[b];
		if (seen >= want)
			return b >= 63 ? UINT64_MAX : (2ull << b) - 1;
	}
	return UINT64_MAX;
}
