/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the telemetry core (telemetry.c: snapshot, shm
 * sources, API) and the BPF loader (telemetry_bpf.c).
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
};

void tel_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

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

#endif
