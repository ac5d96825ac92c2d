// SPDX-License-Identifier: MIT
/*
 * The BPF loader's reads: the maps (kvmm_blocks, kvmm_hist,
 * kvmm_counters) for the polls, the policy and kvmmctl, and the two
 * rings (kvmm_dirty for the loader's poll, telemetry_delta.c; kvmm_events
 * for the sink).
 *
 * A walk uses bpf_map_lookup_batch() so a walk of 64k blocks is a
 * handful of syscalls; a loader's poll reads the entries the kvmm_dirty
 * ring names one by one instead (tel_bpf_lookup_block()), and bumps the
 * poll epoch the programs mark entries with (tel_bpf_epoch_next()).  A
 * pin reader has the maps alone: no rings, no epoch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_int.h"

#if HAVE_BPF
#include "ebpf/telemetry_bpf_int.h"

int tel_bpf_on_dirty(void *ctx, void *data, size_t size)
{
	struct tel_bpf *b = ctx;
	const struct kvmm_dirty_rec *d = data;

	if (size < sizeof(*d))
		return 0;
	return b->dirty_fn(b->dirty_arg, &d->key, d->epoch);
}

int tel_bpf_on_event(void *ctx, void *data, size_t size)
{
	struct tel *t = ctx;

	if (size >= sizeof(struct kvmm_tel_event_rec) && t->sink.event)
		t->sink.event(t->sink.arg, data);
	return 0;
}

/* Walk a hash map in batches of TEL_BATCH, calling emit per element. */
static int read_batched(int fd, size_t ksz, size_t vsz, void *keys, void *vals,
			int (*emit)(void *arg, const void *k, const void *v),
			void *arg)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bo);
	uint64_t in[2], out[2];
	bool first = true;
	__u32 n, i;
	int err, r;

	for (;;) {
		n = TEL_BATCH;
		err = bpf_map_lookup_batch(fd, first ? NULL : in, out, keys,
					   vals, &n, &bo);
		if (err && errno != ENOENT)
			return -errno;
		for (i = 0; i < n; i++) {
			r = emit(arg, (char *)keys + i * ksz,
				 (char *)vals + i * vsz);
			if (r)
				return r;
		}
		if (err) /* ENOENT: that was the last batch */
			return 0;
		memcpy(in, out, sizeof(in));
		first = false;
	}
}

struct emit_ctx {
	tel_bpf_block_fn bfn;
	tel_hist_fn hfn;
	void *arg;
};

static int emit_block(void *arg, const void *k, const void *v)
{
	struct emit_ctx *c = arg;

	return c->bfn(c->arg, k, v);
}

static int emit_hist(void *arg, const void *k, const void *v)
{
	struct emit_ctx *c = arg;

	return c->hfn(c->arg, k, v);
}

int tel_bpf_read_blocks(struct tel *t, tel_bpf_block_fn fn, void *arg)
{
	struct emit_ctx c = { .bfn = fn, .arg = arg };
	struct tel_bpf *b = t->bpf;

	/* the stats lead each kvmm_block_entry */
	return read_batched(b->blocks_fd, sizeof(struct kvmm_block_key),
			    sizeof(struct kvmm_block_entry), b->keys, b->vals,
			    emit_block, &c);
}

bool tel_bpf_has_dirty(const struct tel *t)
{
	return t->bpf && t->bpf->dirty_rb;
}

uint64_t tel_bpf_epoch_next(struct tel *t)
{
	struct tel_bpf *b = t->bpf;

	/* seq_cst: the ring is read, and entries looked up, after it */
	__atomic_store_n(&b->skel->bss->kvmm_poll_epoch, ++b->epoch,
			 __ATOMIC_SEQ_CST);
	return b->epoch;
}

int tel_bpf_dirty_drain(struct tel *t, tel_dirty_fn fn, void *arg)
{
	struct tel_bpf *b = t->bpf;
	int n;

	b->dirty_fn = fn;
	b->dirty_arg = arg;
	n = ring_buffer__consume(b->dirty_rb);
	return n < 0 ? n : 0;
}

uint64_t tel_bpf_dirty_dropped(const struct tel *t)
{
	return __atomic_load_n(&t->bpf->skel->bss->kvmm_dirty_dropped,
			       __ATOMIC_ACQUIRE);
}

int tel_bpf_lookup_block(struct tel *t, const struct kvmm_block_key *key,
			 struct kvmm_block_stats *out)
{
	struct kvmm_block_entry e;

	if (bpf_map_lookup_elem(t->bpf->blocks_fd, key, &e))
		return -errno;
	*out = e.stats;
	return 0;
}

int tel_bpf_read_hist(struct tel *t, tel_hist_fn fn, void *arg)
{
	struct emit_ctx c = { .hfn = fn, .arg = arg };
	struct tel_bpf *b = t->bpf;

	return read_batched(b->hist_fd, sizeof(struct kvmm_hist_key),
			    sizeof(struct kvmm_hist), b->keys, b->vals,
			    emit_hist, &c);
}

int tel_bpf_read_counters(struct tel *t, struct kvmm_counters *out)
{
	struct tel_bpf *b = t->bpf;
	size_t stride = (sizeof(*out) + 7) & ~(size_t)7;
	size_t words = sizeof(*out) / sizeof(uint64_t), w;
	char *vals = calloc(b->ncpus, stride);
	__u32 zero = 0;
	int cpu;

	if (!vals)
		return -ENOMEM;
	memset(out, 0, sizeof(*out));
	if (bpf_map_lookup_elem(b->counters_fd, &zero, vals)) {
		int err = -errno;

		free(vals);
		return err;
	}
	for (cpu = 0; cpu < b->ncpus; cpu++) {
		const uint64_t *v = (const uint64_t *)(vals + cpu * stride);

		for (w = 0; w < words; w++)
			((uint64_t *)out)[w] += v[w];
	}
	free(vals);
	return 0;
}

int tel_bpf_drain_events(struct tel *t)
{
	int n;

	if (!t->bpf->rb) /* a pin reader leaves the events to the daemon */
		return 0;
	n = ring_buffer__consume(t->bpf->rb);

	return n < 0 ? n : 0;
}

#else /* !HAVE_BPF */

int tel_bpf_read_blocks(struct tel *t, tel_bpf_block_fn fn, void *arg)
{
	return -ENOTSUP;
}

int tel_bpf_read_hist(struct tel *t, tel_hist_fn fn, void *arg)
{
	return -ENOTSUP;
}

bool tel_bpf_has_dirty(const struct tel *t)
{
	return false;
}

uint64_t tel_bpf_epoch_next(struct tel *t)
{
	return 0;
}

int tel_bpf_dirty_drain(struct tel *t, tel_dirty_fn fn, void *arg)
{
	return -ENOTSUP;
}

uint64_t tel_bpf_dirty_dropped(const struct tel *t)
{
	return 0;
}

int tel_bpf_lookup_block(struct tel *t, const struct kvmm_block_key *key,
			 struct kvmm_block_stats *out)
{
	return -ENOTSUP;
}

int tel_bpf_read_counters(struct tel *t, struct kvmm_counters *out)
{
	return -ENOTSUP;
}

int tel_bpf_drain_events(struct tel *t)
{
	return -ENOTSUP;
}

#endif
