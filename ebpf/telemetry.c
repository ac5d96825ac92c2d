// SPDX-License-Identifier: MIT
/*
 * Telemetry API: the source-independent half of ebpf/telemetry.h that
 * opens and closes a handle and answers from its latest snapshot.
 *
 * tel_open() picks the source (BPF through telemetry_bpf.c, else the
 * shared-memory regions, or off) and tel_close() undoes it; the lookups
 * read the snapshot the last poll left (telemetry_poll.c) and, for
 * blocks no live session holds, the shm source's retired table
 * (telemetry_shm_source.c).  The snapshot tables themselves are in
 * telemetry_snapshot.c.  Also here: the names of events, tiers, sources
 * and modes, and tel_log().
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_int.h"
#include "ebpf/telemetry_shm.h" /* kvmm_tel_hist_key_pack() */
#include "vmm/vmm.h"

/* The shm source's retired table, like the BPF map's LRU, unless
 * tel_opts.max_blocks says otherwise. */
#define TEL_RETIRED_MAX 65536

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

/* ---- open / close ---- */

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
	t->snap = tel_snap_new(64);
	t->retired = tel_snap_new(64);
	t->pending = tel_snap_new(64);
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
	tel_snap_free(t->snap);
	tel_snap_free(t->retired);
	tel_snap_free(t->pending);
	free(t);
	return err;
}

void tel_close(struct tel *t)
{
	if (!t)
		return;
	if (t->polling) { /* what it found goes unread */
		pthread_join(t->poll_thread, NULL);
		tel_snap_free(t->next);
	}
	free(t->changed);
	tel_delta_free(t->delta);
	if (t->bpf)
		tel_bpf_close(t, t->keep_pins);
	tel_snap_free(t->snap);
	tel_snap_free(t->retired);
	tel_snap_free(t->pending);
	free(t->touched);
	tel_shm_free_all(t);
	free(t);
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

int tel_block_lookup(const struct tel *t, uint64_t hash,
		     struct kvmm_block_stats *out)
{
	const struct tel_block_ent *e = t ? tel_snap_find(t->snap, hash) : NULL;

	/* a block no live session accessed: its retired totals */
	if (!e && t)
		e = tel_snap_find(t->retired, hash);
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

		if (!e->used || tel_snap_find(t->snap, e->hash))
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
	r = tel_snap_find_row(t->snap, kvmm_tel_hist_key_pack(key));
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
