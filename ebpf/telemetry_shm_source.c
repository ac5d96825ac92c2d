// SPDX-License-Identifier: MIT
/*
 * The shared-memory source: the daemon's reader of the telemetry regions
 * clients write (the layout and the writers are in telemetry_shm.h), and
 * the retired table of what ended sessions measured.
 *
 * The shm source keeps, per region, its own view of each block slot (the
 * hash it saw there, the count it took in), so what it credits is its
 * own arithmetic on deltas, clamped to what the session could have done,
 * never a client's number.  What ended sessions measured, and cold slots
 * the daemon took back from live ones (telemetry_shm.h), go to the
 * retired table: bounded like the BPF LRU (the blocks accessed longest
 * ago leave first), and not copied at each poll: a poll merges into the
 * live blocks the retired entries of their hashes, adds the retired
 * entries that changed at that poll, and the lookups (telemetry.c) fall
 * back to the retired table for the rest.  With a rename hook each
 * report is renamed before it is merged, so only reports that name one
 * block for their owner meet.
 *
 * Apart from the BPF source and the poll (telemetry_poll.c calls
 * tel_shm_poll()) because everything here reads memory a client can
 * scribble on: the clamps and the slot handshake are this file's alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_int.h"
#include "ebpf/telemetry_shm.h"
#include "vmm/vmm.h"

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
/* A writer's share of the retired table when it is pruned,
 * 1/TEL_RETIRED_SHARES of its bound (tel_opts.max_blocks). */
#define TEL_RETIRED_SHARES 8

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
	err = tel_snap_put(t->retired, hash, st, owner);
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
 * first (tel_snap_prune()). */
static int retired_bound(struct tel *t)
{
	if (t->retired->nr_blocks <= t->max_retired)
		return 0;
	return tel_snap_prune(t->retired, t->max_retired - t->max_retired / 8,
			      t->max_retired / TEL_RETIRED_SHARES);
}

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

	*credited = tel_sat_add(*credited, d);
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
		/* cppcheck-suppress uninitvar ; the loop above wrote every
		 * word of raw through a __u64 pointer */
		d = credit(raw.events[i], &seen->events[i],
			   i == KVMM_TEL_ACCESS ? probes : ev);
		cr->events[i] = tel_sat_add(cr->events[i], d);
	}
	d = credit_within(raw.accesses, &seen->accesses, &cr->accesses,
			  sat_mul(cr->events[KVMM_TEL_ACCESS],
				  KVMM_TEL_MAX_ACCESS_RECORDS));
	src->budget = tel_sat_add(src->budget, d);
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
	cr->hist_dropped = tel_sat_add(cr->hist_dropped, d);
	d = credit(raw.events_dropped, &seen->events_dropped, ev);
	cr->events_dropped = tel_sat_add(cr->events_dropped, d);
	for (i = 0; i < sizeof(raw) / sizeof(uint64_t); i++)
		/* cppcheck-suppress uninitvar ; rp is raw, written whole */
		if (rp[i] > sp[i])
			left = tel_sat_add(left, rp[i] - sp[i]);
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
				err = final ? tel_snap_put(d, old, &st,
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
			left = tel_sat_add(left, grew - src->budget);
			grew = src->budget;
		}
		src->budget -= grew;
		sl->seen += (uint32_t)grew;
		sl->credited = tel_sat_add(sl->credited, grew);
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
			err = tel_snap_put(d, hash, &st, shm_owner(src));
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
			err = tel_snap_add_hist(d, &key, src->rows[i]);
	}
	if (!err)
		tel_counters_add(&d->counters, &src->credited);
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
int tel_shm_poll(struct tel *t, struct tel_snapshot *s)
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
		err = tel_snap_merge_rows(t->retired, p);
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
		err = tel_snap_merge_rows(s, t->retired);
	if (err)
		return err;
	for (i = 0; i < s->cap; i++) {
		const struct tel_block_ent *r;

		if (!s->blocks[i].used)
			continue;
		r = tel_snap_find(t->retired, s->blocks[i].hash);
		if (r) {
			tel_stats_merge(&s->blocks[i].s, &r->s);
			overlap++;
		}
	}
	for (i = 0; i < t->nr_touched && !err; i++) {
		const struct tel_block_ent *r =
			tel_snap_find(t->retired, t->touched[i]);

		if (!r || tel_snap_find(s, t->touched[i]))
			continue; /* pruned since, or live */
		err = tel_snap_put(s, t->touched[i], &r->s, 0);
		overlap++;
	}
	if (err)
		return err;
	t->nr_retired_only = t->retired->nr_blocks - overlap;
	tel_snap_finish(s);
	return 0;
}

/* Every region's view (tel_close()). */
void tel_shm_free_all(struct tel *t)
{
	for (size_t i = 0; i < t->nr_srcs; i++)
		shm_src_free(&t->srcs[i]);
	free(t->srcs);
}
