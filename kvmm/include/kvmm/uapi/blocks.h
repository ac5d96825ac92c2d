/* SPDX-License-Identifier: MIT */
/*
 * kvmm wire ABI, blocks and prefixes (commands 0x50-0x6f but
 * TIER_STATS, in tiers.h): BLOCK_PUBLISH, PREFIX_OPEN and its per-block
 * actions, PREFIX_QUERY, BLOCK_PIN, BLOCK_PIN_MANY and BLOCK_UNPIN; and
 * SEQ_WAIT_READY (0x24), which waits for a PREFIX_OPEN's reloads.
 *
 * Part of <kvmm/uapi.h>, which includes it; include that one (it has
 * the ABI version, the command numbers and the message header).  It
 * compiles alone too (tests/header-alone.sh).
 */
#ifndef KVMM_UAPI_BLOCKS_H
#define KVMM_UAPI_BLOCKS_H

#include <stdint.h>

/* A reply's variable part is a C99 flexible array member, which ISO C++
 * lacks (g++ and clang++ accept it, but warn under -pedantic): quiet that
 * warning for this header only, so an engine built with -pedantic -Werror
 * can include it (tests/header-alone.sh). */
#ifdef __cplusplus
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif

/*
 * BLOCK_PUBLISH: full blocks [first_block, first_block + nr_blocks) of a
 * sequence are immutable from now on and are named by hashes[] (the chain
 * h_i = XXH3_64(h_{i-1}, salt, tokens of block i): kvmm_hash_chain() and
 * kvmm_region_hash_seed() in kvmm.h compute it; Documentation/abi.md,
 * "Block identity").  Every block must be backed and full
 * ((b + 1) * tokens_per_block <= the sequence's length); a hash of 0 is
 * refused.  The message is this struct followed by nr_blocks u64 hashes
 * (size covers the struct only).  Reply: kvmm_block_publish_reply.  A
 * hash cached on the GPU already is a duplicate; one cached idle in the
 * host or NVMe tier (ABI 1.4) takes the published pages as its GPU copy
 * and its lower copy is freed (published and promoted).
 */
struct kvmm_block_publish {
	uint32_t size;
	uint32_t region_id;
	uint32_t seq_id;
	uint32_t first_block;
	uint32_t nr_blocks; /* <= KVMM_PREFIX_MAX_BLOCKS */
	uint32_t flags; /* must be 0 */
	uint64_t parent_hash; /* hash of block first_block - 1, 0 for none */
	uint64_t reserved[2];
	uint64_t hashes[];
};

struct kvmm_block_publish_reply {
	uint32_t size;
	uint32_t published; /* now cached under their hash */
	uint32_t duplicates; /* the cache already held that content */
	uint32_t not_cached; /* no room (every cached block in use) */
	/* ABI 1.4 (was reserved, 0 before): of `published`, the blocks whose
	 * content was cached idle in the host or NVMe tier: the published
	 * pages became its GPU copy and the lower copy was freed (a block a
	 * restore plan had the client recompute) */
	uint32_t promoted;
	uint32_t pad;
	uint64_t reserved[1];
};

#define KVMM_PREFIX_MAX_BLOCKS 4096

/*
 * PREFIX_OPEN: open a new sequence whose leading blocks are the longest
 * cached prefix of hashes[] (the message: this struct, then nr_hashes
 * u64).  GPU-resident blocks are mapped as they are (the same physical
 * pages as every other sequence using them: read-only by contract);
 * blocks in the host or NVMe tier are restored into fresh pages first.
 * The sequence's length is nr_blocks * tokens_per_block; the client
 * extends it from there (a tail block is never shared).  Reply:
 * kvmm_prefix_open_reply, page ids and fds as for SEQ_EXTEND (blocks
 * 0..nr_blocks-1); on the host backend the fds of shared and restored
 * blocks are read-only (O_RDONLY: a MAP_SHARED mapping of them cannot be
 * writable) for a client whose HELLO says abi_minor >= 15 (an older one
 * gets them read-write, as before), those of RECOMPUTE blocks and of an
 * early open's blocks still loading read-write.
 *
 * With KVMM_PREFIX_OPEN_ACTIONS the daemon follows a restore plan
 * (kvmmd --restore-mode): a lower-tier block is either restored as above
 * or mapped on fresh pages the client must recompute (at its original
 * positions) before reading them; the reply then carries one u8 enum
 * kvmm_block_action per block after page_ids[], padded with zeros to a
 * multiple of 4 bytes, and nr_recompute counts the RECOMPUTE ones.
 * Without the flag every block comes back with its data (reloaded).
 *
 * KVMM_PREFIX_OPEN_SEGMENTS (ABI 1.6, only with KVMM_PREFIX_OPEN_ACTIONS,
 * alone -EINVAL; a daemon before 1.6 answers it -EINVAL): the walk goes on
 * past blocks in no tier.  The reply covers blocks 0..the last one found
 * in some tier; each block in no tier among them comes back as
 * KVMM_BLOCK_RECOMPUTE on fresh pages (a hole the client recomputes at
 * its original positions, attending over the blocks before it), the
 * others as without it.  The plan is made with Multi-Segment Attention
 * allowed, so a cached block after a hole may come back as RECOMPUTE too.
 */
#define KVMM_PREFIX_OPEN_ACTIONS 0x1u
#define KVMM_PREFIX_OPEN_SEGMENTS 0x2u
/*
 * KVMM_PREFIX_OPEN_EARLY (ABI 1.8, only with KVMM_PREFIX_OPEN_ACTIONS,
 * alone -EINVAL): the reply comes as soon as every block of the prefix has
 * its pages and its reloads are submitted, not when they are done.  The
 * RELOADED_* blocks' pages are not valid yet: SEQ_WAIT_READY says when
 * they are and which reloads failed (those blocks are the client's to
 * recompute, like holes).  Until a block's reload is done a BLOCK_PUBLISH
 * naming it is -EBUSY; SEQ_EXTEND, SEQ_TRUNCATE and SEQ_CLOSE work as
 * usual (a truncated or closed sequence's reloads nobody else waits for
 * are called off when they have not started).
 */
#define KVMM_PREFIX_OPEN_EARLY 0x4u
/*
 * KVMM_PREFIX_OPEN_COLLECT (ABI 1.16, with any of the flags above or
 * none; a daemon before 1.16 answers it -EINVAL): an open whose reply
 * would wait (restores from a lower tier, a block being demoted; since
 * ABI 1.17 also room its restores wait for: parked for pool pages, see
 * KVMM_SEQ_EXTEND_COLLECT) is
 * answered at once with an empty reply (nr_blocks 0, no fds) whose flags
 * say KVMM_PREFIX_REPLY_PENDING, seq_id and seq_gen naming the sequence
 * the open reserved; the session's socket is read meanwhile.  When the
 * reply is ready the daemon bumps the ring's notify word (struct
 * kvmm_ring_offsets.notify, FUTEX_WAKE on it); PREFIX_COLLECT
 * (kvmm_region_ref: region_id, seq_id) then answers with the reply the
 * open would have had (same format, counts, actions and fds), or -EAGAIN
 * while it is not ready, or the error it ended with (a parked one's
 * -ENOMEM after 5 s; its sequence is closed then).  Until it is
 * collected, every command naming the sequence is -EBUSY, REGION_DESTROY
 * of its region too.
 */
#define KVMM_PREFIX_OPEN_COLLECT 0x8u
/* kvmm_prefix_open_reply.flags (ABI 1.16) */
#define KVMM_PREFIX_REPLY_PENDING 0x1u

enum kvmm_block_action {
	KVMM_BLOCK_GPU_SHARED = 1, /* mapped as it is, zero-copy */
	KVMM_BLOCK_RELOADED_HOST = 2, /* restored from the host tier */
	KVMM_BLOCK_RELOADED_NVME = 3, /* restored from the NVMe tier */
	KVMM_BLOCK_RECOMPUTE = 4, /* fresh pages: the client recomputes */
};

struct kvmm_prefix_open {
	uint32_t size;
	uint32_t region_id;
	uint32_t nr_hashes; /* <= KVMM_PREFIX_MAX_BLOCKS */
	/* 0 or KVMM_PREFIX_OPEN_ACTIONS [| _SEGMENTS] [| _EARLY] */
	uint32_t flags;
	uint64_t reserved[2];
	uint64_t hashes[];
};

struct kvmm_prefix_open_reply {
	uint32_t size;
	uint32_t seq_id;
	uint32_t nr_blocks; /* cached prefix length in blocks (with
			     * _SEGMENTS: holes included) */
	uint32_t pages_per_block;
	uint32_t nr_fds;
	uint32_t len; /* tokens */
	/* where the blocks were (reloaded ones only; recomputed blocks are
	 * counted in nr_recompute) */
	uint32_t from_gpu, from_host, from_nvme;
	uint32_t nr_recompute; /* 0 unless KVMM_PREFIX_OPEN_ACTIONS */
	uint32_t seq_gen; /* as in kvmm_seq_open_reply */
	uint32_t flags; /* KVMM_PREFIX_REPLY_* (ABI 1.16; was pad, 0) */
	uint64_t reserved[1];
	uint32_t page_ids[]; /* nr_blocks * pages_per_block, KVMM_PAGE_HELD */
	/* then, with KVMM_PREFIX_OPEN_ACTIONS: u8 actions[nr_blocks], padded
	 * to 4 bytes */
};

/*
 * PREFIX_QUERY (ABI 1.19): how long a prefix of hashes[] the cache holds
 * and in which tier each of its blocks is, without opening anything (a
 * router or scheduler asking where a prompt is cached).  The message is
 * laid out as PREFIX_OPEN's and its hashes are named the same way (the
 * region's salt, then --cache-scope: a uid learns only of its own
 * blocks); nr_hashes is bounded as there (<= KVMM_PREFIX_MAX_BLOCKS, then
 * cut to the region's max_blocks and to KVMM_EXTEND_MAX_PAGES pages).
 * The answer is the leading blocks found in some tier, as a prefix open
 * without KVMM_PREFIX_OPEN_SEGMENTS would walk them; nothing is changed:
 * no restore, no pin, no policy access (what the cache keeps, and in
 * which order it evicts, is the same as without the query), no TIER_STATS
 * or telemetry count.  It is a snapshot: a block may move or go before an
 * open that follows it.  Before the cache's first use (no region has
 * opened it, tiers unset) and for a region whose blocks are not the
 * cache's size, the answer is 0 blocks.
 */
enum kvmm_query_tier {
	KVMM_QUERY_GPU = 0, /* on the GPU: an open shares it */
	KVMM_QUERY_HOST = 1, /* in host memory: an open reloads it */
	KVMM_QUERY_NVME = 2, /* on NVMe: an open reloads it */
	/* being copied between tiers (a demotion or a restore in flight, or
	 * waiting for a slot): an open waits for the copy */
	KVMM_QUERY_MOVING = 3,
};

struct kvmm_prefix_query {
	uint32_t size;
	uint32_t region_id;
	uint32_t nr_hashes; /* <= KVMM_PREFIX_MAX_BLOCKS */
	uint32_t flags; /* must be 0 */
	uint64_t reserved[2];
	uint64_t hashes[];
};

struct kvmm_prefix_query_reply {
	uint32_t size;
	uint32_t nr_blocks; /* cached prefix length in blocks */
	/* of nr_blocks, how many are in each enum kvmm_query_tier */
	uint32_t gpu, host, nvme, moving;
	uint64_t reserved[2];
	/* then u8 tiers[nr_blocks] (enum kvmm_query_tier), padded with
	 * zeros to a multiple of 4 bytes */
};

/*
 * SEQ_WAIT_READY (ABI 1.8): the reply comes when no block below upto_block
 * of the sequence is still being reloaded for a KVMM_PREFIX_OPEN_EARLY
 * (at once when none is; with KVMM_WAIT_READY_POLL at once anyway, saying
 * how many still are).  It lists the blocks below upto_block whose reload
 * failed (every time it is asked, until the sequence is closed or cut
 * below them): their pages hold garbage, the client recomputes them at
 * their original positions.  Every block below upto_block must have pages
 * (-ERANGE otherwise, also when a revocation took one while the call
 * waited); upto_block > the region's max_blocks is -EINVAL.  The session's
 * socket is not read while the call waits (replies keep request order).
 */
#define KVMM_WAIT_READY_POLL 0x1u

struct kvmm_seq_wait_ready {
	uint32_t size;
	uint32_t region_id;
	uint32_t seq_id;
	uint32_t upto_block;
	uint32_t flags; /* 0 or KVMM_WAIT_READY_POLL */
	uint32_t pad;
	uint64_t reserved[2];
};

struct kvmm_seq_wait_ready_reply {
	uint32_t size;
	uint32_t upto_block; /* as asked */
	uint32_t nr_pending; /* blocks below it still loading (POLL only) */
	uint32_t nr_failed;
	uint64_t reserved[1];
	uint32_t failed[]; /* nr_failed block numbers, ascending */
};

/*
 * BLOCK_PIN: keep a cached block where it is (in whichever tier holds it)
 * for this session.  Without flags the pin lasts until BLOCK_UNPIN or the
 * end of the session; with KVMM_PIN_F_TTL it ends by itself ttl_ns after
 * the daemon received it (CLOCK_MONOTONIC: agents waiting on a tool call).
 * KVMM_PIN_F_PRIORITY also gives the block a priority (-128..127: higher
 * is kept longer by policies that rank by value, kvmmd --cache-policy
 * asym); with KVMM_PIN_F_PRIORITY_ONLY it is only that, no pin.  A TTL
 * record with KVMM_PIN_F_DEMOTE (ABI 1.3) keeps the block cached but not
 * in place: when its tier has nothing else to evict, the block may move
 * down a tier (a reload later, not a recompute) instead of the tier
 * refusing a running request's pages; it is not dropped from the last
 * tier before the TTL passes, unless every lower tier is pinned full.  One
 * record per (session, hash): pinning a hash again replaces the record.
 * Errors: -ENOENT the hash is not cached, -EINVAL bad flags/fields,
 * -ERANGE ttl_ns > KVMM_PIN_TTL_MAX_NS or priority out of range, -EDQUOT
 * the session holds its quota of records (kvmmd --pin-quota).
 */
#define KVMM_PIN_F_TTL 0x1u
#define KVMM_PIN_F_PRIORITY 0x2u
#define KVMM_PIN_F_PRIORITY_ONLY 0x4u /* with PRIORITY, without TTL */
#define KVMM_PIN_F_DEMOTE 0x8u /* with TTL: may move down a tier (ABI 1.3) */
#define KVMM_PIN_TTL_MAX_NS (24ull * 3600 * 1000000000) /* one day */

struct kvmm_block_pin {
	uint32_t size;
	uint32_t flags; /* KVMM_PIN_F_* */
	uint64_t hash;
	uint64_t ttl_ns; /* KVMM_PIN_F_TTL: 1..KVMM_PIN_TTL_MAX_NS; else 0 */
	int32_t priority; /* KVMM_PIN_F_PRIORITY: -128..127; else 0 */
	uint32_t pad;
	uint64_t reserved[2];
};

struct kvmm_block_pin_reply {
	uint32_t size;
	uint32_t tier; /* where the block is: 0 GPU, 1 host, 2 NVMe */
	uint32_t pins; /* this session's pin records now */
	uint32_t pin_quota; /* ... and how many it may hold */
	uint64_t expires_ns; /* TTL pins: the daemon's CLOCK_MONOTONIC; else 0 */
	uint64_t reserved[2];
};

/*
 * BLOCK_PIN_MANY (ABI 1.19): BLOCK_PIN of nr_hashes hashes in one round
 * trip (a conversation's blocks), with one flags/ttl_ns/priority for all
 * (checked as BLOCK_PIN's: an error there fails the whole request, before
 * any pin).  Each hash is pinned in order exactly as a BLOCK_PIN of it
 * would be (same records, same --pin-quota: once the session holds its
 * quota, the rest are -EDQUOT), and the reply says per hash the tier
 * (0 GPU, 1 host, 2 NVMe) or the -errno a BLOCK_PIN would have got
 * (-ENOENT not cached, -EDQUOT, -EINVAL for hash 0).  The message: this
 * struct, then nr_hashes u64; the reply: kvmm_block_pin_many_reply, then
 * nr_hashes s32 results padded with zeros to a multiple of 8 bytes.
 */
#define KVMM_PIN_MANY_MAX KVMM_PREFIX_MAX_BLOCKS

struct kvmm_block_pin_many {
	uint32_t size;
	uint32_t flags; /* KVMM_PIN_F_*, for every hash */
	uint32_t nr_hashes; /* 1..KVMM_PIN_MANY_MAX */
	int32_t priority; /* KVMM_PIN_F_PRIORITY: -128..127; else 0 */
	uint64_t ttl_ns; /* KVMM_PIN_F_TTL: 1..KVMM_PIN_TTL_MAX_NS; else 0 */
	uint64_t reserved[2];
	uint64_t hashes[];
};

struct kvmm_block_pin_many_reply {
	uint32_t size;
	uint32_t nr_hashes; /* as asked */
	uint32_t pinned; /* results that are a tier (>= 0) */
	uint32_t pins; /* this session's pin records now */
	uint32_t pin_quota; /* ... and how many it may hold */
	uint32_t pad;
	uint64_t expires_ns; /* TTL pins: the daemon's CLOCK_MONOTONIC; else 0 */
	uint64_t reserved[2];
	int32_t results[]; /* per hash: tier, or -errno */
};

/* BLOCK_UNPIN: drop this session's record for a hash (-ENOENT: none, or
 * its TTL has passed). */
struct kvmm_block_unpin {
	uint32_t size;
	uint32_t flags; /* must be 0 */
	uint64_t hash;
	uint64_t reserved[2];
};

#ifdef __cplusplus
#pragma GCC diagnostic pop
#endif

#endif
