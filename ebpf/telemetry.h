/* SPDX-License-Identifier: MIT */
/*
 * Telemetry for the daemon and the policy: one statistics API over two
 * sources.
 *
 *  - BPF: ebpf/kvmm.bpf.c attached to the USDT probes of libkvmm (every
 *    process, by library path) and of the daemon itself, maps pinned under
 *    <pin_root>/v<KVMM_TEL_PIN_VERSION>/.
 *  - SHM: when BPF is not available (not root, no bpffs, no BTF, old
 *    kernel, built without BPF) each session's client writes the same
 *    statistics into a region of its shared memory (ebpf/telemetry_shm.h)
 *    that the daemon registers here with tel_shm_add().
 *
 * tel_poll() refreshes a snapshot (a loader's BPF source: the map
 * entries its programs queued as changed; a pin reader's: a walk of the
 * map; shm: a merge of the regions), drains the BPF event ring, and
 * tells the sink which blocks were accessed and which latency rows grew
 * since the previous poll; the lookups and iterators read that snapshot,
 * so they are cheap and consistent between polls.  Not thread-safe: the daemon calls it from its
 * event loop.
 */
#ifndef KVMM_EBPF_TELEMETRY_H
#define KVMM_EBPF_TELEMETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ebpf/kvmm_telemetry.h"

enum tel_mode {
	TEL_MODE_AUTO = 0, /* BPF if it works, else shared memory */
	TEL_MODE_BPF, /* BPF or fail */
	TEL_MODE_SHM, /* shared memory only */
	TEL_MODE_OFF,
	/* Read the maps kvmmd pinned (kvmmctl trace): no programs of our
	 * own, the event ring left to the daemon, pins left alone. */
	TEL_MODE_PINNED,
};

enum tel_source {
	TEL_SOURCE_OFF = 0,
	TEL_SOURCE_BPF,
	TEL_SOURCE_SHM,
};

#define TEL_DEFAULT_PIN_ROOT "/sys/fs/bpf/kvmm"
#define TEL_MAX_TARGETS 8

struct tel_opts {
	size_t size; /* sizeof(struct tel_opts) */
	enum tel_mode mode;
	/* Pins go to <pin_root>/v<layout>/ (default TEL_DEFAULT_PIN_ROOT). */
	const char *pin_root;
	/*
	 * Binaries and libraries whose kvmm probes to attach (NULL-terminated;
	 * NULL = libkvmm.so.1 next to this executable and in the install
	 * libdir, plus this executable).
	 */
	const char *const *targets;
	pid_t pid; /* -1 (all processes) unless set; 0 means -1 too */
	/*
	 * The loader's own executable (/proc/self/exe) is traced in this
	 * process alone, whatever pid says: kvmmd, whose probes in its own
	 * binary are the daemon's, and another kvmmd started from the same
	 * binary (kvmmd@.service, one per GPU) is another daemon.  Off for a
	 * loader that is also the clients' binary (a test linking libkvmm
	 * statically and forking its clients).
	 */
	bool own_exe_self_only;
	uint32_t max_blocks; /* LRU capacity, default 65536 */
	bool keep_pins; /* leave the pins at close (debugging) */
	bool quiet; /* no log line when falling back */
};

/* Where a block report comes from, for the rename hook. */
#define TEL_SRC_BPF UINT64_MAX
struct tel_origin {
	uint64_t src; /* the shm source's id (tel_shm_add()), or TEL_SRC_BPF */
	uint32_t pid; /* the source's process, or the BPF entry's latest
		       * access's */
	/* BPF: the real uid and gid of the processes that made the entry
	 * (its map key); shm: 0 (the source's id says whose it is) */
	uint32_t uid, gid;
};
typedef bool (*tel_rename_fn)(void *arg, const struct tel_origin *o,
			      uint64_t *hash);

/* What the policy is told at each poll. */
struct tel_sink {
	/* A block was accessed since the previous poll (stats are totals). */
	void (*block)(void *arg, uint64_t hash,
		      const struct kvmm_block_stats *stats);
	/*
	 * A latency row grew: count, sum_ns, sum_bytes are the increments
	 * since the previous poll (mean latency = sum_ns / count).
	 */
	void (*latency)(void *arg, const struct kvmm_hist_key *key,
			uint64_t count, uint64_t sum_ns, uint64_t sum_bytes);
	/* One ring-buffer event (BPF source only). */
	void (*event)(void *arg, const struct kvmm_tel_event_rec *ev);
	void *arg;
};

struct tel;

/*
 * Start telemetry.  In AUTO mode a BPF failure is not an error: the reason
 * is logged once (tel_unavailable_reason()) and the source is SHM.
 */
int tel_open(const struct tel_opts *opts, struct tel **out);
/* Detach, drop the maps and (unless keep_pins) remove the pins. */
void tel_close(struct tel *t);

enum tel_source tel_source(const struct tel *t);
const char *tel_source_string(enum tel_source s);
const char *tel_mode_string(enum tel_mode m);
int tel_mode_parse(const char *s, enum tel_mode *out);
const char *tel_event_string(uint32_t kind);
const char *tel_tier_string(uint32_t tier);
/* Why BPF is not in use ("" when it is). */
const char *tel_unavailable_reason(const struct tel *t);
/* The versioned pin directory ("" unless the source is BPF). */
const char *tel_pin_dir(const struct tel *t);
/* Probe attachments made (BPF source). */
unsigned int tel_attachments(const struct tel *t);

void tel_set_sink(struct tel *t, const struct tel_sink *sink);

/*
 * Shared-memory sources: the daemon registers each session's region (its
 * own mapping and the size it created) and removes it when the session
 * ends; a removed region's statistics stay in the totals.  pid is the
 * process that writes the region (the session's peer): its blocks'
 * last_pid reads pid, whatever the client wrote there (0: unknown).
 */
int tel_shm_add(struct tel *t, uint64_t id, uint32_t pid, void *base,
		size_t size);

/*
 * The owner's names for the block hashes a process reports (kvmmd's
 * --cache-scope renames each client's hashes by its uid or gid): fn gets
 * where a report comes from and its hash, renames it in place, or returns
 * false to leave the report out.  Reports are renamed as they are read,
 * before they meet each other in the snapshot, so two tenants' equal
 * hashes stay apart: a shm region's with the id and pid the region was
 * added with, a BPF entry (the kernel keeps one per hash, uid and gid)
 * with its uid, gid and the pid of its latest access (src TEL_SRC_BPF).
 * Reports that get one name are then merged, their counts added.  NULL
 * (the default): as reported.
 */
void tel_set_rename(struct tel *t, tel_rename_fn fn, void *arg);
void tel_shm_remove(struct tel *t, uint64_t id);

/* Refresh the snapshot and feed the sink (after a poll begun with
 * tel_poll_begin(), which it waits for). */
int tel_poll(struct tel *t);
/*
 * tel_poll() in two halves, for an event loop: with the BPF source, the
 * map reads (a walk of a full map takes tens of ms: bench/tel-poll) and
 * the renaming run on a thread of their own, and tel_poll_end() takes
 * the blocks that changed into the snapshot, feeds them to the sink with
 * the latency rows and the events.  begin: 0, -EBUSY if
 * one runs, -errno; other sources do the whole poll in begin.  end: 1
 * when it fed (or nothing ran), 0 while the thread runs (call it again
 * later; the event ring is drained at each call), -errno.  Between the
 * two the snapshot reads (tel_block_*, tel_counters) see the last one.
 * The rename hook then runs on that thread: it must read only what the
 * caller does not change meanwhile (kvmmd's reads its scope's key).
 * tel_set_sink() and tel_set_rename() wait for a running poll, which
 * feeds the sink and renames with the hook it began with.
 */
int tel_poll_begin(struct tel *t);
int tel_poll_end(struct tel *t);

/*
 * What the polls of a loader's BPF source did (a pin reader's walk the
 * map at each poll and count nothing here): polls, those that walked the
 * whole map (the first, after tel_set_rename(), after the dirty ring was
 * full, and when entries the map's LRU dropped may have piled up),
 * entries looked up by key (the changed ones the others read), polls that
 * found the ring had been full, and the records it lost (the kernel's
 * count); as of the latest poll ended (tel_poll(), tel_poll_end()).
 */
struct tel_poll_stats {
	uint64_t polls;
	uint64_t full_walks;
	uint64_t keys_read;
	uint64_t ring_full;
	uint64_t dirty_dropped;
};
void tel_poll_stats(const struct tel *t, struct tel_poll_stats *out);

/* Reads of the snapshot. */
int tel_block_lookup(const struct tel *t, uint64_t hash,
		     struct kvmm_block_stats *out);
size_t tel_block_count(const struct tel *t);
/* Calls fn for each block; a non-zero return stops and is returned. */
int tel_block_foreach(const struct tel *t,
		      int (*fn)(void *arg, uint64_t hash,
				const struct kvmm_block_stats *stats),
		      void *arg);
int tel_hist_lookup(const struct tel *t, const struct kvmm_hist_key *key,
		    struct kvmm_hist *out);
int tel_hist_foreach(const struct tel *t,
		     int (*fn)(void *arg, const struct kvmm_hist_key *key,
			       const struct kvmm_hist *hist),
		     void *arg);
/* A kvmm_blocks entry as the map holds it (per hash and accessing ids). */
typedef int (*tel_bpf_block_fn)(void *arg, const struct kvmm_block_key *key,
				const struct kvmm_block_stats *stats);
/*
 * BPF source: each kvmm_blocks entry as the map holds it now, one per
 * hash and real uid and gid of the processes that accessed it, neither
 * renamed nor merged (the snapshot adds up the entries that name one
 * block), in a walk of the map of its own, not the snapshot's.  A
 * non-zero return of fn stops and is returned.  -EBUSY while a poll
 * runs on its thread (it uses the same read buffers), -ENOTSUP with
 * another source.
 */
int tel_bpf_entry_foreach(struct tel *t, tel_bpf_block_fn fn, void *arg);
/* Counters summed over CPUs (BPF) or sessions (SHM). */
void tel_counters(const struct tel *t, struct kvmm_counters *out);

/* Percentile (0..100) of a histogram, as the upper edge of its bucket. */
uint64_t tel_hist_percentile(const struct kvmm_hist *h, double pct);

/*
 * Remove every pin under pin_root (all layout versions), whoever made
 * them; 0 or -errno.
 */
int tel_pins_remove_all(const char *pin_root);
/*
 * The same, unless a loader holds pin_root (a running kvmmd owns its pin
 * root until it stops): then -EBUSY and nothing is removed.  0 when there
 * is no pin_root.
 */
int tel_pins_remove_stale(const char *pin_root);
/*
 * TEL_MODE_PINNED: 0 while the maps it reads are still the ones pinned,
 * -ESTALE when other maps are pinned there now (a new loader: reopen),
 * -ENOENT (or another -errno) when the pins are gone.
 */
int tel_pinned_check(const struct tel *t);

#endif
