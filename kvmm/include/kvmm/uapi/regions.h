/* SPDX-License-Identifier: MIT */
/*
 * kvmm wire ABI, regions and sequences: REGION_CREATE/DESTROY,
 * SEQ_OPEN/CLOSE, SEQ_EXTEND/TRUNCATE and the pages their reply (and
 * SEQ_COLLECT's) hands over, SEQ_UNSHARE.  SEQ_WAIT_READY, which waits
 * for a prefix open's reloads, is in blocks.h.
 *
 * Part of <kvmm/uapi.h>, which includes it; include that one (it has
 * the ABI version, the command numbers and the message header).  It
 * compiles alone too (tests/header-alone.sh).
 */
#ifndef KVMM_UAPI_REGIONS_H
#define KVMM_UAPI_REGIONS_H

#include <stdint.h>

/* A reply's variable part is a C99 flexible array member, which ISO C++
 * lacks (g++ and clang++ accept it, but warn under -pedantic): quiet that
 * warning for this header only, so an engine built with -pedantic -Werror
 * can include it (tests/header-alone.sh). */
#ifdef __cplusplus
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif

struct kvmm_region_create {
	uint32_t size;
	uint32_t layers;
	uint32_t kv_heads;
	uint32_t head_dim;
	uint32_t dtype_bytes;
	uint32_t max_seqs;
	uint32_t max_tokens; /* per sequence */
	uint32_t flags; /* none yet, must be 0 */
	/* The region's cache namespace: kvmmd names the blocks it publishes
	 * and looks up by salted(salt, hash) (abi.md, "Region salts"), so
	 * regions share blocks only with regions of the same salt; 0 keeps
	 * the clients' hashes as they are. */
	uint64_t salt;
	uint64_t reserved[4];
};

struct kvmm_region_create_reply {
	uint32_t size;
	uint32_t region_id;
	uint32_t tokens_per_block;
	uint32_t max_blocks; /* per sequence */
	uint32_t pages_per_block; /* 2 * layers */
	uint32_t pad;
	uint64_t seq_stride; /* bytes between sequences in one range */
	uint64_t range_size; /* bytes of one (layer, K|V) range */
	uint64_t reserved[4];
};

/* REGION_DESTROY, SEQ_OPEN, SEQ_CLOSE, STEP_*: an id pair. */
struct kvmm_region_ref {
	uint32_t size;
	uint32_t region_id;
	uint32_t seq_id; /* ignored where no sequence is meant */
	uint32_t flags; /* must be 0 */
	uint64_t reserved[2];
};

struct kvmm_seq_open_reply {
	uint32_t size;
	uint32_t seq_id; /* the sequence's slot in the region, < max_seqs */
	/* this opening of the slot (never 0; 0 from daemons before ABI 1.1):
	 * revocation entries name it (kvmm_rqe.seq_gen) */
	uint32_t seq_gen;
	uint32_t pad;
	uint64_t reserved[1];
};

/*
 * SEQ_EXTEND / SEQ_TRUNCATE.  Extend sets the length to new_len tokens and
 * makes sure blocks [0, max(ceil(new_len / tpb), want_blocks)) have pages;
 * truncate shortens to new_len and gives back pages of blocks past it
 * (the client has unmapped them before sending).
 */
struct kvmm_seq_extend {
	uint32_t size;
	uint32_t region_id;
	uint32_t seq_id;
	uint32_t new_len;
	uint32_t want_blocks; /* map ahead: blocks wanted backed, >= needed */
	uint32_t flags; /* SEQ_EXTEND: KVMM_SEQ_EXTEND_*; SEQ_TRUNCATE: 0 */
	uint64_t reserved[2];
};

/*
 * KVMM_SEQ_EXTEND_COLLECT (ABI 1.17; a daemon before it answers -EINVAL):
 * an extend that would be parked for pool pages (the reclaim's victims
 * are still being copied down, or commands parked before it wait for the
 * free pages) is answered at once with an empty reply (nr_blocks 0, no
 * fds) whose flags say KVMM_EXTEND_REPLY_PENDING; the session's socket is
 * read meanwhile.  The command keeps its place in the park line and its
 * 5 s bound.  When it has its pages (or failed) the daemon bumps the
 * ring's notify word (struct kvmm_ring_offsets.notify, FUTEX_WAKE);
 * SEQ_COLLECT (kvmm_region_ref: region_id, seq_id) then answers with the
 * reply the extend would have had (same format and fds, or its error:
 * -ENOMEM, -EDQUOT ...), or -EAGAIN while it waits.  Until it is
 * collected, every socket command naming the sequence is -EBUSY,
 * REGION_DESTROY of its region too; a ring SEQ_EXTEND within the blocks
 * it already has is not (it only moves the length).
 */
#define KVMM_SEQ_EXTEND_COLLECT 0x1u

/*
 * Reply: the blocks that got pages, block by block, each with
 * pages_per_block page ids ordered layer 0 K, layer 0 V, layer 1 K, ...
 * Fds follow (in this message and KVMM_CMD_FDS continuations) for the
 * pages this process does not hold yet, in the order they appear, each
 * page once.  KVMM_PAGE_HELD in a page id's top bit says "already held".
 */
struct kvmm_seq_extend_reply {
	uint32_t size;
	uint32_t first_block;
	uint32_t nr_blocks;
	uint32_t pages_per_block;
	uint32_t nr_fds; /* total fds, over every message */
	uint32_t len; /* the sequence's length now */
	uint32_t flags; /* KVMM_EXTEND_REPLY_* (ABI 1.17; was reserved, 0) */
	uint32_t pad;
	uint64_t reserved[1];
	uint32_t page_ids[]; /* nr_blocks * pages_per_block */
};

/* kvmm_seq_extend_reply.flags (ABI 1.17) */
#define KVMM_EXTEND_REPLY_PENDING 0x1u

#define KVMM_PAGE_HELD 0x80000000u
/* Most blocks one extend may add (keeps a reply inside KVMM_MSG_MAX). */
#define KVMM_EXTEND_MAX_PAGES 8192

/*
 * SEQ_UNSHARE (ABI 1.20; a daemon before it answers -ENOTTY): copy-on-write
 * of one block of a sequence.  When the sequence's block is a cached block
 * (a prefix open shared it, or reloaded it for every open that waited:
 * the cache's pages, mapped read-only by each reader), kvmmd takes fresh
 * pages for the sequence, charged as an extend's are (the uid's quota,
 * then pool pressure: -EDQUOT, -ENOMEM, parked while victims are copied
 * down), copies the block's bytes into them, and puts them in the
 * sequence in its place; the sequence no longer uses the cached block,
 * whose pages, index entry and other readers are unchanged.  The reply is
 * a SEQ_EXTEND reply (struct kvmm_seq_extend_reply) naming that one block
 * (first_block = block, nr_blocks 1, pages_per_block fresh pages with
 * their fds), which the client maps read-write in place of the old pages;
 * the client unmaps the old pages before it asks (kvmmd drops the
 * session's holds on them with the reply).  A block that is already the
 * sequence's own (its pages no other sequence and no cache entry holds)
 * is answered at once with nr_blocks 0 and no fds: nothing changed.
 * -EINVAL: block >= max_blocks, flags or reserved not 0; -ENODATA: the
 * block has no pages (past the length, or revoked: the revocation is in
 * the client's ring); -EBUSY: an early open's reload into it has not
 * landed, or a prefix open or collected extend still holds the sequence.
 */
struct kvmm_seq_unshare {
	uint32_t size;
	uint32_t region_id;
	uint32_t seq_id;
	uint32_t block;
	uint32_t flags; /* 0 */
	uint32_t pad;
	uint64_t reserved[2];
};

#ifdef __cplusplus
#pragma GCC diagnostic pop
#endif

#endif
