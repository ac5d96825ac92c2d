/* SPDX-License-Identifier: MIT */
/*
 * kvmm wire ABI, administration (commands 0x80-0x9f; ADMIN_STATUS's
 * reply is in stats.h): ADMIN_SESSIONS and its region entries,
 * KILL_SESSION, SET_QUOTA, SET_LOG_LEVEL, ADMIN_TENANTS,
 * SET_TENANT_LIMIT, ADMIN_CACHE_DROP and ADMIN_REVOKE.
 *
 * Part of <kvmm/uapi.h>, which includes it; include that one (it has
 * the ABI version, the command numbers and the message header).  It
 * compiles alone too (tests/header-alone.sh).
 */
#ifndef KVMM_UAPI_ADMIN_H
#define KVMM_UAPI_ADMIN_H

#include <stdint.h>

/* A reply's variable part is a C99 flexible array member, which ISO C++
 * lacks (g++ and clang++ accept it, but warn under -pedantic): quiet that
 * warning for this header only, so an engine built with -pedantic -Werror
 * can include it (tests/header-alone.sh). */
#ifdef __cplusplus
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif

struct kvmm_session_info {
	uint32_t size;
	uint32_t session_id;
	uint32_t pid, uid, gid;
	uint32_t flags; /* KVMM_SESSION_F_* */
	char name[32];
	uint64_t pages_held, pages_owned;
	uint64_t regions, sequences;
	uint64_t quota_pages; /* of the uid, 0 = unlimited */
	/* ABI 1.2 (all 0 from older daemons; pin_quota is never 0 from a
	 * newer one): the session's BLOCK_PIN records, its quota of them
	 * (kvmmd --pin-quota) and the bytes of the blocks they name */
	uint32_t pins, pin_quota;
	uint64_t pinned_bytes;
};

#define KVMM_SESSION_F_ADMIN 0x1
#define KVMM_SESSION_F_IN_STEP 0x2
#define KVMM_SESSION_F_REVOKING 0x4
/* ABI 1.13: not a session but a quarantined process: its sessions ended
 * without BYE while it lives on; pages_held are the distinct pages they
 * held, kept until it exits (session_id: the first of them; no regions,
 * sequences, pages owned or pins) */
#define KVMM_SESSION_F_QUARANTINED 0x8

/* ADMIN_SESSIONS reply: a header then nr entries. */
struct kvmm_sessions_reply {
	uint32_t size;
	uint32_t nr;
	uint32_t entry_size; /* sizeof(struct kvmm_session_info) */
	/* ABI 1.12: sessions in all, > nr when they did not fit one reply
	 * (KVMM_MSG_MAX); 0 from an older daemon */
	uint32_t total;
	struct kvmm_session_info sessions[];
	/* ABI 1.13: then struct kvmm_sessions_regions, while there is room */
};

/*
 * ABI 1.13: after the nr session entries, the regions of the sessions
 * listed (the ids ADMIN_REVOKE takes, which are daemon-wide), as many as
 * the reply has room for: this header, then nr entries in session
 * order, each a struct kvmm_region_info of entry_size bytes followed by
 * nr_listed u32 ids of its open sequences, ascending, the entry padded
 * to 8 bytes (KVMM_REGION_INFO_STRIDE()).  A reply that ends with the
 * session entries (an older daemon's) has none.
 */
struct kvmm_sessions_regions {
	uint32_t nr; /* entries that follow */
	uint32_t total; /* regions of the sessions listed; > nr when cut */
	uint32_t entry_size; /* sizeof(struct kvmm_region_info) */
	uint32_t pad;
};

/* Most open sequence ids one region entry lists (nr_open says if more). */
#define KVMM_REGION_INFO_SEQS 64

struct kvmm_region_info {
	uint32_t session_id, region_id;
	uint32_t max_seqs; /* sequence ids are below it */
	uint32_t max_blocks; /* of a sequence: FIRST_BLOCK is below it */
	uint32_t nr_open; /* sequences open */
	uint32_t nr_listed; /* the first of them, at most 64, listed after */
};

/* Bytes from one region entry to the next (its ids included). */
#define KVMM_REGION_INFO_STRIDE(entry_size, nr_listed) \
	(((uint64_t)(entry_size) + 4 * (uint64_t)(nr_listed) + 7) & ~7ull)

struct kvmm_admin_session {
	uint32_t size;
	uint32_t session_id;
	uint64_t reserved[2];
};

struct kvmm_admin_quota {
	uint32_t size;
	uint32_t uid;
	uint64_t bytes; /* 0 = unlimited */
	uint64_t reserved[2];
};

struct kvmm_admin_log_level {
	uint32_t size;
	uint32_t level; /* enum vmm_log_level */
	uint64_t reserved[2];
};

/*
 * ADMIN_TENANTS (ABI 1.10): per tenant, what the cache holds for it and
 * what its sessions got from it.  A tenant is a uid, a gid under
 * --cache-scope gid (kind says which); past the first 255 tenants seen
 * the rest share one entry whose id is KVMM_TENANT_OTHERS.  Cached blocks
 * are charged to the tenant whose publish (or prefix open, for a block
 * found on NVMe at start) admitted them, in whichever tier they are now.
 */
#define KVMM_TENANT_OTHERS 0xffffffffu

enum kvmm_tenant_kind {
	KVMM_TENANT_UID = 0,
	KVMM_TENANT_GID = 1,
};

struct kvmm_tenant_info {
	uint32_t size; /* sizeof(struct kvmm_tenant_info) */
	uint32_t id; /* uid or gid, or KVMM_TENANT_OTHERS */
	uint32_t sessions; /* live sessions (not admin-only ones) */
	uint32_t pad;
	uint64_t cached_blocks[3]; /* charged to it now: gpu, host, nvme */
	uint64_t admitted_blocks; /* blocks its accesses brought in */
	uint64_t prefix_opens; /* PREFIX_OPENs its sessions ran */
	uint64_t hit_blocks[3]; /* blocks those found, by tier found in */
	uint64_t published_blocks; /* blocks its publishes cached */
	uint64_t dropped_blocks; /* of its blocks, dropped from the cache */
	/* ABI 1.11 (zero before: these were reserved, and the entry ended
	 * here; entry_size says how long a daemon's entries are) */
	uint64_t limit_blocks[3]; /* its limit per tier; 0: none */
	uint64_t limit_moves; /* its blocks moved down for being over it */
	/* ABI 1.13 (were reserved: 0 from older daemons), for a uid tenant
	 * (0 under --cache-scope gid, and for KVMM_TENANT_OTHERS): its
	 * quota (0: unlimited), the pages charged to it now (its blocks,
	 * cached ones too, and its quarantined sessions' pages), and of
	 * those the pages of cached GPU blocks, which it gets back when it
	 * needs them (Documentation/admin.md, "Quotas") */
	uint64_t quota_pages;
	uint64_t quota_used_pages;
	uint64_t quota_cached_pages;
};

/* An ABI 1.10 entry's size (ADMIN_TENANTS' entry_size then): up to
 * limit_blocks, which were reserved. */
#define KVMM_TENANT_INFO_SIZE_1_10 120u

/*
 * ADMIN_TENANTS' optional request (ABI 1.22; none before, and none still
 * asks for every size summed).  block_pages: 0, the blocks of every
 * size's cache summed; N, each tenant's figures in the cache of blocks
 * of N pages alone (-ENOENT when no cache has that size): its cached
 * blocks per tier, admitted, dropped and limit_moves.  The rest of an
 * entry (sessions, prefix opens, hits, publishes, limits, quota) is kept
 * for the daemon, not per size, and is the same in either reply.  A
 * daemon before 1.22 answers any body -EINVAL.
 */
struct kvmm_admin_tenants_req {
	uint32_t size;
	uint32_t flags; /* 0 */
	uint32_t block_pages;
	uint32_t pad;
	uint64_t reserved[2];
};

struct kvmm_tenants_reply {
	uint32_t size;
	uint32_t nr;
	uint32_t entry_size; /* sizeof(struct kvmm_tenant_info) */
	uint32_t kind; /* enum kvmm_tenant_kind: what the ids are */
	struct kvmm_tenant_info tenants[];
};

/*
 * ADMIN_SET_TENANT_LIMIT (ABI 1.11): the most cached blocks tenant id (a
 * uid, a gid under --cache-scope gid) may hold in each tier; 0 lifts the
 * limit there, all 0 every limit.  Applied at once: a tenant over its new
 * limit has its least recently used blocks there moved down a tier.
 * -EINVAL: reserved bits, id KVMM_TENANT_OTHERS, or a limit on a tier
 * this kvmmd has not got; -ENOSPC: 255 tenants have a row already and id
 * is not one of them.
 */
struct kvmm_admin_tenant_limit {
	uint32_t size;
	uint32_t id;
	uint64_t limit_blocks[3]; /* gpu, host, nvme */
	uint64_t reserved[2];
};

/*
 * ADMIN_CACHE_DROP (ABI 1.14): drop the cached blocks of the tiers in
 * `tiers` (KVMM_CACHE_DROP_*; 0: every tier) and, with
 * KVMM_CACHE_DROP_F_TENANT, only those charged to tenant `tenant` (a uid,
 * a gid under --cache-scope gid; the tenant ADMIN_TENANTS lists them
 * under).  A block in use is kept and counted: one a live sequence maps
 * or an in-flight step pins, one a client's BLOCK_PIN keeps (a plain pin,
 * or a TTL pin not yet past), one with a copy or a restore in flight.
 * A dropped NVMe block's slot header is invalidated on disk before the
 * reply, so a restart does not recover it; so are (since 1.15) the
 * stale NVMe copies of the blocks dropped (slots freed earlier whose
 * header still names one), and with NVMe among the tiers every stale
 * copy (of the tenant, with the flag).  -EINVAL: reserved bits or
 * words, tier bits past NVMe, a tenant without the flag or
 * KVMM_TENANT_OTHERS with it.  ABI 1.22: block_pages names one block
 * size's cache, the others untouched (-ENOENT when none has it); the
 * reply then lists each size's part (struct kvmm_cache_drop_size).
 */
#define KVMM_CACHE_DROP_GPU 0x1u
#define KVMM_CACHE_DROP_HOST 0x2u
#define KVMM_CACHE_DROP_NVME 0x4u
#define KVMM_CACHE_DROP_F_TENANT 0x1u /* kvmm_admin_cache_drop.flags */

struct kvmm_admin_cache_drop {
	uint32_t size;
	uint32_t tiers; /* KVMM_CACHE_DROP_* mask, 0: all */
	uint32_t flags; /* KVMM_CACHE_DROP_F_* */
	uint32_t tenant; /* with KVMM_CACHE_DROP_F_TENANT; else 0 */
	/* ABI 1.22 (a reserved word before: a daemon before 1.22 answers
	 * one not 0 -EINVAL): 0, every size's cache; N, the cache of blocks
	 * of N pages alone, its NVMe partition included, the other sizes'
	 * blocks untouched (-ENOENT when no cache has that size) */
	uint32_t block_pages;
	uint32_t pad;
	uint64_t reserved[1];
};

/* One size's part of an ADMIN_CACHE_DROP (its reply's sizes[]). */
struct kvmm_cache_drop_size {
	uint32_t block_pages;
	uint32_t pad;
	uint64_t dropped[3]; /* gpu, host, nvme */
	uint64_t kept[3];
};

struct kvmm_admin_cache_drop_reply {
	uint32_t size;
	uint32_t pad;
	uint64_t dropped[3]; /* blocks dropped: gpu, host, nvme */
	uint64_t kept[3]; /* blocks kept because in use, per tier */
	/* the kept ones by why (they add up to the sum of kept[]): mapped
	 * by a live sequence or pinned by an in-flight step; kept by a
	 * client's BLOCK_PIN; a copy or restore of it in flight */
	uint64_t kept_in_use, kept_pinned, kept_busy;
	/* of dropped[2], those whose header could not be invalidated on
	 * disk (an I/O error, or the stop came first): a restart may find
	 * them again */
	uint64_t nvme_invalidate_failures;
	/* ABI 1.15 (a reserved word before: 0 from an older daemon): stale
	 * NVMe copies whose header the drop zeroed on disk, slots freed in
	 * memory earlier (a restore to the GPU, an eviction) whose header
	 * still named a block of the drop, or of its tenant, or any when
	 * the drop includes NVMe; those that could not be are in
	 * nvme_invalidate_failures */
	uint64_t nvme_stale_invalidated;
	uint64_t reserved[1];
	/* ABI 1.22 (232 more bytes, 336 in all; a client whose HELLO said
	 * 1.21 or less is sent the 104 bytes of before): block_pages, the
	 * request's (0: every size); sizes[0..nr_sizes), each size the drop
	 * walked (the one asked, or every size cached, the first first)
	 * with its blocks dropped and kept per tier: they add up to
	 * dropped[] and kept[] above */
	uint32_t block_pages;
	uint32_t nr_sizes;
	struct kvmm_cache_drop_size sizes[4]; /* KVMM_TIER_STATS_SIZES */
	/* ABI 1.23 (24 more bytes, 360 in all; a client whose HELLO said
	 * 1.22 or less is sent the 336 bytes of before): the blocks of
	 * kept[2] that were on NVMe, each one's header written again above
	 * the drop's mark so that the next start finds it
	 * (nvme_restamped), not written (an I/O error, no memory, the stop
	 * first: the next start will not find it, though it is served in
	 * this run), or gone from NVMe before its write ran (freed,
	 * evicted, dropped: nothing left to keep).  A block kept busy on
	 * its way down to NVMe is in none: it is restamped when its write
	 * lands, after the reply (TIER_STATS counts it) */
	uint64_t nvme_restamped;
	uint64_t nvme_restamp_failures;
	uint64_t nvme_restamp_gone;
};

/* Revoke blocks [first_block, end) of one sequence of one session. */
struct kvmm_admin_revoke {
	uint32_t size;
	uint32_t session_id;
	uint32_t region_id;
	uint32_t seq_id;
	uint32_t first_block;
	uint32_t pad;
	uint64_t reserved[2];
};

#ifdef __cplusplus
#pragma GCC diagnostic pop
#endif

#endif
