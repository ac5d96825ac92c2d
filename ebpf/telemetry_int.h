/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the telemetry files: the API (telemetry.c), the
 * snapshot tables (telemetry_snapshot.c), the shm source
 * (telemetry_shm_source.c), the polls (telemetry_poll.c, and the
 * loader's in proportion to what changed, telemetry_delta.c) and the BPF
 * loader (telemetry_bpf.c, telemetry_pins.c, telemetry_bpf_read.c; what
 * only those share is telemetry_bpf_int.h).
 */
#ifndef KVMM_EBPF_TELEMETRY_INT_H
#define KVMM_EBPF_TELEMETRY_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>

#include "ebpf/telemetry.h"

typedef int (*tel_block_fn)(void *arg, uint64_t hash,
			    const struct kvmm_block_stats *stats);
typedef int (*tel_hist_fn)(void *arg, const struct kvmm_hist_key *key,
			   const struct kvmm_hist *hist);

struct tel_bpf;

#define TEL_PIN_ROOT_MAX 256
/* The largest key of a map read in batches (kvmm_blocks, kvmm_hist). */
#define TEL_KEY_MAX                                                     \
	(sizeof(struct kvmm_block_key) > sizeof(struct kvmm_hist_key) ? \
		 sizeof(struct kvmm_block_key) :                        \
		 sizeof(struct kvmm_hist_key))

struct tel {
	enum tel_mode mode;
	enum tel_source source;
	bool keep_pins;
	char reason[256];
	char pin_root[TEL_PIN_ROOT_MAX];
	char pin_dir[TEL_PIN_ROOT_MAX + 32];
	struct tel_sink sink;
	struct tel_bpf *bpf;
	struct tel_snapshot *snap; /* latest tel_poll() */
	/* shm: what removed sessions and slots taken back from live ones
	 * measured, at most max_retired blocks (the latest accessed) */
	struct tel_snapshot *retired;
	size_t max_retired;
	/* retired blocks the snapshot does not hold (tel_block_count()) */
	size_t nr_retired_only;
	/* hashes retired_add() changed during this poll */
	uint64_t *touched;
	size_t nr_touched, cap_touched;
	/* sessions removed since the last poll, retired at the next */
	struct tel_snapshot *pending;
	struct tel_shm_src *srcs;
	size_t nr_srcs, cap_srcs;
	tel_rename_fn rename; /* tel_set_rename(), may be NULL */
	void *rename_arg;
	/* tel_poll_begin() with the BPF source: the thread that builds the
	 * next snapshot and finds its changed blocks; only it touches these
	 * (and the BPF read buffers) until tel_poll_end() joins it */
	pthread_t poll_thread;
	bool polling;
	struct tel_snapshot *next;
	const struct tel_block_ent **changed; /* entries of next */
	size_t nr_changed, cap_changed;
	int poll_err;
	/* a loader's BPF source: the map as the polls read it, kept from
	 * poll to poll (telemetry_delta.c); NULL for a pin reader, which
	 * walks the map at each poll */
	struct tel_delta *delta;
};

/*
 * Snapshots (telemetry_snapshot.c): an open-addressing table of block
 * statistics, the histogram rows sorted by packed key and the summed
 * counters.  Whoever holds a struct tel_snapshot reads it directly.
 */
struct tel_block_ent {
	uint64_t hash;
	uint64_t used;
	/* the retired table: whose report it is (shm_owner() in
	 * telemetry_shm_source.c), for the share each writer may hold */
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

/* Counts only ever stop at UINT64_MAX: a client's number never wraps one. */
static inline uint64_t tel_sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* new: room for want_blocks before it grows; NULL without memory.  find:
 * a block's entry, NULL when none (or no s); find_row: the row of a
 * packed key in a finished s.  put: a block's report
 * merged into s, by owner (0: none), nothing when its count is 0.
 * add_hist: a row added to s's (appended unsorted; finish sorts them).
 * merge_rows: the rows and counters of s into d (blocks apart).  prune:
 * keep `keep` blocks, the others leaving by owner's share then LRU. */
struct tel_snapshot *tel_snap_new(size_t want_blocks);
void tel_snap_free(struct tel_snapshot *s);
const struct tel_block_ent *tel_snap_find(const struct tel_snapshot *s,
					  uint64_t hash);
int tel_snap_put(struct tel_snapshot *s, uint64_t hash,
		 const struct kvmm_block_stats *st, uint64_t owner);
struct tel_hist_row *tel_snap_find_row(const struct tel_snapshot *s,
				       uint64_t packed);
int tel_snap_add_hist(void *arg, const struct kvmm_hist_key *key,
		      const struct kvmm_hist *h);
void tel_snap_finish(struct tel_snapshot *s);
int tel_snap_merge_rows(struct tel_snapshot *d, const struct tel_snapshot *s);
int tel_snap_prune(struct tel_snapshot *s, size_t keep, size_t share);
void tel_counters_add(struct kvmm_counters *d, const struct kvmm_counters *s);

/* The snapshot's blocks, for telemetry_delta.c: get (0, -ENOENT), set
 * (insert or replace), del, clear (every block). */
int tel_snap_get(const struct tel_snapshot *s, uint64_t hash,
		 struct kvmm_block_stats *out);
int tel_snap_set(struct tel_snapshot *s, uint64_t hash,
		 const struct kvmm_block_stats *st);
void tel_snap_del(struct tel_snapshot *s, uint64_t hash);
void tel_snap_clear(struct tel_snapshot *s);
/* Add view s of a block to view d (counts added, latest access kept). */
void tel_stats_merge(struct kvmm_block_stats *d,
		     const struct kvmm_block_stats *s);

/*
 * The loader's poll in proportion to what changed (telemetry_delta.c).
 * collect: the poll's thread half (reads the dirty ring and the entries
 * it names, or walks the map), lists what changed; apply: the loop's
 * half, into t->snap, feeding the sink.  resync: the next poll walks the
 * map (the rename hook changed).
 */
struct tel_delta;
int tel_delta_new(uint32_t max_blocks, struct tel_delta **out);
void tel_delta_free(struct tel_delta *d);
void tel_delta_resync(struct tel_delta *d);
void tel_delta_stats(const struct tel_delta *d, struct tel_poll_stats *out);
int tel_delta_collect(struct tel *t);
int tel_delta_apply(struct tel *t);
/* Tests only: called by each poll between its epoch bump and its read of
 * the ring (accesses fired there are queued in the epoch then current,
 * the case a poll must read again at the next). */
extern void (*tel_delta_after_bump)(void);

void tel_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The shm source (telemetry_shm_source.c).  poll: the sessions ended
 * since the last poll into the retired table, then every region read
 * into s, completed with the retired totals.  free_all: every region's
 * view (tel_close()). */
int tel_shm_poll(struct tel *t, struct tel_snapshot *s);
void tel_shm_free_all(struct tel *t);

/* BPF loader: 0, or -errno with t->reason set. */
int tel_bpf_open(struct tel *t, const struct tel_opts *o);
/* Read the maps a running loader pinned (no programs, no event ring). */
int tel_bpf_open_pinned(struct tel *t);
void tel_bpf_close(struct tel *t, bool keep_pins);
unsigned int tel_bpf_attachments(const struct tel *t);
int tel_bpf_read_blocks(struct tel *t, tel_bpf_block_fn fn, void *arg);
int tel_bpf_read_hist(struct tel *t, tel_hist_fn fn, void *arg);
int tel_bpf_read_counters(struct tel *t, struct kvmm_counters *out);
int tel_bpf_drain_events(struct tel *t);

/*
 * The loader's dirty ring (kvmm_dirty): the kvmm_blocks entries that
 * changed, each queued once per poll epoch after its access was counted.
 * has_dirty: a loader's handle (not a pin reader's).  epoch_next: the
 * next epoch, set for the programs; returns it.  dirty_drain: fn for
 * each record in the ring now (a non-zero return stops).
 * dirty_dropped: records that found the ring full, since load.
 * lookup_block: one entry's stats, -ENOENT when the map has none.
 */
typedef int (*tel_dirty_fn)(void *arg, const struct kvmm_block_key *key,
			    uint64_t epoch);
bool tel_bpf_has_dirty(const struct tel *t);
uint64_t tel_bpf_epoch_next(struct tel *t);
int tel_bpf_dirty_drain(struct tel *t, tel_dirty_fn fn, void *arg);
uint64_t tel_bpf_dirty_dropped(const struct tel *t);
int tel_bpf_lookup_block(struct tel *t, const struct kvmm_block_key *key,
			 struct kvmm_block_stats *out);

#endif
