/* SPDX-License-Identifier: MIT */
/*
 * Telemetry layout shared by the BPF programs (ebpf/kvmm.bpf.c), the loader
 * (ebpf/telemetry_bpf.c), the shared-memory fallback (ebpf/telemetry_shm.h)
 * and the probe sites (ebpf/probes.h).
 *
 * Two layouts use these structs, each with its own version:
 *
 *  - the pinned maps: a change to a map's key or value, or to an enum
 *    they hold, bumps KVMM_TEL_PIN_VERSION, which names the pin directory
 *    (/sys/fs/bpf/kvmm/v<N>/), so a loader never reuses a map that an
 *    older layout created and a reader never misreads one;
 *  - the shared-memory region a daemon gives each session
 *    (ebpf/telemetry_shm.h): a change to what it holds (the block stats,
 *    the histograms, the counters, the enums) bumps KVMM_TEL_SHM_VERSION,
 *    which libkvmm checks before it writes there.  A pin-only change
 *    leaves it alone, so older clients keep their shm telemetry.
 *
 * The header compiles both for the BPF target (no libc) and for user
 * space, so it only uses __u* types and plain inlines.
 */
#ifndef KVMM_EBPF_TELEMETRY_LAYOUT_H
#define KVMM_EBPF_TELEMETRY_LAYOUT_H

#include <linux/types.h>

/* 2: kvmm_blocks keyed by (hash, uid, gid) instead of the hash alone;
 * 3: its value a struct kvmm_block_entry (the stats and a dirty epoch) */
#define KVMM_TEL_PIN_VERSION 3
/* shm 2: block slots taken back by the daemon (a FROZEN count), a
 * begin/end pair in each histogram row */
#define KVMM_TEL_SHM_VERSION 2

/* Events: the probe that fired (also the histogram kind). */
enum kvmm_tel_event {
	KVMM_TEL_ACCESS = 0, /* step block accesses (no latency) */
	KVMM_TEL_ATTENTION, /* attention (decode) kernel completed */
	KVMM_TEL_PREFILL, /* prefill kernel completed */
	KVMM_TEL_EXTEND, /* sequence grew by pages */
	KVMM_TEL_RESTORE, /* block reloaded from a tier */
	KVMM_TEL_RECOMPUTE, /* block recomputed (patched) */
	KVMM_TEL_REVOKE, /* page revoked from a client */
	KVMM_TEL_MIGRATE, /* block moved between tiers */
	KVMM_TEL_EVICT, /* block dropped from a tier */
	KVMM_TEL_NR_EVENTS,
};

/*
 * Where an access found its block.  MISS means the block was not resident
 * anywhere and had to be recomputed.
 */
enum kvmm_tel_tier {
	KVMM_TEL_TIER_GPU = 0,
	KVMM_TEL_TIER_HOST,
	KVMM_TEL_TIER_NVME,
	KVMM_TEL_TIER_REMOTE,
	KVMM_TEL_TIER_MISS,
	KVMM_TEL_NR_TIERS,
};

/* Histograms: log2(ns) buckets; bucket i holds [2^i, 2^(i+1)), 0 holds 0..1. */
#define KVMM_TEL_HIST_BUCKETS 48
/* Segment counts above this share the last histogram row. */
#define KVMM_TEL_MAX_SEGMENTS 64
/* Records one access probe may carry; the rest are counted as dropped. */
#define KVMM_TEL_MAX_ACCESS_RECORDS 65536
/* EWMA of the inter-access gap: new = old + (gap - old) / 2^SHIFT. */
#define KVMM_TEL_EWMA_SHIFT 3

/*
 * One block access in a step, as the access probe passes them (pointer +
 * count): the block's content hash, the sequence that read it and the tier
 * it was found in.
 */
struct kvmm_access_rec {
	__u64 hash;
	__u64 seq;
	__u32 tier; /* enum kvmm_tel_tier */
	__u32 flags; /* KVMM_ACCESS_*; 0 from clients */
};

/*
 * The hash is already the cache's name for the block: kvmmd sets it on
 * the records of its own prefix opens, so that under --cache-scope those
 * are not renamed as a client's would be (whatever pid or uid kvmmd has).
 */
#define KVMM_ACCESS_NAMED 0x1u
/* kvmm_block_key.uid and .gid of the records flagged KVMM_ACCESS_NAMED:
 * (uid_t)-1, which no process has */
#define KVMM_TEL_ID_NAMED 0xffffffffu

/*
 * Key of the kvmm_blocks map: a block hash as the process that accessed
 * it named it, and that process's real uid and gid.  kvmmd's
 * --cache-scope uid|gid gives each tenant its own names for the hashes it
 * sends, so two tenants that send one hash use two blocks: their reports
 * stay apart here too, and the daemon renames each entry by its own
 * uid or gid.  kvmmd's own records (KVMM_ACCESS_NAMED) already carry the
 * cache's names: their uid and gid are KVMM_TEL_ID_NAMED.
 */
struct kvmm_block_key {
	__u64 hash;
	__u32 uid;
	__u32 gid;
};

/* Per-block statistics (value of the kvmm_blocks LRU hash; in shared
 * memory, of a block slot). */
struct kvmm_block_stats {
	__u64 count; /* accesses seen */
	__u64 first_ns; /* CLOCK_MONOTONIC of the first access */
	__u64 last_ns; /* ... and of the latest */
	__u64 ewma_gap_ns; /* inter-access time estimate (0 until 2 accesses) */
	__u64 last_seq; /* sequence of the latest access */
	__u32 last_tier; /* enum kvmm_tel_tier of the latest access */
	/* process of the latest access (shm mode: the session's peer, as
	 * the daemon registered its region; 0 if unknown) */
	__u32 last_pid;
};

/*
 * Value of the kvmm_blocks map: the block's statistics, and the poll
 * epoch (kvmm_poll_epoch in kvmm.bpf.c, which the loader bumps at each
 * poll) in which the entry's key was last queued on the kvmm_dirty ring
 * buffer, so that a poll reads the entries that changed, not the whole
 * map (see "The poll reads what changed" in Documentation/telemetry.md).
 */
struct kvmm_block_entry {
	struct kvmm_block_stats stats;
	__u64 dirty_epoch;
};

/* A kvmm_dirty record: an entry that changed, and the epoch it was
 * queued in. */
struct kvmm_dirty_rec {
	struct kvmm_block_key key;
	__u64 epoch;
};

/* Histogram key: event kind, tier (source tier for restore/migrate), the
 * destination tier of a migration, the segment count of a kernel. */
struct kvmm_hist_key {
	__u16 kind; /* enum kvmm_tel_event */
	__u8 tier;
	__u8 dst_tier;
	__u32 segments;
};

struct kvmm_hist {
	__u64 count;
	__u64 sum_ns;
	__u64 sum_bytes;
	__u64 buckets[KVMM_TEL_HIST_BUCKETS];
};

/* Counters (per CPU in BPF, one copy in shared memory). */
struct kvmm_counters {
	__u64 events[KVMM_TEL_NR_EVENTS]; /* probe firings per event */
	__u64 accesses; /* access records processed */
	__u64 tier_accesses[KVMM_TEL_NR_TIERS]; /* ... by tier found */
	__u64 access_dropped; /* records over the per-probe cap or unreadable */
	__u64 blocks_dropped; /* block stats that could not be stored */
	__u64 hist_dropped; /* histogram rows that could not be stored */
	__u64 events_dropped; /* ring buffer full */
};

/* Ring buffer record for the daemon (everything but accesses). */
struct kvmm_tel_event_rec {
	__u64 ts_ns;
	__u64 hash; /* block, 0 if the event is not about one block */
	__u64 bytes;
	__u64 latency_ns;
	__u64 seq; /* sequence or session, when known */
	__u32 kind; /* enum kvmm_tel_event */
	__u32 pid;
	__u32 segments;
	__u8 tier;
	__u8 dst_tier;
	__u16 pad;
};

/* floor(log2(v)) clamped to the histogram; branchy but BPF-verifiable. */
static inline __u32 kvmm_tel_log2_bucket(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) {
		v >>= 32;
		r += 32;
	}
	if (v >> 16) {
		v >>= 16;
		r += 16;
	}
	if (v >> 8) {
		v >>= 8;
		r += 8;
	}
	if (v >> 4) {
		v >>= 4;
		r += 4;
	}
	if (v >> 2) {
		v >>= 2;
		r += 2;
	}
	if (v >> 1)
		r += 1;
	return r < KVMM_TEL_HIST_BUCKETS ? r : KVMM_TEL_HIST_BUCKETS - 1;
}

static inline __u32 kvmm_tel_clamp_segments(__u64 s)
{
	return s < KVMM_TEL_MAX_SEGMENTS ? (__u32)s : KVMM_TEL_MAX_SEGMENTS;
}

/*
 * The EWMA of the inter-access gap after an access at now_ns, given the
 * block's count of earlier accesses (prev_count) and the latest one's time.
 */
static inline __u64 kvmm_tel_ewma_next(__u64 prev_count, __u64 ewma,
				       __u64 last_ns, __u64 now_ns)
{
	__u64 gap = now_ns > last_ns ? now_ns - last_ns : 0;

	if (prev_count == 0)
		return 0;
	if (prev_count == 1) /* the first gap seeds the estimate */
		return gap;
	if (gap >= ewma)
		return ewma + ((gap - ewma) >> KVMM_TEL_EWMA_SHIFT);
	return ewma - ((ewma - gap) >> KVMM_TEL_EWMA_SHIFT);
}

#endif
