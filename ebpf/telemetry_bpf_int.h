/* SPDX-License-Identifier: MIT */
/*
 * What the BPF loader's files share (built with HAVE_BPF only): the
 * loader's handle, and the calls between the loader (telemetry_bpf.c),
 * its pin root (telemetry_pins.c) and its map and ring reads
 * (telemetry_bpf_read.c).
 */
#ifndef KVMM_EBPF_TELEMETRY_BPF_INT_H
#define KVMM_EBPF_TELEMETRY_BPF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ebpf/kvmm.skel.h"
#include "ebpf/telemetry_int.h"
#include "ebpf/telemetry_targets.h"

/* Elements a batched map walk reads a call (the read buffers' size). */
#define TEL_BATCH 4096
#define TEL_MAX_LINKS (TEL_MAX_TARGETS * 8)

struct tel_bpf {
	struct kvmm_bpf *skel;
	struct bpf_link *links[TEL_MAX_LINKS];
	unsigned int nr_links;
	struct ring_buffer *rb;
	/* the loader's: kvmm_dirty, and what tel_bpf_dirty_drain() calls
	 * (only the poll touches these, on its thread or the loop) */
	struct ring_buffer *dirty_rb;
	tel_dirty_fn dirty_fn;
	void *dirty_arg;
	uint64_t epoch; /* kvmm_poll_epoch as we set it last */
	/* the maps we read: the skeleton's, or pins another loader made */
	int blocks_fd, hist_fd, counters_fd;
	bool own_fds; /* opened from pins (closed by us) */
	int lock_fd; /* the pin root, flocked while we own it (-1: reader) */
	struct tel *owner;
	int ncpus;
	void *keys, *vals; /* batch buffers */
};

/*
 * The pin root (telemetry_pins.c).  mkdir: the path and its parents.
 * rm_dir: a pin directory and its pins.  lock_root: the root's fd,
 * flocked, or -EBUSY with *holder (its comment says what create and
 * wait_ms do).  remove_stale_held: everything under the root t holds.
 * is_ours: whether the pin at path is still the map fd holds.
 */
int tel_pins_mkdir(const char *path);
int tel_pins_rm_dir(const char *dir);
int tel_pins_lock_root(const char *root, bool create, int wait_ms,
		       pid_t *holder);
void tel_pins_remove_stale_held(struct tel *t);
bool tel_pin_is_ours(const char *path, int fd);

/* The ring callbacks (telemetry_bpf_read.c): kvmm_dirty's (ctx: the
 * struct tel_bpf) and kvmm_events' (ctx: the struct tel). */
int tel_bpf_on_dirty(void *ctx, void *data, size_t size);
int tel_bpf_on_event(void *ctx, void *data, size_t size);

#endif
