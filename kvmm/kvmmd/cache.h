/* SPDX-License-Identifier: MIT */
/*
 * kvmmd's block cache: published blocks, their tiers, prefix sharing.
 *
 * Published blocks live in a hash -> entry map and, while resident in a
 * tier the policy manages, in a pol_cache (LRU) that decides what moves
 * down when a tier is over its capacity.  The policy's move handler turns
 * its decisions into migrations:
 *
 *   GPU -> host   GPU_TO_HOST job; the cache's reference on the block's
 *                 pages is dropped when the copy is DONE (the policy only
 *                 evicts blocks no sequence uses, so no client maps them
 *                 and no revocation is needed)
 *   host -> NVMe  HOST_TO_NVME job; the host slot is freed when DONE
 *   drop          resources freed at once, or when the job in flight ends
 *
 * Restores (host or NVMe -> fresh pages) happen when a sequence is opened
 * on a cached prefix: HOST_TO_GPU / NVME_TO_GPU jobs, all the prefix's at
 * once, while the loop serves everyone else; the PREFIX_OPEN's reply is
 * deferred until they completed (kd_session_defer()).  A block being
 * restored is pinned in the policy; a second PREFIX_OPEN that needs it
 * waits for that restore (restores_waited) and shares the pages.  A block
 * with a demotion in flight (its bytes in two places, neither final) is
 * waited for and restored from where it landed; busy_misses counts those
 * dropped meanwhile.
 *
 * One cache a block size (2L pages: a model and its draft, two models on
 * one GPU have two), KD_CACHE_SIZES at most, each with its index, policy,
 * host tier and migrations: opened at start for the sizes
 * --cache-block-pages names (--host-mem shared by their weights, equally
 * unless given), else when the
 * first block of a size is published or looked up (the first size takes
 * all of --host-mem, later ones keep their blocks on the GPU).  A
 * region's commands go to its size's cache; hashes of two sizes never
 * meet (their layouts seed them).  The first size's cache also keeps
 * what the sizes share: the line of commands parked for pool pages (the
 * pool is one), the NVMe tier (one file of one payload size),
 * --policy-state and telemetry's reuse counts.  Blocks of a size past
 * the limit, or not named, are not cached.  NVMe blocks found at startup
 * (restart recovery) are kept in the map outside the policy ("cold")
 * until a prefix uses them.
 */
#ifndef KVMM_KVMMD_CACHE_H
#define KVMM_KVMMD_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "kvmm/kvmmd/kvmmd.h"

struct kd_cache;

int kd_cache_init(struct kd_daemon *d);
void kd_cache_fini(struct kd_daemon *d);
/* The start is refused: remove the NVMe file this start made (before
 * kd_cache_fini(), which drops the lock; cache_nvme_start.c). */
void kd_cache_unmake_nvme(struct kd_daemon *d);
/* A normal stop: remove the NVMe file a claim of this run made when no
 * tier was written into it (before kd_cache_fini() too). */
void kd_cache_stop_nvme(struct kd_daemon *d);
/* The share of total (--host-mem, the pool's pages) of the i-th size
 * --cache-block-pages names: its weight over their sum (all of it with
 * one size or none named, or for a size past those named). */
uint64_t kd_cache_share(const struct kd_config *cfg, uint32_t i,
			uint64_t total);
/* kd_cache_share() of --host-mem. */
uint64_t kd_cache_host_share(const struct kd_config *cfg, uint32_t i);
/* The i-th size's weight and the weights' sum (1 and 1 with one size). */
uint32_t kd_cache_weight(const struct kd_config *cfg, uint32_t i);
uint32_t kd_cache_weights_sum(const struct kd_config *cfg);

/* Socket commands (0 = replied, or -errno for the caller to reply). */
int kd_cache_publish(struct kd_session *s, const struct kvmm_msg_hdr *h,
		     const void *p, size_t len);
int kd_cache_prefix_open(struct kd_session *s, const struct kvmm_msg_hdr *h,
			 const void *p, size_t len);
/* PREFIX_QUERY (ABI 1.19): the cached prefix's tiers, nothing changed
 * (cache_query.c). */
int kd_cache_prefix_query(struct kd_session *s, const struct kvmm_msg_hdr *h,
			  const void *p, size_t len);
/* TIER_STATS: every block size's cache summed (the NVMe tier and the
 * set-up's errors are the first size's); kd_cache_size_stats(): the i-th
 * size's own (*pages a block), -ENOENT past the sizes or before the
 * first size is known (metrics, size="N"; TIER_STATS' sizes[]). */
int kd_cache_tier_stats(struct kd_daemon *d, struct kvmm_tier_stats_reply *st);
int kd_cache_size_stats(struct kd_daemon *d, uint32_t i, uint32_t *pages,
			struct kvmm_tier_stats_reply *st);
/* TIER_STATS of one size (ABI 1.21): block_pages 0, the sum above;
 * else the cache of blocks of that many pages alone (-ENOENT: none). */
int kd_cache_tier_stats_of(struct kd_daemon *d, uint32_t block_pages,
			   struct kvmm_tier_stats_reply *st);
int kd_cache_seq_wait_ready(struct kd_session *s, const struct kvmm_msg_hdr *h,
			    const void *p, size_t len);
/* PREFIX_COLLECT (ABI 1.16): the reply of a KVMM_PREFIX_OPEN_COLLECT open
 * once it is ready, -EAGAIN before, -ENOENT for no such open. */
int kd_cache_prefix_collect(struct kd_session *s, const struct kvmm_msg_hdr *h,
			    const void *p, size_t len);
/* BLOCK_PUBLISH's request (body, len bytes) well formed and naming blocks
 * of the session's sequence: 0, or -errno (the size rule's -E2BIG, -EINVAL,
 * the ids' -ENOENT); run before the two below, which rely on it. */
int kd_cache_publish_check(struct kd_session *s, const void *body, size_t len);
/* BLOCK_PUBLISH (body p, len bytes) names a block of an early open still
 * loading: -EBUSY, else 0. */
int kd_cache_publish_busy(struct kd_session *s, const void *p, size_t len);
/*
 * Blocks [from, ...) of sequence seq of r are about to leave it (SEQ_CLOSE
 * and region destroy: from 0, seq UINT32_MAX for every sequence of r;
 * SEQ_TRUNCATE; a revocation): an early open's reloads of them nobody else
 * waits for are called off when they have not started, its SEQ_WAIT_READY
 * no longer waits for them.
 */
void kd_cache_seq_cut(struct kd_region *r, uint32_t seq, uint32_t from);
/* Block b of r's sequence seq waits for an early open's reload (its pages
 * are not filled yet): SEQ_UNSHARE is -EBUSY, as BLOCK_PUBLISH is.  And
 * TIER_STATS' blocks_unshared, counted (unshare.c). */
bool kd_cache_block_loading(struct kd_session *s, struct kd_region *r,
			    uint32_t seq, uint32_t b);
void kd_cache_count_unshare(struct kd_daemon *d, const struct kd_region *r);
/*
 * Sequence seq of s's region region_id is being opened by a PREFIX_OPEN
 * whose reply is not sent yet: it holds blocks whose page holds the session
 * takes only with the reply, so nothing may revoke them meanwhile.
 */
bool kd_cache_seq_opening(struct kd_session *s, uint32_t region_id,
			  uint32_t seq);
/* ... any sequence of s's region region_id. */
bool kd_cache_region_opening(struct kd_session *s, uint32_t region_id);
/*
 * A thread of s may be blocked in a call that waits for restores without
 * the socket (ABI 1.16): a KVMM_PREFIX_OPEN_COLLECT open whose reply is not
 * ready, or an early open with blocks still loading (a blocking
 * kvmm_seq_wait_ready() polls them), or (ABI 1.17) a
 * KVMM_SEQ_EXTEND_COLLECT extend parked for pool pages or not collected.
 * Its revocation clock stops then, as a deferred session's does: both end
 * when the restores do, or the park (KD_PARK_MAX_MS at most).
 */
bool kd_cache_session_waits(struct kd_session *s);

/* Hooks: a sequence stops using a published block (region.c); a session
 * ends (session.c: its PREFIX_OPEN waiting for restores, or its command
 * parked for pages, is dropped; restores nobody waits for any more are
 * cancelled when they have not started). */
void kd_cache_block_unref(struct kd_daemon *d, struct kd_block *blk);
void kd_cache_session_end(struct kd_session *s);

/*
 * Pool pressure (region.c before an extend allocates, cache_prefix.c
 * before restores): when fewer than `pages` pool pages are free, demote
 * cached GPU blocks that no sequence uses (the policy's victims; pins and
 * references respected) to the host tier, or drop them when no lower tier
 * has room.  0 when `pages` are free now; -EINPROGRESS when migrations in
 * flight (the victims' copies) are to give pages back first: the caller
 * parks its command (kd_cache_park()) rather than wait; -ENOSPC when
 * nothing will.  A parked command run again finds the copies still in
 * flight (-EINPROGRESS, no new victims), its pages, more victims once
 * none is in flight, or -ENOSPC once its time (KD_PARK_MAX_MS) is up.
 * While commands are parked, the free pages they wait for are theirs, in
 * line order: a later caller counts as free only the pages beyond those,
 * and short of them takes victims for its own pages and parks behind
 * them (-EINPROGRESS).
 */
int kd_cache_reclaim(struct kd_daemon *d, uint64_t pages);

/*
 * Quota (region.c before an extend allocates; cache_prefix.c before
 * restores and holes, through kc_quota_reclaim()): when s's uid has no
 * room in its quota for `pages` more, move down the cached GPU blocks
 * charged to it that nothing uses (the policy's victims among them,
 * every other block kept), as a memory cgroup reclaims its own page
 * cache at its limit.  0 when the pages fit now; -EINPROGRESS when the
 * victims' copies are to give their pages back first (the caller parks,
 * as after kd_cache_reclaim()); -EDQUOT when its idle cached blocks are
 * not enough, and then nothing moved.
 */
int kd_cache_quota_reclaim(struct kd_session *s, uint64_t pages);

/*
 * An extend of s short of `pages` (err: -EDQUOT from the uid's quota,
 * or the pool's -ENOSPC/-ENOMEM) asks the other processes of s's uid
 * (ABI 1.19 clients) for the blocks they map past their sequences'
 * lengths (cache_lend.c): -EINPROGRESS when it asked, or asked before and
 * may still get them (the caller parks its command, as after
 * kd_cache_reclaim(), for kvmmd --lend-wait at most), else err.
 * kd_cache_lend_filled(): the extend got its pages (counted when it had
 * asked).
 */
int kd_cache_lend_ask(struct kd_session *s, uint64_t pages, int err);
void kd_cache_lend_filled(struct kd_session *s);
/* s truncated its sequence's blocks [from, ...) of r, naming the request
 * `cookie` (ABI 1.20; 0: none): counted as given back when it answers
 * kvmmd's request for its blocks ahead. */
void kd_cache_lend_truncated(struct kd_session *s, struct kd_region *r,
			     uint32_t seq, uint32_t from, uint64_t cookie);
/* A REVOKE_ACK of s's `cookie`: true when it answers kvmmd's request for
 * its blocks ahead (ABI 1.20), having given `blocks`; false when the
 * cookie is no such request's (a revocation's, maybe). */
bool kd_cache_lend_acked(struct kd_session *s, uint64_t cookie,
			 uint64_t blocks);

/*
 * Park the command s is handling (header h, body p of len bytes) after
 * kd_cache_reclaim() said -EINPROGRESS: the session is deferred and the
 * request runs again from the loop, as if just received, whenever
 * migrations complete or pages come back to the pool for the first
 * parked command (kd_cache_pages_back()), until it no longer parks (it
 * replied) or at the latest KD_PARK_MAX_MS after it was first parked.
 * The loop serves other sessions meanwhile.  0 (the reply comes later)
 * or -ENOMEM.
 */
#define KD_PARK_MAX_MS 5000
int kd_cache_park(struct kd_session *s, const struct kvmm_msg_hdr *h,
		  const void *p, size_t len);
/*
 * The same for a KVMM_SEQ_EXTEND_COLLECT extend of r's sequence seq, or a
 * KVMM_PREFIX_OPEN_COLLECT open into r's sequence seq, which it opened
 * (ABI 1.17): the session is not deferred and the sequence is marked
 * extending (opening); the caller answers that the command is pending
 * unless it is a parked one run again (kd_cache_park_rerun()).
 */
int kd_cache_park_collect(struct kd_session *s, const struct kvmm_msg_hdr *h,
			  const void *p, size_t len, struct kd_region *r,
			  uint32_t seq);
/* s's command is such a parked command run again (*seq, may be NULL: its
 * sequence). */
bool kd_cache_park_rerun(struct kd_session *s, uint32_t *seq);
/*
 * That rerun no longer parks: its outcome (status; when 0, the reply body
 * rep of len bytes, which the cache takes) waits for its SEQ_COLLECT
 * (PREFIX_COLLECT), and the ring's notify word moves once the pass ends.
 * A status > 0: a prefix open that went on, whose pending record answers
 * its PREFIX_COLLECT; the park forgets it.
 */
void kd_cache_park_done(struct kd_session *s, int status, void *rep,
			size_t len);
/*
 * SEQ_COLLECT (cmd SEQ_EXTEND), PREFIX_COLLECT (cmd PREFIX_OPEN): the
 * outcome of s's parked command cmd of (region_id, seq): 0 with *status
 * and, when that is 0, *rep (the caller's to free) and *len; -EAGAIN
 * while it is parked; -ENOENT for none.  An extend's sequence is no
 * longer extending then.
 */
int kd_cache_park_collect_take(struct kd_session *s, uint16_t cmd,
			       struct kd_region *r, uint32_t seq, int *status,
			       void **rep, size_t *len);
/* s has a KVMM_SEQ_EXTEND_COLLECT extend parked or not collected. */
bool kd_cache_park_waits(struct kd_session *s);
/* Pool pages may have come back (a block put, a hold released): when the
 * first parked command's pages are free, the parked commands run again
 * from the loop.  Cheap when nothing is parked. */
void kd_cache_pages_back(struct kd_daemon *d);
/* ADMIN_STATUS: commands parked since start and now, demotions waiting
 * for a host slot now, summed and (ABI 1.22) of each size. */
void kd_cache_park_stats(struct kd_daemon *d, struct kvmm_status_reply *st);
/* --policy-state's fields of ADMIN_STATUS (cache_learned.c) */
void kd_cache_learned_stats(struct kd_daemon *d, struct kvmm_status_reply *st);

/*
 * Pins (pin.c).  kd_cache_pin_target(): the policy, the tier, the
 * generation and the size in bytes (its cache's: kvmmd caches up to
 * KD_CACHE_SIZES block sizes) of a cached block the policy tracks;
 * -ENOENT when the hash is not cached or is on its way out.  A cold
 * NVMe block (a restart found it, no open used it) is taken into the
 * policy there first, charged to its header's tenant, or to the pinning
 * session s's when it names none; without admit (the session holds its
 * quota of pins) it stays cold and the answer is -EDQUOT.  The generation
 * tells a later entry with the same hash from the one pinned:
 * kd_cache_pin_policy() answers the policy only while that entry is still
 * cached, NULL when it has gone (its policy state went with it).
 */
struct pol_cache;
int kd_cache_pin_target(struct kd_daemon *d, const struct kd_session *s,
			uint64_t hash, bool admit, struct pol_cache **pol,
			unsigned *tier, uint64_t *gen, uint64_t *bytes);
struct pol_cache *kd_cache_pin_policy(struct kd_daemon *d, uint64_t hash,
				      uint64_t gen);
/* Blocks the policy may keep on the GPU (0 before the first publish). */
uint64_t kd_cache_gpu_capacity(struct kd_daemon *d);
/* The cache's policy, for reading (NULL before the first publish): the
 * first block size's; kd_cache_policy_at(): the i-th size's (NULL
 * before its first publish, or past the sizes). */
const struct pol_cache *kd_cache_policy(const struct kd_daemon *d);
const struct pol_cache *kd_cache_policy_at(const struct kd_daemon *d,
					   uint32_t i);
/* The block size (pages a block) of the i-th size's cache: 0 past the
 * sizes, or before its size is known. */
uint32_t kd_cache_size_at(const struct kd_daemon *d, uint32_t i);
/*
 * ADMIN_CACHE_DROP (cache_drop.c), request body p of len bytes: the
 * reply is sent now, or once the dropped NVMe blocks' headers are
 * invalidated on disk (the session is deferred meanwhile).  0 (replied or
 * deferred), or -errno for the caller to reply (-EINVAL, -E2BIG, -ENOMEM,
 * -ENOENT for a block size no cache has).
 */
int kd_cache_drop(struct kd_session *s, const struct kvmm_msg_hdr *h,
		  const void *p, size_t len);
/* Give the policy tenant id's limit (tenant.c), when there is a policy
 * yet; the moves it makes go as an access's do.  0 or its error. */
int kd_cache_tenant_limit(struct kd_daemon *d, uint32_t id,
			  const uint64_t limit[POL_TIER_COUNT]);

#endif
