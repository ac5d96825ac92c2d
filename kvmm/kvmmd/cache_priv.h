/* SPDX-License-Identifier: MIT */
/*
 * Block cache internals, shared by the files that implement cache.h:
 *
 *   cache.c          the entry index (hash -> entry) and an entry's
 *                    life, the cache of each block size, pins' lookups
 *   cache_publish.c  BLOCK_PUBLISH: new entries, duplicates, promotions
 *                    of blocks idle below
 *   cache_stats.c    TIER_STATS: the counters of one size or of all
 *   cache_start.c    making the caches at start: the NVMe file claimed,
 *                    the host slab, the NVMe tier opened early
 *   cache_setup.c    the tiers and the policy of each block size
 *                    (kc_open()), the sizes' shares by their weights
 *   cache_recover.c  the NVMe tier's blocks from the last run into the
 *                    index, cold, oldest written first
 *   cache_stop.c     the stop: blocks saved to NVMe, everything closed
 *   cache_demote.c   the policy's move handler: demotion jobs (GPU ->
 *                    host -> NVMe) and their waits for host or NVMe
 *                    slots, every migration job's completion
 *   cache_reclaim.c  pool-pressure reclaim: GPU victims moved down until
 *                    an extend's or an open's pages are free
 *   cache_restore.c  restore jobs (host or NVMe -> fresh pages): submit,
 *                    NVMe staging, completion, settling into the GPU tier
 *   cache_prefix.c   PREFIX_OPEN: the prefix walk that makes a pending
 *                    open's record, the session's opens at its end
 *   cache_pending.c  the opens waiting for restores (pending) and their
 *                    replies (kc_settle())
 *   cache_park.c     commands parked until demotion copies give pool
 *                    pages back: run again from the loop
 *   cache_ready.c    early opens after their reply: SEQ_WAIT_READY, the
 *                    sequence cut or closed while its reloads run, the
 *                    publish of a block still loading
 *   cache_learned.c  --policy-state: what the policy learned, loaded when
 *                    it is made, saved periodically and at the stop
 *   cache_learned_sizes.c  --policy-state with several block sizes: one
 *                    file, a section for each size
 *   cache_lend.c     an extend short of blocks asks the other processes
 *                    of its uid for their blocks mapped ahead, and parks
 *   cache_quota.c    a uid over its quota reclaims its own idle GPU
 *                    blocks before it is told -EDQUOT
 *   cache_drop.c     ADMIN_CACHE_DROP: an operator drops cached blocks
 *                    (NVMe ones invalidated on disk before the reply):
 *                    the request, its reply, its jobs reaped
 *   cache_drop_walk.c  the drop in one size's cache: each block dropped
 *                    or kept, the NVMe jobs the reply waits for queued
 *   cache_drop_pending.c  a drop of the NVMe tier answered while it is
 *                    out: remembered (and kept in --policy-state's
 *                    FILE.nvme-drops), applied by the tier's next open
 *   cache_query.c    PREFIX_QUERY: where a chain's leading blocks are,
 *                    looked up without changing anything
 *   cache_open.c     a set-up of the tiers that failed after the start:
 *                    undone, and tried again after a wait
 *   cache_nvme_join.c  an NVMe tier that could not open: out of the
 *                    cache while it waits, joining when a later attempt
 *                    opens it
 *   cache_nvme_write.c  host -> NVMe writes that fail: the block back to
 *                    the host tier, a tier whose writes keep failing out
 *                    of service for writes
 *   cache_nvme_marked.c  the slot headers a restart's scan left out
 *                    under a drop mark, zeroed once the tier is the cache's
 *   cache_nvme_order.c  which named block size takes which NVMe
 *                    partition, at start
 *   cache_nvme_start.c  an NVMe tier that stops the start: its exit code,
 *                    what becomes of the file
 *
 * The restore plans of PREFIX_OPEN are cache_plan.c's (cache_plan.h).
 *
 * Everything here runs on the event-loop thread; the migration workers
 * only touch job memory and tier slots, and hand jobs back through the
 * engine's eventfd.
 */
#ifndef KVMM_KVMMD_CACHE_PRIV_H
#define KVMM_KVMMD_CACHE_PRIV_H

#include "kvmm/kvmmd/cache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmm/kvmmd/fifo.h"
#include "kvmm/kvmmd/htab.h"
#include "kvmm/kvmmd/learned_sizes.h"
#include "kvmm/kvmmd/migrate.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "kvmm/policy/policy.h"

struct tier_nvme_stats;

/* the hash index starts with this many buckets (it doubles as it fills:
 * an NVMe tier can hold hundreds of thousands) */
#define KC_BUCKETS_MIN 4096u
/* host slots kept for staging NVMe restores (one tier_nvme batch) */
#define KC_STAGING_SLOTS 8u
/* most slots per tier the KVMMD_TEST_*_SLOTS_HELD knobs take */
#define KC_HELD_MAX 64u

struct kc_entry {
	uint64_t hash;
	uint64_t parent;
	uint32_t position;
	uint32_t uses; /* publish + duplicates + prefix hits (NVMe admission) */
	uint64_t gen; /* tells pins (pin.c) this entry from a later one */
	uint8_t tier; /* enum pol_tier: where the bytes are (or go) */
	/* the tenant whose open started its restore (kd_tenant_charge()):
	 * charged for its admission if no open takes it */
	uint32_t restore_tenant;
	/* the tenant id the policy charges the block to, set from the
	 * policy's block at each move it reports (kc_move(): its admission
	 * first), when the policy's lookup cannot find it.  A cold NVMe
	 * block has the tenant its header names (cold_counted), or
	 * TIER_NVME_NOBODY for a header from before the tenants until an
	 * open's restore names the tenant.  Its NVMe header names it, and a
	 * slot it frees stays on the tier's record of stale copies as that
	 * tenant's (cache_drop.c) */
	uint32_t tenant;
	bool in_pol; /* tracked by the policy (cold NVMe blocks are not) */
	/* recovered from NVMe and not yet admitted nor gone: counted in
	 * st.cold_blocks until kc_cold_end() says how it stopped being
	 * cold (TIER_STATS' cold_admitted, _evicted or _dropped) */
	bool is_cold;
	/* cold, counted in its tenant's kd_tenant_counts.cold_of[] until
	 * it leaves the cache or the policy takes it (kc_cold_end()) */
	bool cold_counted;
	bool dead; /* to be removed from the policy after its call */
	bool then_nvme; /* moved on to NVMe while its host copy ran */
	bool drop_after; /* dropped while a job ran */
	/* a drop_after entry taken out of the index (kc_unhash_dropped()):
	 * only its job finds it until kc_job_done() frees it */
	bool unhashed;
	/* its GPU demotion copies pages a sequence holds (kc_move()): they
	 * stay with it, uncached, when the copy is done */
	bool held_copy;
	bool restore_pinned; /* pinned in the policy for its restore */
	bool restore_cancelled; /* nobody waits: called off before it ran */
	/* rblk is attached to an early open's sequence already (at most one:
	 * a failed reload leaves its pages to that client to recompute) */
	bool rblk_lent;
	/* pinned by a quota reclaim (cache_quota.c) for its policy call:
	 * quota_pinned by its walk of kd_cache.gpu, quota_lower_pinned by
	 * kc_quota_pin_lower() (on kd_cache.quota_pinned).  Two flags, as an
	 * entry can be on both lists (its copy down still running, or a held
	 * copy: blk set, tier host), and each walk unpins only what it pinned */
	bool quota_pinned;
	bool quota_lower_pinned;
	/* a GPU block a quota reclaim's count leaves out: under the prefix
	 * rule a child of it on the GPU cannot go (kc_quota_mark_stuck()) */
	bool quota_stuck;
	/* failed copies down in a row of a block a pin keeps, each tried
	 * again (kc_job_done(), up to KC_KEPT_RETRIES) */
	uint8_t kept_retries;
	/* its host -> NVMe write is the one that tries a tier out of
	 * service for writes again (cache_nvme_write.c) */
	bool nvme_probe;
	/* GPU: the cache's reference (kc_set_block(), kc_put_block()) */
	struct kd_block *blk;
	/* in kd_cache.gpu while blk is set */
	struct kd_fifo_node gpu;
	uint32_t host_slot, nvme_slot;
	struct migrate_job *job; /* migration in flight */
	/* restore in flight (job is HOST_TO_GPU or NVME_TO_GPU): the fresh
	 * pages it fills, the cache's reference until it is settled */
	struct kd_block *rblk;
	struct kd_hnode node; /* in kd_cache.index, key = hash */
	struct kc_entry *dead_next;
	struct kc_entry *restored_next; /* restore done, not yet settled */
	/* 1 + the restores handed to the engine before this one's: restores
	 * settle in that order (0: never ran, settles at once) */
	uint64_t restore_no;
	struct kd_fifo_node staging; /* NVMe restore waiting for a slot */
	/* in kd_cache.slotq: a demotion waiting for a host slot (job not
	 * submitted: the bytes are only in the GPU pages, e->blk) */
	struct kd_fifo_node slotq;
	/* in kd_cache.nvmeq: a host -> NVMe write waiting for an NVMe slot
	 * (job not submitted: the bytes are only in its host slot, which it
	 * keeps) */
	struct kd_fifo_node nvmeq;
	/* in kd_cache.nvme_off: an entry only its running host -> NVMe
	 * write knows, which a publish called off (kc_call_off_copy()) */
	struct kd_fifo_node nvme_off;
	/* in kd_cache.cold: recovered from NVMe at start, outside the
	 * policy (unlinked lazily once it is not cold any more) */
	struct kd_fifo_node cold;
	/* in kd_cache.below[tier] while tier is host or NVMe (kc_set_tier()),
	 * so a quota reclaim pins those tiers' blocks without walking the
	 * whole index */
	struct kd_fifo_node below;
	/* next pinned by kc_quota_pin_lower() (kd_cache.quota_pinned) */
	struct kc_entry *quota_next;
};

/*
 * A PREFIX_OPEN whose reply waits for restores.  Blocks [0, lim) of its
 * sequence are each READY (attached to the sequence: shared GPU pages,
 * fresh pages to recompute, or restored pages), WAIT (a restore in flight,
 * its own or another open's), BUSY (a demotion in flight, to be restored
 * when it ends) or FAILED.  The reply goes when no block before the first
 * FAILED one waits.
 */
enum kc_slot {
	KC_SLOT_WAIT = 0,
	KC_SLOT_READY,
	KC_SLOT_FAILED,
	KC_SLOT_BUSY, /* a demotion in flight: restored once it ended */
	KC_SLOT_BUSY_FAILED, /* ... it ended in a drop (a busy miss) */
};

/* Why the walk of the prefix stopped at lim < n. */
enum kc_stop {
	KC_STOP_NONE = 0,
	KC_STOP_MISS, /* no such block, or it could not be restored */
};

struct kc_pending {
	struct kc_pending *next; /* in kd_cache.pending */
	struct kd_session *s;
	uint32_t tenant; /* kd_tenant_id(s), kept past the session's end */
	struct kvmm_msg_hdr h; /* the request: the reply echoes its id */
	uint32_t region_id, seq;
	uint32_t n; /* hashes asked (after the clamps) */
	uint32_t lim; /* blocks [0, lim) are READY, WAIT or FAILED */
	uint32_t nwait; /* blocks WAIT */
	uint8_t stop; /* enum kc_stop */
	bool want_acts;
	bool segments; /* KVMM_PREFIX_OPEN_SEGMENTS: holes recomputed */
	bool deferred; /* the session is deferred: reply from the loop */
	/*
	 * KVMM_PREFIX_OPEN_EARLY: a WAIT block whose restore's pages (rblk)
	 * the sequence holds already is attached (att[i]); the reply goes
	 * when every block before the first FAILED one is READY or attached.
	 * After it (replied) the record stays in kd_cache.pending while
	 * blocks [0, lim) still load, or as long as one of them FAILED to
	 * (SEQ_WAIT_READY reports it), until the sequence is cut below them
	 * or closed (kd_cache_seq_cut()) or the session ends.
	 */
	bool early;
	/* KVMM_PREFIX_OPEN_COLLECT (ABI 1.16): the session is not deferred;
	 * the reply goes to its PREFIX_COLLECT once ready (told: the notify
	 * word said so) */
	bool collect, told;
	bool replied;
	bool waiting; /* a SEQ_WAIT_READY (wh, wupto) waits: session deferred */
	uint32_t gen; /* the sequence's kd_seq.gen */
	uint32_t wupto;
	struct kvmm_msg_hdr wh;
	uint8_t *att;
	uint64_t open_id; /* telemetry: the prefix_opens count at arrival */
	uint64_t *hashes;
	uint8_t *state; /* enum kc_slot per block */
	uint8_t *from; /* tier each READY block came from */
	uint8_t *acts; /* enum kvmm_block_action per block (n + 4) */
};

/*
 * A SEQ_EXTEND or PREFIX_OPEN parked (cache_park.c): the pool was short,
 * the reclaim demoted victims whose pages come back when their copies are
 * done (or commands parked before it wait for free pages).  The session
 * is deferred; the request is run again from the loop when migrations
 * complete, when pages come back to the pool otherwise, or when its time
 * is up, and answered then.  Free pages are earmarked for the parked
 * commands in line order: `need` pages for each (kc_reserved()).
 */
struct kc_park {
	struct kd_fifo_node link; /* in kd_cache.parked */
	struct kd_session *s; /* NULL: its session ended while it ran */
	uint64_t deadline_ns; /* then it runs without waiting any more */
	uint64_t parked_ns; /* when it parked (cache_lend.c) */
	uint64_t round; /* the kc_park_run() pass that ran it last */
	uint64_t need; /* pool pages it waits for (its last run's count) */
	/*
	 * A KVMM_SEQ_EXTEND_COLLECT extend or KVMM_PREFIX_OPEN_COLLECT open
	 * (ABI 1.17): its session is not deferred, and its outcome (status,
	 * and an extend's reply body rep of rep_len bytes when 0) waits in
	 * kd_cache.collected, for the SEQ_COLLECT (PREFIX_COLLECT) of
	 * (region_id, seq), once it no longer parks (an open that went on
	 * is forgotten: its pending record answers).
	 */
	bool collect;
	/* it asked other processes of its uid for their blocks ahead
	 * (cache_lend.c): counted as a lend extend or timeout when it ends */
	bool lend_asked;
	uint16_t cmd; /* the request's (SEQ_EXTEND or PREFIX_OPEN) */
	int status;
	uint32_t region_id, seq;
	void *rep;
	size_t rep_len;
	size_t len;
	uint64_t msg[]; /* the request as received: header, then body */
};

static inline struct kc_entry *kc_of(struct kd_hnode *n)
{
	return (struct kc_entry *)((char *)n - offsetof(struct kc_entry, node));
}

static inline struct kc_park *kc_park_of(struct kd_fifo_node *n)
{
	return kd_fifo_entry(n, struct kc_park, link);
}

struct kd_cache {
	struct kd_daemon *d;
	struct kd_htab index; /* kc_entry.node, key = the block hash */
	uint64_t next_gen;
	struct kc_entry *dead; /* removed from the policy after its call */
	bool opened; /* tiers and policy set up */
	bool closing; /* kd_cache_fini(): nothing new is submitted */
	/* kc_open() from kd_cache_init(): a tier that cannot open stops the
	 * start, rather than leaving the cache to run without it */
	bool opening_at_start;
	/* -errno of the last kc_open() while it failed (0 once one works:
	 * the cache is off while it is set), and of the NVMe tier's open
	 * the cache went on without: TIER_STATS shows them */
	int open_error;
	int nvme_error;
	/* the NVMe tier's opens (cache_nvme_join.c): how many ran (claims
	 * after a failed one at start included), the last failure (kept
	 * once one works), whether it was one no wait mends (no more
	 * attempts), when the next is due (CLOCK_MONOTONIC ns) and the loop
	 * timer that makes it */
	uint64_t nvme_attempts;
	int nvme_last_error;
	bool nvme_for_good;
	uint64_t nvme_retry_ns;
	struct kd_timer nvme_timer;
	/* host -> NVMe writes (cache_nvme_write.c): failed in a row; while
	 * the tier is out of service for them, the last one's -errno (0:
	 * it takes writes), when the next may go (CLOCK_MONOTONIC ns), and
	 * the tries since it went out (the waits double) */
	uint32_t nvme_write_fails;
	int nvme_write_error;
	uint64_t nvme_write_retry_ns;
	uint64_t nvme_write_tries;
	uint64_t nvme_write_out_ns; /* when it went out */
	/* set-up attempts (cache_open.c): how many ran, the last failure
	 * (kept once one works), whether it was one no wait mends (no more
	 * attempts), when the next may run (CLOCK_MONOTONIC ns) */
	uint64_t open_attempts;
	int open_last_error;
	bool open_for_good;
	uint64_t open_retry_ns;
	/* the first wait before another attempt (KVMMD_TEST_CACHE_RETRY_MS
	 * shortens it); KVMMD_TEST_CACHE_OPEN_FAIL: attempts still to fail
	 * on purpose, and with what */
	uint64_t open_retry_base_ms;
	uint32_t open_fail_left;
	int open_fail_err;
	/* KVMMD_TEST_NVME_OPEN_FAIL: the NVMe tier's opens after the start
	 * still to fail on purpose (the first size's cache alone) */
	uint32_t nvme_open_fail_left;
	/* --nvme-path as kc_nvme_claim() opened and locked it at start, -1
	 * without one: the tier's fd whenever it opens (cache_setup.c,
	 * cache_start.c) */
	int nvme_fd;
	bool nvme_made; /* the claim made the file (it did not exist) */
	uint32_t ppb; /* pages per block of the tiers */
	size_t block_bytes;
	/* its place in kd_daemon.caches (0: the first, which keeps what
	 * the sizes share: the park line, the NVMe tier, --policy-state);
	 * the size --cache-block-pages named for it (0: the first region
	 * that uses it names it); its share of --host-mem (all of it for
	 * the first size when none is named, none for later ones) */
	uint32_t idx;
	uint32_t named_ppb;
	uint64_t host_budget;
	struct pol_cache *pol;
	struct kd_timer learned_timer; /* cache_learned.c: periodic save */
	/* cache_learned.c, for ADMIN_STATUS: the policy learns nothing;
	 * lives of the state loaded; saves; when the last good one ended */
	bool learned_unused;
	int learned_lock_fd; /* flock on --policy-state's FILE.lock, or -1 */
	int learned_lock_err; /* why it could not be taken: no save then */
	uint64_t learned_lives;
	/* written by the periodic save's worker too: atomics */
	uint64_t learned_saves, learned_save_errors;
	uint64_t learned_saved_ns;
	/* the periodic save's worker, started and not yet joined */
	pthread_t learned_thread;
	bool learned_thread_started;
	/* a save due while the worker still writes was logged (once a
	 * write) */
	bool learned_skip_said;
	uint32_t learned_write_delay_us; /* KVMMD_TEST_POLICY_WRITE_DELAY_MS */
	/*
	 * The first size's (the file is one for every size): the file as
	 * read at the first load (learned_file, or its error), and when it
	 * holds several sizes' states their sections, pointing into it
	 * (cache_learned_sizes.c): each size's load takes its own, and a
	 * save keeps those of sizes not open yet.  learned_finished: the
	 * stop's save ran (before the other sizes' policies went).
	 */
	bool learned_read, learned_finished;
	int learned_file_err;
	void *learned_file;
	size_t learned_file_len;
	struct kc_learned_sec learned_secs[KD_CACHE_SIZES];
	uint32_t nr_learned_secs;
	/* the host tier's memory, made at start (kc_make_slab()) until the
	 * tier takes it when it opens */
	struct tier_host_slab *slab;
	struct tier_host *host;
	struct tier_nvme *nvme;
	struct migrate *mig;
	struct kd_file mig_file;
	struct kc_entry *restored; /* restores done, to settle */
	uint64_t nr_restored; /* on that list (in flight for TIER_STATS) */
	uint64_t restores_submitted; /* restore_no of the latest */
	uint64_t restores_settled; /* all up to this restore_no are */
	/* NVMe restores waiting for a free host slot to stage in
	 * (kc_entry.staging) */
	struct kd_fifo staging;
	struct kd_timer settle_timer; /* settles those from the loop */
	struct kc_pending *pending; /* PREFIX_OPENs waiting for restores */
	/* demotions waiting for a host slot (kc_entry.slotq; slot_waits
	 * counts them) */
	struct kd_fifo slotq;
	uint64_t demotions_queued;
	/* host -> NVMe writes waiting for an NVMe slot (kc_entry.nvmeq),
	 * and the NVMe jobs (writes, restore reads) in the engine, whose end
	 * may give one back (kc_nvme_pump()) */
	struct kd_fifo nvmeq;
	uint64_t nvme_in_flight;
	/* the host -> NVMe writes a publish called off that still run
	 * (kc_entry.nvme_off; an all-zero fifo is an empty one): a write of
	 * the same hash waits until theirs has ended and its slot is freed
	 * (kc_nvme_write_off()) */
	struct kd_fifo nvme_off;
	/* the blocks recovered from NVMe at start, in the order they were
	 * written (kc_nvme_room() gives the oldest's slot first) */
	struct kd_fifo cold;
	/* the entries with a GPU copy (kc_entry.gpu, blk set), so a quota
	 * reclaim walks those rather than the whole index */
	struct kd_fifo gpu;
	/* the entries whose tier is host or NVMe, one list each
	 * (kc_entry.below; [POL_TIER_GPU] unused), and the lower-tier ones a
	 * quota reclaim pinned for its policy call (cache_quota.c) */
	struct kd_fifo below[POL_TIER_COUNT];
	struct kc_entry *quota_pinned;
	/* ADMIN_CACHE_DROPs waiting for their NVMe invalidations
	 * (cache_drop.c) */
	struct kc_drop *drops;
	/* the slot headers a restart left under a drop mark, being zeroed
	 * (cache_nvme_marked.c): jobs in the engine, and how many were
	 * zeroed or not since the start (its log line) */
	uint64_t marked_left;
	uint64_t marked_zeroed;
	uint64_t marked_failed;
	/* the NVMe blocks operators' drops kept that left NVMe before their
	 * restamp ran (cache_drop_kept.c), since the start; those whose
	 * header was written again above the drop's mark and those whose
	 * header could not be are st.nvme_restamped and
	 * st.nvme_restamp_failures (TIER_STATS, ABI 1.23) */
	uint64_t nvme_restamp_gone;
	/* the highest drop mark queued on its NVMe tier in this run: a host
	 * -> NVMe write numbered below it lands under it
	 * (kc_nvme_restamp_landed()) */
	uint64_t nvme_mark_high;
	/* drops of its NVMe tier answered while the tier was out, handed
	 * to the tier's next open (cache_drop_pending.c); all false and n
	 * 0: none */
	struct tier_nvme_drop_pending nvme_pending;
	/* commands waiting for pool pages (kc_park.link), the one run again
	 * now (kd_cache_reclaim() and kd_cache_park() look at it) */
	struct kd_fifo parked;
	/* KVMM_SEQ_EXTEND_COLLECT extends done, not collected yet (their
	 * kc_park.link; an all-zero fifo is an empty one) */
	struct kd_fifo collected;
	struct kc_park *rerun;
	bool rerun_final; /* its time is up: no more waiting */
	bool rerun_parked; /* it parked again */
	/* pages came back and the first parked command's need is free: run
	 * the parked commands from the loop at once (kd_cache_pages_back()) */
	bool park_kicked;
	/* a process asked for its blocks ahead answered (ABI 1.20): the
	 * parked commands that asked run again from the loop at once, to
	 * fail when nobody they wait for is left (cache_lend.c) */
	bool park_answered;
	uint64_t park_need; /* pages of the last -EINPROGRESS (the park) */
	/* that -EINPROGRESS asked for blocks ahead (cache_lend.c): the new
	 * record is lend_asked, and waits park_ms (0: KD_PARK_MAX_MS) at
	 * most; kc_park_add() takes both back to 0 */
	bool park_lend;
	uint32_t park_ms;
	/* blocks of pending opens whose restore waits for the commands
	 * parked before it to leave the line (kc_busy_retry()) */
	uint64_t busy_in_line;
	struct kd_timer park_timer; /* the earliest deadline, or now */
	uint64_t park_round;
	uint64_t cmds_parked, cmds_parked_now;
	/* KVMMD_TEST_HOST_SLOTS_HELD, KVMMD_TEST_NVME_SLOTS_HELD: slots taken
	 * when the tiers open and kept until the stop (kc_hold_slots()) */
	uint32_t held_host[KC_HELD_MAX];
	uint32_t nheld_host, nheld_nvme;
	/* the TIER_STATS counters (lower_free_refused: kc_free_refused();
	 * nvme_invalidate_*: cache_drop.c) */
	struct kvmm_tier_stats_reply st;
};

/* The cache that keeps the line of commands parked for pool pages (the
 * pool is one for every block size): the first. */
static inline struct kd_cache *kc_line(const struct kd_cache *c)
{
	return c->d->cache;
}

/* The block size (pages a block) c caches: its tiers', or the one
 * --cache-block-pages named before they open; 0 before either. */
static inline uint32_t kc_size(const struct kd_cache *c)
{
	return c->opened ? c->ppb : c->named_ppb;
}

/* Every cache of d, one a block size (i: an unsigned index). */
#define kc_for_each(d, c, i) \
	for ((i) = 0; (i) < (d)->nr_caches && ((c) = (d)->caches[(i)]); (i)++)

/* cache.c: the cache of blocks of ppb pages (*out; 0 or kc_open()'s
 * answer, -EXDEV when no cache may take that size, *out then the first:
 * kc_say_uncached()); the opened cache of r's size, or NULL */
int kc_for(struct kd_daemon *d, uint32_t ppb, struct kd_cache **out);
struct kd_cache *kc_of_region(struct kd_daemon *d, const struct kd_region *r);
/* cache_start.c: one cache's structures (NULL: no memory) */
struct kd_cache *kc_new(struct kd_daemon *d);

/* cache.c: the entry index and an entry's life */
/* Block of pr found in tier: the cache's count and its tenant's. */
static inline void kc_count_hit(struct kd_cache *c, const struct kc_pending *pr,
				unsigned tier)
{
	c->st.tiers[tier].hits++;
	kd_tenant(c->d, pr->tenant)->hit_blocks[tier]++;
}

struct kc_entry *kc_find(struct kd_cache *c, uint64_t hash);
/* A new entry of hash, on no tier's list yet (NULL: no memory). */
struct kc_entry *kc_add(struct kd_cache *c, uint64_t hash);
void kc_free(struct kd_cache *c, struct kc_entry *e);
/* e->tier = tier, on the list of that tier below the GPU (kd_cache.below) */
void kc_set_tier(struct kd_cache *c, struct kc_entry *e, unsigned tier);
void kc_set_block(struct kd_cache *c, struct kc_entry *e, struct kd_block *blk);
/* e no longer holds its GPU copy, returned (NULL: it had none); the
 * caller puts the reference or hands it on (cache_publish.c) */
struct kd_block *kc_unset_block(struct kd_cache *c, struct kc_entry *e);
void kc_put_block(struct kd_cache *c, struct kc_entry *e);
void kc_leave_block(struct kd_cache *c, struct kc_entry *e);
void kc_free_refused(struct kd_cache *c, const char *tier, uint32_t slot,
		     uint64_t hash, int err);
void kc_release_lower(struct kd_cache *c, struct kc_entry *e);
void kc_release(struct kd_cache *c, struct kc_entry *e);
void kc_kill(struct kd_cache *c, struct kc_entry *e);
void kc_reap_dead(struct kd_cache *c);
/* The policy moves up to want blocks of tier down (or out), as an
 * over-full tier would: its capacity lowered by want and brought back, so
 * it picks the victims (never a held or pinned block).  How many went.
 * kc_gpu_shed(): of the GPU tier.  Not from inside a policy call. */
uint64_t kc_tier_shed(struct kd_cache *c, unsigned tier, uint64_t want);
uint64_t kc_gpu_shed(struct kd_cache *c, uint64_t want);
/* kc_open() said -EXDEV for r: a WARN line, once per region. */
void kc_say_uncached(struct kd_cache *c, struct kd_region *r);
/* cache.c: a variable-length command's struct and its u64 tail
 * (BLOCK_PUBLISH, PREFIX_OPEN, PREFIX_QUERY) */
int kc_copy_var(void *out, size_t known, const void *p, size_t len,
		uint32_t n_off, uint64_t **tail, uint32_t *n);

/* cache_nvme_order.c: with named sizes and a file claimed at start, the
 * list put in the order of the NVMe partitions whose blocks it names
 * (cfg->cache_block_sizes[], before the later sizes' caches are made),
 * so that a restart listing them in another order recovers each. */
void kc_nvme_order_sizes(struct kd_cache *c);

/* cache_open.c: a set-up that failed after the start, undone and tried
 * again.  kc_open_test_init() reads the test knobs at start (-EINVAL
 * for a bad value); kc_open_begin() is -EIO while the cache is off and
 * no attempt is due, else counts one; kc_open_undo() takes down what a
 * failed attempt built, kc_open_failed() says so and sets the next
 * attempt, kc_open_done() ends the off state. */
int kc_open_test_init(struct kd_cache *c);
int kc_open_begin(struct kd_cache *c);
int kc_open_test_fault(struct kd_cache *c);
void kc_open_undo(struct kd_cache *c);
void kc_open_failed(struct kd_cache *c, int err);
/* The wait before the next attempt after `attempts` failed ones: 1 s
 * (KVMMD_TEST_CACHE_RETRY_MS) doubling to 60 times that; the cache's
 * set-up and the NVMe tier's open back off alike. */
uint64_t kc_retry_wait_ms(const struct kd_cache *c, uint64_t attempts);
void kc_open_done(struct kd_cache *c);
void kc_open_stats(const struct kd_cache *c, struct kvmm_tier_stats_reply *st);

/*
 * The NVMe tier out and joining later (cache_nvme_join.c).
 * kc_nvme_claim() opens and locks --nvme-path (c->nvme_fd);
 * kc_nvme_claim_at_start() lets the start go on without it when the
 * file or its file system is not there yet (0, the retries armed), else
 * returns the claim's error.  kc_nvme_open_tier() opens the tier for
 * the cache's block size on the claimed fd.  kc_nvme_failed() records a
 * failed attempt and arms the next (or says no wait mends it);
 * kc_nvme_retry() is the timer's attempt, which joins an opened tier to
 * the running cache.  kc_nvme_stats() fills TIER_STATS' nvme_open_*.
 *
 * Which sizes have an NVMe tier (kc_has_nvme()): the first, with the
 * whole file; with several sizes named (--cache-block-pages N,M...)
 * each, in its own partition of the file (tier_nvme_config.part_*), on
 * the first size's claim (its nvme_fd, kc_nvme_fd(): one lock).  The
 * first size's partition opens first: the others take its layout id;
 * a later size's attempts wait for the first's claim
 * (kc_nvme_retry()).
 */
bool kc_has_nvme(const struct kd_cache *c);
int kc_nvme_fd(const struct kd_cache *c);
int kc_nvme_claim(struct kd_cache *c);
int kc_nvme_claim_at_start(struct kd_cache *c);
int kc_nvme_open_tier(struct kd_cache *c);
void kc_nvme_failed(struct kd_cache *c, int err);
void kc_nvme_retry(struct kd_cache *c);
void kc_nvme_stats(const struct kd_cache *c, struct kvmm_tier_stats_reply *st);
/* Whether c's NVMe tier is out (waiting for an attempt, or failed for
 * good): a drop then leaves what its file holds (cache_drop.c). */
bool kc_nvme_out(const struct kd_cache *c);
/* The tier's partition for c (tier_nvme_config.part_*, layout_id). */
struct tier_nvme_config;
void kc_nvme_partition(const struct kd_cache *c, struct tier_nvme_config *nc);
/* A failure of the NVMe tier at start that only the operator mends (the
 * start exits 2 for it); with several sizes named, each size's partition
 * checked for a slot before the first opens (cache_nvme_start.c). */
bool kc_nvme_start_refusal(int err);
/* A failure of the tier's open at start that the start waits out (a full
 * disk), as the claim does: the tier joins later (cache_nvme_start.c). */
bool kc_nvme_start_waits(int err);
int kc_nvme_check_at_start(struct kd_daemon *d);
/*
 * Host -> NVMe writes that fail (cache_nvme_write.c).  kc_nvme_write_refused()
 * says, for the policy's move of e down to NVMe, whether the tier is out
 * of service for writes (the move is then a drop from host), and lets one
 * write through as a try once the wait is over.  kc_nvme_write_end()
 * counts a write's end (failures in a row, out of service, back in);
 * kc_nvme_write_keeps() says whether a block whose write failed may go
 * back into the host tier with its host copy (the policy still has it on
 * NVMe), kc_nvme_write_return() puts it there.  kc_nvme_write_stats()
 * fills TIER_STATS' nvme_write_error and _retry_ms.
 */
bool kc_nvme_write_refused(struct kd_cache *c, struct kc_entry *e);
void kc_nvme_write_end(struct kd_cache *c, struct kc_entry *e,
		       const struct migrate_job *job);
bool kc_nvme_write_keeps(struct kd_cache *c, const struct kc_entry *e);
void kc_nvme_write_return(struct kd_cache *c, struct kc_entry *e);
void kc_nvme_write_stats(const struct kd_cache *c,
			 struct kvmm_tier_stats_reply *st);
/* cache_recover.c, for a set-up and a tier that joins: its blocks into
 * the index (cold), in the order they were written, each its header's
 * tenant's; then (kc_cold_limits()) every tenant's NVMe limit applied to
 * them */
int kc_recover(struct kd_cache *c, const struct tier_nvme_stats *ns);
int kc_order_cold(struct kd_cache *c);
void kc_cold_limits(struct kd_cache *c);
/* How a cold block stopped being cold (TIER_STATS' cold_* counters). */
enum kc_cold_fate {
	KC_COLD_ADMITTED, /* the policy's now: an open's restore, a pin */
	KC_COLD_EVICTED, /* for NVMe room, or by its tenant's NVMe limit */
	KC_COLD_DROPPED, /* left the cache any other way */
};
/* A cold block is no longer cold: the policy's now, or gone from the
 * cache (evicted or dropped: counted in its tenant's dropped) */
void kc_cold_end(struct kd_cache *c, struct kc_entry *e,
		 enum kc_cold_fate fate);
/* A cold block session s pins, into the policy on NVMe, charged to its
 * header's tenant or else to s's: 0, -ENOENT (on its way out) or the
 * policy's -errno */
int kc_cold_admit(struct kd_cache *c, struct kc_entry *e,
		  const struct kd_session *s);
/* Evict a cold block for room (false: a restore reads it, it is on its
 * way out already, or the policy took it) */
bool kc_cold_evict(struct kd_cache *c, struct kc_entry *e);
/* Tenant id's cold blocks over its NVMe limit, counted with the policy's
 * blocks of it there and `coming` more on their way: the oldest go */
void kc_cold_limit(struct kd_cache *c, uint32_t id, uint64_t coming);
/* cache_setup.c */
/* Set up the tiers and the policy for blocks of ppb pages, if not yet
 * (0; -EXDEV when set up for another size; -EIO while the cache is off
 * after a failed set-up, at start its reason). */
int kc_open(struct kd_cache *c, uint32_t ppb);
/* the test knobs' held slots: taken when the tiers open (or the NVMe tier
 * joins), given back at the stop */
void kc_hold_slots(struct kd_cache *c);
void kc_unhold_slots(struct kd_cache *c);
/* the loop's callback for the migration engine's eventfd: completed jobs
 * into the cache (the stop calls it too, the loop no longer running) */
void kc_on_migrate(struct kd_loop *loop, int fd, uint32_t events, void *data);
/* KVMMD_TEST_MIGRATE_FAIL: checked at start (ppb 0: -EINVAL for a bad
 * value or a size --cache-block-pages does not name, said), the entries
 * of the cache of blocks of ppb pages into mc when its tiers open */
int kc_test_faults(const struct kd_config *cfg, uint32_t ppb,
		   struct migrate_config *mc, bool say);
/* cache_start.c: the claimed NVMe file opened before the block size is
 * known, for the size its blocks have (0 also when it cannot: the set-up
 * does) */
int kc_open_nvme_early(struct kd_cache *c);

/* cache_demote.c */
/* e is gone, outside the policy's decisions (a copy down that failed, an
 * operator's drop): a drop of its tier, then kc_kill() */
void kc_lose(struct kd_cache *c, struct kc_entry *e);
void kc_move(void *arg, const struct pol_block *b, unsigned from, unsigned to);
void kc_job_done(struct kd_cache *c, struct migrate_job *job);
int kc_queued_slot(struct kd_cache *c, struct migrate_job *job, bool fail_all);
void kc_demote_pump(struct kd_cache *c, bool fail_all);
bool kc_demote_unqueue(struct kd_cache *c, struct kc_entry *e);
/* A write of hash a publish called off still runs (kd_cache.nvme_off). */
bool kc_nvme_write_off(struct kd_cache *c, uint64_t hash);
void kc_nvme_pump(struct kd_cache *c, bool fail_all);
void kc_nvme_kick(struct kd_cache *c);

/* cache_reclaim.c */
uint64_t kc_pool_free(struct kd_daemon *d);
/*
 * kd_cache_reclaim() in two steps, so a PREFIX_OPEN pins its prefix only
 * when victims are really taken: kc_reclaim_check() answers 0 (the pages
 * are free beyond those earmarked for parked commands ahead), -EINPROGRESS
 * (park: copies in flight or commands ahead still wait), -ENOSPC, or 1:
 * victims are to be taken, by kc_reclaim_take() (same answers).
 */
int kc_reclaim_check(struct kd_daemon *d, uint64_t pages);
int kc_reclaim_take(struct kd_cache *c, uint64_t pages);

/* cache_restore.c */
int kc_block_new(struct kd_session *s, uint32_t ppb, uint64_t owner,
		 struct kd_block **out);
int kc_restore_submit(struct kd_cache *c, struct kd_session *s,
		      struct kc_entry *e);
void kc_staging_pump(struct kd_cache *c, bool fail_all);
void kc_restore_done(struct kd_cache *c, struct migrate_job *job);
void kc_restore_cancel(struct kd_cache *c, struct kc_entry *e);
void kc_prefix_attach(struct kd_region *r, struct kd_seq *q, uint32_t b,
		      struct kd_block *blk);
void kc_restore_settle(struct kd_cache *c, struct kc_entry *e);

/* cache_prefix.c */
/* Block i of an early open no longer holds the pages of the restore it
 * waits for: another early open may take them */
void kc_early_unlend(struct kd_cache *c, struct kc_pending *pr, uint32_t i);
/* restores of pending opens that waited for the park line's earmarks */
void kc_busy_retry(struct kd_cache *c);
/* The hashes of a chain of n that a prefix of r may cover: no more
 * blocks than r has, no more pages than an extend may take
 * (PREFIX_OPEN, PREFIX_QUERY). */
static inline uint32_t kc_prefix_bound(const struct kd_region *r, uint32_t n)
{
	if (n > r->max_blocks)
		n = r->max_blocks;
	if ((uint64_t)n * r->pages_per_block > KVMM_EXTEND_MAX_PAGES)
		n = KVMM_EXTEND_MAX_PAGES / r->pages_per_block;
	return n;
}

/* cache_pending.c */
struct kc_pending *kc_pending_new(uint32_t n);
void kc_settle(struct kd_cache *c);
void kc_pending_free(struct kc_pending *pr);
bool kc_restore_wanted(struct kd_cache *c, uint64_t hash);
void kc_pending_call_off(struct kd_cache *c, struct kc_pending *pr,
			 uint32_t from, uint32_t to);
/* pr's reply can go (kc_pending_finish() sends it: to pr->h, then frees
 * pr or keeps it, early, in the pending list; pr is unlinked first) */
bool kc_pending_ready(const struct kc_pending *pr);
void kc_pending_finish(struct kd_cache *c, struct kc_pending *pr);

/* cache_ready.c: the records of early opens after their reply (replied):
 * answer the SEQ_WAIT_READYs that no longer wait, free the records that
 * have nothing left to say; from kc_settle() */
void kc_ready_sweep(struct kd_cache *c);
uint32_t kc_ready_pending(const struct kc_pending *pr, uint32_t upto);
/* A KVMM_PREFIX_OPEN_COLLECT open (h) of r that waits: answer that it
 * does (KVMM_PREFIX_REPLY_PENDING) */
void kc_pending_say_pending(struct kd_session *s, const struct kvmm_msg_hdr *h,
			    struct kd_region *r, const struct kc_pending *pr);
/* A KVMM_PREFIX_OPEN_COLLECT open (h, p, len) into r parks for pool pages
 * (ABI 1.17): it opens its sequence and answers that it waits (rerun: it
 * parks again, nothing to say).  0 or -errno. */
int kc_prefix_park_collect(struct kd_session *s, const struct kvmm_msg_hdr *h,
			   const void *p, size_t len, struct kd_region *r,
			   bool rerun);

/* cache_park.c */
void kc_park_run(struct kd_cache *c);
/* Pages earmarked for the parked commands ahead of the one running (all
 * of them for a new command). */
uint64_t kc_reserved(struct kd_cache *c);
/* `pages` are free beyond those earmarks: what a path that allocates
 * outside kd_cache_reclaim() checks before it takes pool pages. */
bool kc_pages_in_line(struct kd_cache *c, uint64_t pages);
void kc_park_session_end(struct kd_cache *c, struct kd_session *s);
/* A process asked for its blocks ahead answered: the parked commands
 * that asked run again from the loop (cache_lend.c). */
void kc_park_lend_answered(struct kd_cache *c);
void kc_park_fini(struct kd_cache *c);

/* cache_quota.c: kd_cache_quota_reclaim() with the cache open, the blocks
 * to keep pinned by the caller; partial (a prefix open): short of enough,
 * reclaim what there is (-EDQUOT then unless it parks) */
int kc_quota_reclaim(struct kd_cache *c, struct kd_session *s, uint64_t pages,
		     bool partial);

/* An ADMIN_CACHE_DROP whose reply waits for its NVMe invalidations
 * (cache_drop.c, cache_drop_walk.c). */
struct kc_drop {
	struct kc_drop *next; /* in kd_cache.drops */
	struct kd_session *s; /* NULL once its session ended */
	struct kvmm_msg_hdr h; /* the request: the reply echoes its id */
	struct kvmm_admin_cache_drop_reply rep;
	uint64_t left; /* invalidation jobs not reaped yet */
	uint32_t uid; /* who asked (the log line) */
	/* the hashes of the blocks it dropped (sorted before the stale
	 * copies are looked for); lost: an allocation failed */
	uint64_t *hashes;
	size_t nhashes, cap;
	bool hashes_lost;
	/* of rep.nvme_invalidate_failures: stale NVMe copies not claimed,
	 * left in free slots set aside for writes in flight
	 * (kc_drop_stale()); the log line says them apart */
	uint64_t stale_left;
	/* the NVMe drop marks (kc_drop_mark()): one a size's partition the
	 * drop walked, marks queued, marks_done on disk; mark the last
	 * one's generation (the log line's, with one mark) */
	uint64_t mark;
	uint32_t marks, marks_done;
	/* sizes whose NVMe tier is out: the drop is remembered for the
	 * tier's next open (cache_drop_pending.c), kept across a restart
	 * when nvme_kept is 0 (kc_drop_pending_save()'s -errno else) */
	uint32_t nvme_out;
	int nvme_kept;
	uint32_t tenant; /* of a --uid drop, KVMM_TENANT_OTHERS else */
	/* the reply's bytes: sizeof(rep), or those of before 1.22 for a
	 * client of 1.21 or before (no sizes[]), of 1.22 for one of 1.22
	 * (no restamp counts); its kept NVMe blocks (kc_drop_restamp()) are
	 * in rep.nvme_restamp* for the log line whatever the client */
	size_t rep_size;
};
/* cache_drop.c: an NVME_INVALIDATE, NVME_MARK or NVME_RESTAMP job of a
 * drop was reaped; a session ends (its drop still frees its slots, and
 * answers nobody) */
void kc_drop_job_done(struct kd_cache *c, struct migrate_job *job);
/* cache_drop_walk.c: the drop in c, one size's cache (its part of dr's
 * reply, its jobs counted in dr->left); a header or mark of dr's not
 * written, counted; dr in its restamps' failure lines */
void kc_drop_walk(struct kd_cache *c, struct kc_drop *dr,
		  const struct kvmm_admin_cache_drop *a, bool by_tenant,
		  uint64_t now);
void kc_drop_failed(struct kd_cache *c, struct kc_drop *dr);
void kc_drop_who(const struct kc_drop *dr, char *who, size_t len);
/*
 * cache_drop_kept.c: the headers of NVMe blocks a drop kept written again
 * above its mark.  kc_restamp(): e's, by a job of owner's (a drop, or
 * NULL); 1 queued, 0 not (no engine, a stop), -errno (said, counted).
 * kc_restamp_reaped(): its job reaped (and freed; one a stop cancelled
 * is written on this thread): how it ended, a failure said (who: the
 * owner, "" for none) and counted.  kc_nvme_restamp_landed(): a host ->
 * NVMe write of e landed (its slot READY), numbered before a drop's mark
 * (queued before the drop, which kept the block busy): restamped, or
 * the next start would leave it out.
 */
enum kc_restamp_end {
	KC_RESTAMP_WRITTEN,
	KC_RESTAMP_GONE, /* the block left NVMe first */
	KC_RESTAMP_FAILED,
};
int kc_restamp(struct kd_cache *c, struct kc_entry *e, void *owner,
	       const char *who);
enum kc_restamp_end kc_restamp_reaped(struct kd_cache *c,
				      struct migrate_job *job, const char *who);
void kc_nvme_restamp_landed(struct kd_cache *c, struct kc_entry *e);
void kc_drop_session_end(struct kd_cache *c, struct kd_session *s);
/*
 * cache_drop_pending.c: drops of the NVMe tier answered while it is out.
 * kc_drop_pending_add(): c's tier is out, a drop of every block or of
 * tenant's: remembered for its next open; true when kept across a
 * restart too (the caller saves with kc_drop_pending_save(): 0, -ENOENT
 * with nowhere to keep them, or the write's -errno).  kc_drop_pending_get():
 * what the next open applies (tier_nvme_config.pending_drop), NULL for
 * nothing.  kc_drop_pending_opening(): said before c's tier opens with
 * it (before any of its marks can be written: a kill then leaves the
 * file changed by this attempt alone, its line in the log says so).
 * kc_drop_pending_opened(): c's tier opened with it (name: the
 * tier in the line): logged, forgotten, the file rewritten.
 * kc_drop_pending_load(): at start, before any tier opens, the drops a
 * run before kept.
 */
bool kc_drop_pending_any(const struct kd_cache *c);
bool kc_drop_pending_add(struct kd_cache *c, bool by_tenant, uint32_t tenant);
int kc_drop_pending_save(struct kd_daemon *d);
const struct tier_nvme_drop_pending *
kc_drop_pending_get(const struct kd_cache *c);
void kc_drop_pending_opening(const struct kd_cache *c, const char *name);
void kc_drop_pending_opened(struct kd_cache *c, const char *name);
int kc_drop_pending_load(struct kd_daemon *d);
/* cache_drop.c: an NVME_INVALIDATE job reaped, a drop's or a marked
 * slot's: the slot back to the tier if the job never took it, writes
 * waiting for a slot kicked, the job freed. */
void kc_invalidate_job_end(struct kd_cache *c, struct migrate_job *job);
/* cache_drop_walk.c: a stale copy's slot the tier's claim took
 * (tier_nvme_stale_claim(), tier_nvme_marked_claim()) invalidated by a
 * job of owner's (a drop, or NULL): true when the job runs (its end
 * gives the slot back: counted in nvme_in_flight); false when none
 * could, the slot unclaimed again (a stale copy still, for a later drop
 * or the next start). */
bool kc_invalidate_stale(struct kd_cache *c, uint64_t hash, uint32_t slot,
			 void *owner);

/* cache_nvme_marked.c: zero the slot headers the restart's scan left
 * under a drop mark (the NVMe tier opened or joined, the engine up); an
 * NVME_INVALIDATE job of theirs (owner NULL) was reaped */
void kc_nvme_clear_marked(struct kd_cache *c);
void kc_marked_job_done(struct kd_cache *c, struct migrate_job *job);

/* cache_learned.c: --policy-state (load right after the policy is made,
 * fini before it is destroyed: cancels the periodic save, saves) */
/* kc_learned_lock: at init; -EBUSY when another kvmmd holds FILE.lock,
 * another -errno (the start refused) when FILE.lock cannot be made */
int kc_learned_lock(struct kd_cache *c);
void kc_learned_load(struct kd_cache *c);
int kc_learned_save(struct kd_cache *c, const char *why);
void kc_learned_fini(struct kd_cache *c);

#endif
