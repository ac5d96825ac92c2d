/* SPDX-License-Identifier: MIT */
/*
 * Regions, sequences and blocks (region.c): a block owns its pool pages
 * and is reference counted, a sequence's block table grows as it gets
 * pages, a page's owner decides whether it is zeroed before it is handed
 * on; and the page holds of a session's process.  kvmmd.h includes it.
 */
#ifndef KVMM_KVMMD_REGION_H
#define KVMM_KVMMD_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmm/kvmmd/abi_play.h"
#include "kvmm/uapi.h"

struct kd_daemon;
struct kd_quota;
struct kd_session;

/* A block: the pages backing one token span of a sequence in all 2L
 * ranges.  Reference counted by the sequences that use it (one now; prefix
 * sharing adds more). */
struct kd_block {
	uint32_t refcnt;
	uint32_t nr_pages;
	/* a copy into the pages may still land (the backend could not wait
	 * for it): the last put keeps them out of the pool for good */
	bool abandoned;
	/* its pages went out read-only (a prefix open's shared or reloaded
	 * block): SEQ_UNSHARE copies it even once it is no cache entry's
	 * and one sequence's alone, as no writable fd of it went out */
	bool ro_sent;
	uint64_t hash; /* 0 until published (issue #4) */
	struct kd_quota *charged; /* whose quota pays for the pages */
	uint32_t pages[];
};

struct kd_seq {
	bool open;
	/* a PREFIX_OPEN that opened it has not replied (or, with
	 * KVMM_PREFIX_OPEN_COLLECT, its reply is not collected): the
	 * client's commands naming it are -EBUSY (kd_seq_lookup_client()) */
	bool opening;
	/* a KVMM_SEQ_EXTEND_COLLECT extend of it is parked for pool pages or
	 * its reply not collected yet (ABI 1.17, cache_park.c): the same
	 * -EBUSY, but for the ring's SEQ_EXTEND (length only) */
	bool extending;
	/* opened by a PREFIX_OPEN whose hashes brought few blocks the cache
	 * did not know (pol_cache_few_new): its blocks' accesses say so */
	bool few_new;
	uint32_t gen; /* which opening of the slot (kvmm_rqe.seq_gen) */
	uint32_t len; /* tokens */
	/*
	 * Revocations took blocks [revoked_from, revoked_to) in this opening
	 * (revoked_gen == gen; 0: none since the last extend that gave it
	 * blocks there again): a command naming such a block is told that
	 * it was revoked, -ESTALE, where a block that never had pages is
	 * -EINVAL (kd_seq_revoked(); a client of ABI 1.20 or later only).
	 */
	uint32_t revoked_gen, revoked_from, revoked_to;
	uint32_t nr_slots; /* of blocks[] */
	/* The block table: blocks[b] for b < nr_slots (NULL = no pages);
	 * no block at or past nr_slots.  It grows as blocks get pages
	 * (kd_seq_reserve()), never past max_blocks, so opening, closing and
	 * every walk over it cost what the sequence uses, not max_tokens: a
	 * table of max_blocks entries made each open of a region of 2^24
	 * one-token blocks allocate 128 MB and each close scan 16M entries. */
	struct kd_block **blocks;
};

/* Is block b of q missing because a revocation took it (struct kd_seq's
 * revoked_from)? */
static inline bool kd_seq_revoked(const struct kd_seq *q, uint32_t b)
{
	return q->revoked_gen == q->gen && b >= q->revoked_from &&
	       b < q->revoked_to;
}

/* Block b of q, NULL when it has no pages. */
static inline struct kd_block *kd_seq_block(const struct kd_seq *q, uint32_t b)
{
	return b < q->nr_slots ? q->blocks[b] : NULL;
}

/*
 * The entries the block tables of one uid's sessions may hold together
 * (--max-table-entries-per-uid, by default twice the pool's pages, at
 * least 2^20: 8 MB of pointers).  Its own blocks never come near (each
 * has 2 pages or more); only prefix opens sharing cached blocks into
 * very many sequences do, and without a bound they could make kvmmd
 * allocate without limit.  Per uid, not per session: a bound per session
 * was multiplied by the sessions one client opened (16 made kvmmd grow
 * by 129 MB).  Past it, what would grow a table fails with -ENOBUFS.
 */
#define KD_SEQ_SLOTS_MIN (1u << 20)

struct kd_region {
	uint32_t id;
	struct kd_session *owner;
	struct kd_region *next; /* in owner's list */
	uint32_t layers, kv_heads, head_dim, dtype_bytes;
	uint32_t max_seqs, max_tokens;
	uint64_t salt;
	uint32_t tokens_per_block, max_blocks, pages_per_block;
	uint32_t nr_open;
	uint32_t next_seq_gen;
	bool uncached_logged; /* its block size is not the cache's: said once */
	struct kd_seq *seqs; /* max_seqs */
};

/* The blocks len tokens of r take (the last one partly filled). */
static inline uint32_t kd_region_blocks_for(const struct kd_region *r,
					    uint32_t len)
{
	return (len + r->tokens_per_block - 1) / r->tokens_per_block;
}

/* REGION_CREATE answers -EMFILE past it */
#define KD_MAX_REGIONS_PER_SESSION 64

int kd_region_create(struct kd_session *s, const struct kvmm_region_create *rc,
		     struct kvmm_region_create_reply *rep);
void kd_region_destroy(struct kd_region *r, bool unhold);
/* The region with this id: -ENOENT when none, -EPERM when another
 * session's. */
int kd_region_lookup(struct kd_session *s, uint32_t id, struct kd_region **out);
int kd_seq_lookup(struct kd_region *r, uint32_t seq, struct kd_seq **out);
/* kd_seq_lookup() for a client's command: -EBUSY while a PREFIX_OPEN
 * still opens the sequence (its blocks are not the client's yet), or an
 * extend of it waits to be collected (kd_seq.extending). */
int kd_seq_lookup_client(struct kd_region *r, uint32_t seq,
			 struct kd_seq **out);
/* A sequence of r is opening or extending (kd_seq_lookup_client()'s
 * -EBUSY): REGION_DESTROY is -EBUSY too. */
bool kd_region_seqs_busy(const struct kd_region *r);
/* Opens a sequence with an empty block table. */
int kd_seq_open(struct kd_region *r, uint32_t *seq);
/* Room in seq's table for blocks [0, nr) (nr <= max_blocks): 0, -ENOBUFS
 * past its uid's budget (KD_SEQ_SLOTS_MIN), -ENOMEM. */
int kd_seq_reserve(struct kd_region *r, uint32_t seq, uint32_t nr);
/* Would nr more table entries fit the budget of the session's uid? */
bool kd_seq_slots_room(const struct kd_session *s, uint32_t nr);
/* Shrink seq's table to blocks [0, keep) and those that have pages: what
 * kd_seq_reserve() took for blocks that got none. */
void kd_seq_trim(struct kd_region *r, uint32_t seq, uint32_t keep);
/* unhold: the client has unmapped the pages (not so at session end, where
 * holds are released or quarantined as a whole). */
void kd_seq_close(struct kd_region *r, uint32_t seq, bool unhold);
/* Allocate pages for blocks [from, to) that have none; on failure nothing
 * changes.  New blocks are held by the session.  -EINPROGRESS: the pool
 * is short until demotion copies in flight end, or its free pages are
 * earmarked for commands parked before (the caller parks its command,
 * kd_cache_park()).  ask: short of the uid's quota or of the pool, the
 * blocks other processes of the uid map ahead are asked back
 * (cache_lend.c: -EINPROGRESS too); not for blocks wanted ahead of the
 * length, which the client asks again without. */
int kd_seq_fill(struct kd_region *r, uint32_t seq, uint32_t from, uint32_t to,
		bool ask);
/* The same with the new pages allocated for owner (KD_OWNER_*();
 * kd_seq_fill(): the session's uid). */
int kd_seq_fill_for(struct kd_region *r, uint32_t seq, uint32_t from,
		    uint32_t to, bool ask, uint64_t owner);
/* Drop blocks [from, end): the client unmapped them already. */
void kd_seq_drop_blocks(struct kd_region *r, uint32_t seq, uint32_t from,
			bool unhold);
/* Detach block b of a sequence without releasing the session's hold (the
 * revocation path: held until acknowledged). */
struct kd_block *kd_seq_detach_block(struct kd_region *r, uint32_t seq,
				     uint32_t b);
/*
 * Who a pool page was last allocated for (vmm_pool_alloc_for()): a page
 * that goes to another owner is zeroed first.  A client's pages are its
 * uid's; a restore's are the cached block's, which every client of its
 * cache scope may map, before the copy lands too (an early open): the
 * shared scope's, or the gid's under --cache-scope gid (under uid the
 * uid's own).  Kinds in the high word, so a gid never passes for a uid.
 */
#define KD_OWNER_UID(uid) ((uint64_t)(uint32_t)(uid))
#define KD_OWNER_GID(gid) ((1ull << 32) | (uint32_t)(gid))
#define KD_OWNER_SHARED (2ull << 32)
/* The pages SEQ_UNSHARE copies a cached block into for uid (unshare.c):
 * an owner no allocation asks for, so whoever gets them next, that uid
 * too, gets them zeroed: they hold the cache scope's bytes and what the
 * sequence wrote after them. */
#define KD_OWNER_COPY(uid) ((3ull << 32) | (uint32_t)(uid))
/* The owner of the pages of a block s restores: its cache scope's.  Also
 * s's trust domain for the pool (vmm_pool_page_fd(), _alloc_for()): a
 * page whose fd went to a process of one scope reaches another scope's
 * only as a new page, since a process may keep what it says it unmapped;
 * under --cache-scope shared every client is one domain. */
uint64_t kd_cache_owner(const struct kd_session *s);

/* A fresh block of nr_pages pool pages for owner (KD_OWNER_*(); kd_block_new:
 * s's uid) in s's domain, charged to s's quota (not checked against its
 * limit: the caller does); refcnt 1.  0, -ENOMEM, -ENOSPC, or the -errno
 * of a page's scrub or renewal. */
int kd_block_new_for(struct kd_session *s, uint32_t nr_pages, uint64_t owner,
		     struct kd_block **out);
int kd_block_new(struct kd_session *s, uint32_t nr_pages,
		 struct kd_block **out);
void kd_block_put(struct kd_daemon *d, struct kd_block *blk);

/* The session's process maps (or unmaps) a page once more. */
void kd_hold_page(struct kd_session *s, uint32_t page);
void kd_unhold_page(struct kd_session *s, uint32_t page);

#endif
