// SPDX-License-Identifier: MIT
/*
 * Telemetry polls: tel_poll(), tel_poll_begin()/tel_poll_end() and what
 * they feed the sink.
 *
 * tel_poll() builds a new snapshot from the source (a walk of the BPF
 * maps through telemetry_bpf.c, or the shm regions merged with the
 * retired totals by telemetry_shm_source.c), compares it with the
 * previous one to feed the sink, and swaps; a loader's BPF poll instead
 * takes the entries that changed into the snapshot it has
 * (telemetry_delta.c) and replaces only the rows and counters.  A BPF
 * poll is in two halves: the first reads the kernel (on a thread of its
 * own with tel_poll_begin()), the second feeds the sink on the caller's
 * loop; setting the sink or the rename hook first joins a poll that
 * runs, so a poll feeds and renames with what it began with.
 *
 * Apart from the API (telemetry.c) and the sources because it is the one
 * place that orders a poll's halves and its thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_int.h"

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
	return tel_snap_put(r->snap, hash, st, 0);
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
		p = tel_snap_find(old, e->hash);
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

		p = tel_snap_find_row(old, r->packed);
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
		err = tel_bpf_read_hist(t, tel_snap_add_hist, s);
	if (!err)
		err = tel_bpf_read_counters(t, &s->counters);
	if (!err)
		tel_snap_finish(s);
	return err;
}

/* The snapshot s is the latest now: feed what changed, keep it. */
static void swap_in(struct tel *t, struct tel_snapshot *s)
{
	feed_rows(t, t->snap, s);
	tel_snap_free(t->snap);
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
	struct tel_snapshot *s =
		tel_snap_new(t->delta ? 0 : t->snap->nr_blocks);
	int err;

	if (!s)
		return -ENOMEM;
	if (t->delta) {
		err = tel_bpf_read_hist(t, tel_snap_add_hist, s);
		if (!err)
			err = tel_bpf_read_counters(t, &s->counters);
		if (!err) {
			tel_snap_finish(s);
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
		tel_snap_free(s);
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
	tel_snap_free(s);
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
	s = tel_snap_new(t->snap->nr_blocks);
	if (!s)
		return -ENOMEM;
	err = tel_shm_poll(t, s);
	if (err) {
		tel_snap_free(s);
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

/* ---- what the polls use: the sink and the rename hook ---- */

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

void tel_set_rename(struct tel *t, tel_rename_fn fn, void *arg)
{
	if (!t)
		return;
	poll_join(t, true); /* it renames with the hook it began with */
	t->rename = fn;
	t->rename_arg = arg;
	/* every entry may have another name now: read them all */
	tel_delta_resync(t->delta);
}
