/* SPDX-License-Identifier: MIT */
/*
 * kvmm wire ABI, the cache's tiers: TIER_STATS (command 0x58), its
 * optional request and its reply, one struct kvmm_tier_info per tier
 * (GPU, host, NVMe).
 *
 * Part of <kvmm/uapi.h>, which includes it; include that one (it has
 * the ABI version, the command numbers and the message header).  It
 * compiles alone too (tests/header-alone.sh).
 */
#ifndef KVMM_UAPI_TIERS_H
#define KVMM_UAPI_TIERS_H

#include <stdint.h>

/* TIER_STATS reply: one entry per tier (0 GPU, 1 host, 2 NVMe). */
struct kvmm_tier_info {
	/* GPU: cached blocks the policy keeps there; host, NVMe: the slots
	 * --host-mem / --nvme-size hold (the policy keeps a few spare for
	 * blocks moving on), used counting blocks still being written */
	uint64_t capacity_blocks; /* 0: no such tier */
	uint64_t used_blocks;
	uint64_t block_bytes;
	uint64_t hits; /* prefix blocks found here */
	uint64_t demotions_in; /* blocks moved down into this tier */
	uint64_t promotions_out; /* blocks restored from here to the GPU */
	/* blocks dropped from this tier (also those moved down into it
	 * whose copy failed or never got a slot) */
	uint64_t drops;
	uint64_t bytes_in, bytes_out; /* copied into / out of this tier */
	/* restores from this tier to the GPU (promotions_out of them):
	 * sum and largest time from submission to the copy's completion,
	 * queueing included (what a waiting PREFIX_OPEN sees) */
	uint64_t restore_ns, restore_max_ns;
	/* ABI 1.4 (was reserved, 0 before): blocks cached here that a
	 * BLOCK_PUBLISH of the same content moved to the GPU tier (the
	 * published pages became the copy, this tier's was freed; not in
	 * promotions_out, which counts restores) */
	uint64_t promotions_by_publish;
};

struct kvmm_tier_stats_reply {
	uint32_t size;
	uint32_t nr_tiers; /* 3 */
	/* blocks BLOCK_PUBLISH named = published (the tenants'
	 * published_blocks summed) + duplicates + not_cached */
	uint64_t publishes, duplicates, not_cached;
	uint64_t prefix_opens, prefix_blocks_asked, prefix_blocks_hit;
	uint64_t misses; /* prefix lookups that stopped at a missing block */
	/* ... at a block that was being demoted when asked for and was
	 * dropped before it could be restored (the open waits for moves) */
	uint64_t busy_misses;
	uint64_t checksum_failures; /* NVMe slots dropped on a bad CRC32C */
	uint64_t recovered_blocks; /* NVMe slots found at startup */
	uint64_t migrations_failed;
	uint64_t migrations_in_flight;
	uint64_t slot_waits; /* demotions that waited for a host slot */
	/* blocks dropped instead of written to NVMe: used fewer times than
	 * --nvme-admit-uses */
	uint64_t nvme_admission_rejects;
	/* cached GPU blocks demoted or dropped to free pool pages for an
	 * extend or a restore that found the pool full */
	uint64_t pressure_reclaims;
	/* prefix blocks a PREFIX_OPEN found being restored for another one
	 * and waited for (restored once, shared) */
	uint64_t restores_waited;
	/* now: PREFIX_OPENs whose reply waits for restores */
	uint64_t prefix_opens_pending;
	/* restores cancelled before they started: every PREFIX_OPEN
	 * waiting for them went away (its client closed or died) */
	uint64_t restores_cancelled;
	struct kvmm_tier_info tiers[3];
	/*
	 * ABI 1.7: the reply grew here (size says how far a daemon's goes:
	 * an older one's ends before prefix_holes).  Blocks of segmented
	 * PREFIX_OPENs (KVMM_PREFIX_OPEN_SEGMENTS) in no tier, handed out as
	 * RECOMPUTE (holes), and blocks of them after their first hole that
	 * were shared or reloaded (neither a hole nor recomputed)
	 */
	uint64_t prefix_holes;
	uint64_t prefix_blocks_after_hole;
	/* host and NVMe blocks a PREFIX_OPEN handed out as RECOMPUTE (the
	 * restore plan or --restore-mode recompute) instead of reloading
	 * them; each is also a hit of its tier */
	uint64_t plan_recomputes_host, plan_recomputes_nvme;
	/* GPU victims a sequence held that were copied down to the host
	 * tier instead of freed (counted in tiers[1].demotions_in too) */
	uint64_t held_copies;
	/*
	 * Were reserved[0..2] (0 from an older daemon).  PREFIX_OPENs with
	 * KVMM_PREFIX_OPEN_EARLY whose reply went while some of their blocks
	 * were still being reloaded, those blocks, and of them the reloads
	 * that failed after the reply (reported by SEQ_WAIT_READY, recomputed
	 * by the client; also in checksum_failures or migrations_failed).  A
	 * block handed out still loading becomes a hit of its tier (and of
	 * prefix_blocks_hit) when its reload lands in the sequence: a failed
	 * one never does, nor one the sequence let go of before it landed.
	 */
	uint64_t early_opens;
	uint64_t early_reloads;
	uint64_t early_reload_failures;
	/*
	 * ABI 1.13 (the reply grew here again: size says how far a daemon's
	 * goes).  NVMe slots dropped because their reads failed twice in a
	 * row (I/O errors, short reads; each failure is also in
	 * migrations_failed).  From 1.13 on, such a drop and a CRC32C drop
	 * (checksum_failures) also count in tiers[2].drops when the cache
	 * loses the block with them.
	 */
	uint64_t nvme_read_error_drops;
	/*
	 * ABI 1.13 (were reserved[0..1], 0 from an older daemon): a tier
	 * setting-up that failed, as a positive errno (0: none failed, or not
	 * tried yet).  cache_open_error: the tiers and policy could not be
	 * set up, the cache is off (each publish fails with EIO, a prefix
	 * open finds nothing); from 1.14 until a later attempt works (0
	 * again then: cache_open_attempts below), before until kvmmd
	 * restarted.  nvme_open_error: the NVMe tier could not open when the
	 * block size became known, and the cache runs on the GPU and host
	 * tiers without it (tiers[2].capacity_blocks 0).
	 */
	uint64_t cache_open_error;
	uint64_t nvme_open_error;
	/* ABI 1.13 (was reserved[2]: 0 from an older daemon): cached GPU
	 * blocks moved down (or dropped) to make room in the quota of the
	 * uid they were charged to, before its extend or prefix open would
	 * have been -EDQUOT (pressure_reclaims counts those for the pool) */
	uint64_t quota_reclaims;
	/*
	 * ABI 1.14 (the reply grew here: 24 bytes, 560 in all; a daemon
	 * that sends 536 leaves them 0).  Set-ups of the tiers and policy
	 * tried since the start (the one that worked included), the errno
	 * of the last one that failed (kept once one works; 0: none
	 * failed), and while the cache is off (cache_open_error): the ms
	 * until a publish or prefix open tries again (0: the next one
	 * does), or UINT64_MAX when none will (a failure no wait mends: a
	 * backend without async copies, a setting the tiers cannot take).
	 * 0 while the cache is not off.
	 */
	uint64_t cache_open_attempts;
	uint64_t cache_open_last_error;
	uint64_t cache_open_retry_ms;
	/*
	 * ABI 1.15 (the reply grew here: 32 bytes, 592 in all; a daemon
	 * that sends 560 or less ends before them).  Host and NVMe slots
	 * the cache let go of that their tier refused to free (-EBUSY: a
	 * read in flight, -ENOENT: not READY): 0 unless the cache's
	 * bookkeeping is wrong, and an NVMe slot refused stays taken until
	 * kvmmd restarts.
	 */
	uint64_t lower_free_refused;
	/*
	 * ADMIN_CACHE_DROP's NVMe invalidations since the start: jobs
	 * queued (one per dropped NVMe block or stale copy), the headers
	 * zeroed on disk and synced, and the dropped NVMe blocks or stale
	 * copies whose header was not (the write or its sync failed, the job did not
	 * run, or none could be queued: a restart may find them again; the
	 * replies' nvme_invalidate_failures summed).  Once no drop waits,
	 * jobs = invalidated + the failures of jobs.
	 */
	uint64_t nvme_invalidate_jobs;
	uint64_t nvme_invalidated_blocks;
	uint64_t nvme_invalidate_failures;
	/*
	 * ABI 1.15 too (24 more bytes, 616 in all; a daemon that sends
	 * 592 or less ends before them).  The NVMe tier's opens, the
	 * cache_open_* of the tier alone: attempts since the start (the
	 * claim of the file at start is one when it failed; a tier that
	 * opened at start for the blocks its file held makes none), the
	 * errno of the last one that failed (kept once one works), and
	 * while the tier is out (nvme_open_error): the ms until the next
	 * attempt, made by kvmmd's own timer, not by a client (0: it runs
	 * now), or UINT64_MAX when none will (a size that holds no slot, no
	 * O_DIRECT, a file that is no kvmm tier).  0 while the tier is not
	 * out.  When an attempt works the tier joins the running cache.
	 */
	uint64_t nvme_open_attempts;
	uint64_t nvme_open_last_error;
	uint64_t nvme_open_retry_ms;
	/*
	 * ABI 1.17 (the reply grew here: 32 bytes, 648 in all; a daemon
	 * that sends 616 or less ends before them).  Host -> NVMe writes
	 * that failed: nvme_write_returns counts the blocks that went back
	 * to the host tier with their host copy (each a tiers[2].demotions_in
	 * that never arrived, and a migrations_failed).  After
	 * KVMM_NVME_WRITE_FAILS_OUT failures in a row the tier is out of
	 * service for writes (nvme_write_outs counts the times): while it is,
	 * nvme_write_error is the last failure's errno (0: the tier takes
	 * writes), host victims are dropped instead of written, and its
	 * blocks are still read; nvme_write_retry_ms is the time until a
	 * write is tried again (0 while the tier takes writes, or when the
	 * next move down is tried).  A write that works brings it back.
	 */
	uint64_t nvme_write_returns;
	uint64_t nvme_write_outs;
	uint64_t nvme_write_error;
	uint64_t nvme_write_retry_ms;
	/*
	 * ABI 1.20 (8 more bytes, 656 in all; a daemon that sends 648 or
	 * less ends before it).  Blocks SEQ_UNSHARE copied out of a shared
	 * cached block into fresh pages of one sequence (one copy each;
	 * those answered "already the sequence's own" are not counted).
	 */
	uint64_t blocks_unshared;
	/*
	 * ABI 1.21 (24 more bytes, 680 in all; a daemon that sends 656 or
	 * less ends before them, and a client whose HELLO said 1.20 or
	 * less is sent the 656 bytes of before).  block_pages: the block
	 * size (pages a block) whose cache alone the figures above are,
	 * as the request's block_pages asked, or 0 for every size's
	 * cache summed (a tier's block_bytes then the first size's, each
	 * errno the first size's that has one: abi.md).
	 * sizes[0..nr_sizes): the block sizes cached, the first size
	 * first (the one with the NVMe tier), whatever block_pages asked.
	 */
	uint32_t block_pages;
	uint32_t nr_sizes;
	uint32_t sizes[4]; /* KVMM_TIER_STATS_SIZES */
	/*
	 * ABI 1.23 (16 more bytes, 696 in all; a daemon that sends 680 or
	 * less ends before them, and a client whose HELLO said 1.22 or
	 * less is sent the 680 bytes of before).  The NVMe blocks
	 * operators' drops kept (ADMIN_CACHE_DROP), since the start: those
	 * whose header was written again above the drop's mark (found by
	 * the next start), and those whose header could not be (served in
	 * this run, lost at the next start).  Those that left NVMe before
	 * their write ran are in neither.
	 */
	uint64_t nvme_restamped;
	uint64_t nvme_restamp_failures;
	/*
	 * ABI 1.24 (32 more bytes, 728 in all; a daemon that sends 696 or
	 * less ends before them, and a client whose HELLO said 1.23 or
	 * less is sent the 696 bytes of before).  The blocks a start (or
	 * an NVMe tier joining the running cache) recovered from NVMe
	 * (recovered_blocks): cold_blocks, those still cold now (in the
	 * index, served by an open, outside the policy); and since the
	 * start, those the policy took in (an open's restore or a pin:
	 * cold_admitted), those evicted cold for NVMe room or by their
	 * tenant's NVMe limit (cold_evicted), and those that left the cache
	 * cold any other way (an operator's drop, NVMe reads that failed:
	 * cold_dropped; one an open read up is admitted, even where the
	 * policy then drops it).  At every
	 * moment recovered_blocks = cold_blocks + cold_admitted +
	 * cold_evicted + cold_dropped.
	 */
	uint64_t cold_blocks;
	uint64_t cold_admitted;
	uint64_t cold_evicted;
	uint64_t cold_dropped;
	/*
	 * ABI 1.25 (16 more bytes, 744 in all; a daemon that sends 728 or
	 * less ends before them, and a client whose HELLO said 1.24 or
	 * less is sent the 728 bytes of before).  weights[i]: sizes[i]'s
	 * weight as --cache-block-pages gave it (N:W; 1 for a size named
	 * without :W), 0 for a size kvmmd took from a region without
	 * --cache-block-pages (such sizes share by no weight: the first
	 * has all of --host-mem and the NVMe tier, a later one the GPU
	 * alone), 0 past nr_sizes.  Of two or more sizes
	 * --cache-block-pages named, each has its weight over their
	 * weights' sum of --host-mem, of the NVMe file and, without
	 * --cache-gpu-blocks, of half the GPU pool (tiers.md, "Shares by
	 * weight").
	 */
	uint32_t weights[4]; /* KVMM_TIER_STATS_SIZES */
};

/* Host -> NVMe writes failed in a row that take the tier out of service
 * for writes (TIER_STATS nvme_write_error). */
#define KVMM_NVME_WRITE_FAILS_OUT 4

/* The most block sizes kvmmd caches at once (TIER_STATS' sizes[]). */
#define KVMM_TIER_STATS_SIZES 4

/*
 * TIER_STATS' optional request (ABI 1.21; none before, and none still
 * asks for every size summed).  block_pages: 0, every size's cache
 * summed; N, the cache of blocks of N pages alone (-ENOENT when no
 * cache has that size).  A daemon before 1.21 answers any body -EINVAL.
 */
struct kvmm_tier_stats_req {
	uint32_t size;
	uint32_t flags; /* 0 */
	uint32_t block_pages;
	uint32_t pad;
	uint64_t reserved[2];
};

#endif
