// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * BPF side of kvmm telemetry: one USDT program per probe of ebpf/probes.h,
 * aggregating into maps that the loader pins by name under
 * /sys/fs/bpf/kvmm/v<KVMM_TEL_PIN_VERSION>/ and that bpftool prints with
 * named fields (the maps carry BTF):
 *
 *	kvmm_blocks	LRU hash, struct kvmm_block_key (hash, uid, gid)
 *			-> struct kvmm_block_entry (stats, dirty epoch)
 *	kvmm_hist	hash, struct kvmm_hist_key -> struct kvmm_hist (log2 ns)
 *	kvmm_counters	per-CPU array[1] of struct kvmm_counters
 *	kvmm_events	ring buffer of struct kvmm_tel_event_rec for the daemon
 *
 * Block statistics and histograms are shared across CPUs, so counts are
 * added atomically; the time fields are last-writer-wins, which is what an
 * estimate needs.  The access probe carries a user pointer to an array of
 * records; they are walked with bpf_loop() and copied a chunk at a time,
 * so a step with thousands of records still verifies quickly and costs
 * one probe hit.
 *
 * Each block entry that changes is queued on kvmm_dirty (not pinned: the
 * loader's) once per poll epoch, so the loader's poll reads the entries
 * that changed instead of walking the map.  The order matters for the
 * loader to miss no count: the count is added first, then the epoch read,
 * then the entry marked and queued (Documentation/telemetry.md, "The
 * poll reads what changed", has the argument).  A full ring is counted in
 * kvmm_dirty_dropped and makes the loader walk the map.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "ebpf/kvmm_telemetry.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define KVMM_ACCESS_CHUNK 16

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct kvmm_block_key);
	__type(value, struct kvmm_block_entry);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kvmm_blocks SEC(".maps");

/* Sized by the loader from kvmm_blocks' max_entries. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} kvmm_dirty SEC(".maps");

/* The loader's poll epoch (it bumps it, from 1 on) and the entries that
 * found kvmm_dirty full. */
volatile __u64 kvmm_poll_epoch;
volatile __u64 kvmm_dirty_dropped;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct kvmm_hist_key);
	__type(value, struct kvmm_hist);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kvmm_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kvmm_counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kvmm_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kvmm_events SEC(".maps");

/*
 * The loader (kvmmd): its process in its own pid namespace, set before
 * load.  Only its records may carry KVMM_ACCESS_NAMED; a client that sets
 * the flag is keyed by its uid and gid like any other report.
 */
const volatile __u64 loader_pidns_dev = 0;
const volatile __u64 loader_pidns_ino = 0;
const volatile __u32 loader_tgid = 0;

static __always_inline bool from_loader(void)
{
	struct bpf_pidns_info ns;

	if (!loader_tgid)
		return false;
	/* fails for a process outside the loader's pid namespace */
	if (bpf_get_ns_current_pid_tgid(loader_pidns_dev, loader_pidns_ino, &ns,
					sizeof(ns)))
		return false;
	return ns.tgid == loader_tgid;
}

/* Scratch for copying access records out of the client (not pinned). */
struct access_scratch {
	struct kvmm_access_rec recs[KVMM_ACCESS_CHUNK];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct access_scratch);
} kvmm_scratch SEC(".maps");

static __always_inline struct kvmm_counters *counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&kvmm_counters, &zero);
}

static __always_inline void count_event(__u32 kind)
{
	struct kvmm_counters *c = counters();

	/* Keep the bound check where the verifier can see it. */
	barrier_var(kind);
	if (c && kind < KVMM_TEL_NR_EVENTS)
		c->events[kind]++;
}

static __always_inline void hist_add(__u32 kind, __u32 tier, __u32 dst_tier,
				     __u64 segments, __u64 latency_ns,
				     __u64 bytes)
{
	struct kvmm_hist_key key = {
		.kind = kind,
		.tier = tier,
		.dst_tier = dst_tier,
		.segments = kvmm_tel_clamp_segments(segments),
	};
	struct kvmm_hist *h = bpf_map_lookup_elem(&kvmm_hist, &key);
	__u32 b = kvmm_tel_log2_bucket(latency_ns);

	if (!h) {
		struct kvmm_hist zero = {};

		/* Another CPU may insert the row first: then just look up. */
		bpf_map_update_elem(&kvmm_hist, &key, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&kvmm_hist, &key);
		if (!h) {
			struct kvmm_counters *c = counters();

			if (c)
				c->hist_dropped++;
			return;
		}
	}
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->sum_ns, latency_ns);
	__sync_fetch_and_add(&h->sum_bytes, bytes);
	if (b < KVMM_TEL_HIST_BUCKETS)
		__sync_fetch_and_add(&h->buckets[b], 1);
}

static __always_inline void emit(__u32 kind, __u64 hash, __u32 tier,
				 __u32 dst_tier, __u64 bytes, __u64 latency_ns,
				 __u64 seq, __u32 segments)
{
	struct kvmm_tel_event_rec *e;

	e = bpf_ringbuf_reserve(&kvmm_events, sizeof(*e), 0);
	if (!e) {
		struct kvmm_counters *c = counters();

		if (c)
			c->events_dropped++;
		return;
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->hash = hash;
	e->bytes = bytes;
	e->latency_ns = latency_ns;
	e->seq = seq;
	e->kind = kind;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->segments = segments;
	e->tier = tier;
	e->dst_tier = dst_tier;
	e->pad = 0;
	bpf_ringbuf_submit(e, 0);
}

/*
 * Queue e's key on kvmm_dirty unless it is queued in this epoch already.
 * Called after the access was counted: the epoch read here is then the
 * one of a poll that has not read the entry since (or a later one).  Two
 * CPUs may both queue it: the loader reads it twice, no harm.
 */
static __always_inline void mark_dirty(struct kvmm_block_entry *e,
				       const struct kvmm_block_key *key)
{
	__u64 epoch = kvmm_poll_epoch;
	struct kvmm_dirty_rec *d;

	if (e->dirty_epoch == epoch)
		return;
	e->dirty_epoch = epoch;
	d = bpf_ringbuf_reserve(&kvmm_dirty, sizeof(*d), 0);
	if (!d) {
		__sync_fetch_and_add(&kvmm_dirty_dropped, 1);
		return;
	}
	d->key = *key;
	d->epoch = epoch;
	bpf_ringbuf_submit(d, 0);
}

static __always_inline void block_access(const struct kvmm_access_rec *r,
					 __u64 now, __u32 pid, __u64 uid_gid,
					 bool loader, struct kvmm_counters *c)
{
	bool named = loader && (r->flags & KVMM_ACCESS_NAMED);
	struct kvmm_block_key key = {
		.hash = r->hash,
		.uid = named ? KVMM_TEL_ID_NAMED : (__u32)uid_gid,
		.gid = named ? KVMM_TEL_ID_NAMED : (__u32)(uid_gid >> 32),
	};
	struct kvmm_block_entry *e;
	struct kvmm_block_stats *s;

	c->accesses++;
	if (r->tier < KVMM_TEL_NR_TIERS)
		c->tier_accesses[r->tier]++;
	e = bpf_map_lookup_elem(&kvmm_blocks, &key);
	if (!e) {
		struct kvmm_block_entry init = {
			.stats = {
				.count = 1,
				.first_ns = now,
				.last_ns = now,
				.last_seq = r->seq,
				.last_tier = r->tier,
				.last_pid = pid,
			},
		};

		if (!bpf_map_update_elem(&kvmm_blocks, &key, &init,
					 BPF_NOEXIST)) {
			/* counted: now queue it (gone already: nothing to
			 * read) */
			e = bpf_map_lookup_elem(&kvmm_blocks, &key);
			if (e)
				mark_dirty(e, &key);
			return;
		}
		e = bpf_map_lookup_elem(&kvmm_blocks, &key);
		if (!e) {
			c->blocks_dropped++;
			return;
		}
	}
	s = &e->stats;
	s->ewma_gap_ns =
		kvmm_tel_ewma_next(s->count, s->ewma_gap_ns, s->last_ns, now);
	s->last_ns = now;
	s->last_seq = r->seq;
	s->last_tier = r->tier;
	s->last_pid = pid;
	/* a full barrier: the epoch mark_dirty() reads is read after it */
	__sync_fetch_and_add(&s->count, 1);
	mark_dirty(e, &key);
}

struct access_ctx {
	const struct kvmm_access_rec *user;
	__u32 n;
	__u32 pid;
	__u64 uid_gid; /* bpf_get_current_uid_gid(): gid << 32 | uid */
	bool loader; /* fired by the loader: KVMM_ACCESS_NAMED counts */
	__u64 now;
	struct access_scratch *scratch;
	struct kvmm_counters *c;
	bool chunk_ok; /* the current chunk was copied in one read */
};

/*
 * One record per bpf_loop iteration; every KVMM_ACCESS_CHUNK records the
 * next chunk is copied in one read.  A single flat callback keeps the
 * verifier's work (and so the loader's start-up time) small.
 */
static long access_one(__u32 i, void *arg)
{
	struct access_ctx *a = arg;
	__u32 k = i & (KVMM_ACCESS_CHUNK - 1);

	if (i >= a->n)
		return 1;
	if (k == 0)
		a->chunk_ok = !bpf_probe_read_user(
			a->scratch->recs,
			sizeof(struct kvmm_access_rec) * KVMM_ACCESS_CHUNK,
			a->user + i);
	/* A tail chunk may end at an unmapped page: go one by one. */
	if (!a->chunk_ok &&
	    bpf_probe_read_user(&a->scratch->recs[k],
				sizeof(struct kvmm_access_rec), a->user + i)) {
		a->c->access_dropped += a->n - i;
		return 1;
	}
	block_access(&a->scratch->recs[k], a->now, a->pid, a->uid_gid,
		     a->loader, a->c);
	return 0;
}

SEC("usdt")
int BPF_USDT(kvmm_access, __u64 step, const struct kvmm_access_rec *recs,
	     __u32 n)
{
	struct access_ctx a = {
		.user = recs,
		.n = n,
		.pid = bpf_get_current_pid_tgid() >> 32,
		.uid_gid = bpf_get_current_uid_gid(),
		.loader = from_loader(),
		.now = bpf_ktime_get_ns(),
	};
	__u32 zero = 0;

	a.c = counters();
	a.scratch = bpf_map_lookup_elem(&kvmm_scratch, &zero);
	if (!a.c || !a.scratch)
		return 0;
	a.c->events[KVMM_TEL_ACCESS]++;
	if (n > KVMM_TEL_MAX_ACCESS_RECORDS) {
		a.c->access_dropped += n - KVMM_TEL_MAX_ACCESS_RECORDS;
		a.n = KVMM_TEL_MAX_ACCESS_RECORDS;
	}
	bpf_loop(a.n, access_one, &a, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(kvmm_kernel, __u32 kind, __u64 latency_ns, __u32 segments,
	     __u64 tokens)
{
	kind = kind == KVMM_TEL_PREFILL ? KVMM_TEL_PREFILL : KVMM_TEL_ATTENTION;
	count_event(kind);
	hist_add(kind, KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_GPU, segments,
		 latency_ns, 0);
	emit(kind, 0, KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_GPU, 0, latency_ns,
	     tokens, kvmm_tel_clamp_segments(segments));
	return 0;
}

SEC("usdt")
int BPF_USDT(kvmm_extend, __u64 seq, __u64 tokens, __u32 pages,
	     __u64 latency_ns)
{
	count_event(KVMM_TEL_EXTEND);
	hist_add(KVMM_TEL_EXTEND, KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_GPU, 0,
		 latency_ns, pages);
	return 0;
}

SEC("usdt")
int BPF_USDT(kvmm_restore, __u64 hash, __u32 tier, __u64 bytes,
	     __u64 latency_ns)
{
	tier = tier < KVMM_TEL_NR_TIERS ? tier : KVMM_TEL_TIER_MISS;
	count_event(KVMM_TEL_RESTORE);
	hist_add(KVMM_TEL_RESTORE, tier, KVMM_TEL_TIER_GPU, 0, latency_ns,
		 bytes);
	emit(KVMM_TEL_RESTORE, hash, tier, KVMM_TEL_TIER_GPU, bytes, latency_ns,
	     0, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(kvmm_recompute, __u64 hash, __u64 position, __u32 tokens,
	     __u64 latency_ns)
{
	count_event(KVMM_TEL_RECOMPUTE);
	hist_add(KVMM_TEL_RECOMPUTE, KVMM_TEL_TIER_MISS, KVMM_TEL_TIER_GPU, 0,
		 latency_ns, tokens);
	emit(KVMM_TEL_RECOMPUTE, hash, KVMM_TEL_TIER_MISS, KVMM_TEL_TIER_GPU,
	     tokens, latency_ns, position, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(kvmm_revoke, __u64 session, __u64 hash, __u64 latency_ns)
{
	count_event(KVMM_TEL_REVOKE);
	hist_add(KVMM_TEL_REVOKE, KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_GPU, 0,
		 latency_ns, 0);
	emit(KVMM_TEL_REVOKE, hash, KVMM_TEL_TIER_GPU, KVMM_TEL_TIER_GPU, 0,
	     latency_ns, session, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(kvmm_migrate, __u64 hash, __u32 from, __u32 to, __u64 bytes,
	     __u64 latency_ns)
{
	from = from < KVMM_TEL_NR_TIERS ? from : KVMM_TEL_TIER_MISS;
	to = to < KVMM_TEL_NR_TIERS ? to : KVMM_TEL_TIER_MISS;
	count_event(KVMM_TEL_MIGRATE);
	hist_add(KVMM_TEL_MIGRATE, from, to, 0, latency_ns, bytes);
	emit(KVMM_TEL_MIGRATE, hash, from, to, bytes, latency_ns, 0, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(kvmm_evict, __u64 hash, __u32 tier, __u64 bytes)
{
	tier = tier < KVMM_TEL_NR_TIERS ? tier : KVMM_TEL_TIER_MISS;
	count_event(KVMM_TEL_EVICT);
	emit(KVMM_TEL_EVICT, hash, tier, tier, bytes, 0, 0, 0);
	return 0;
}
