/* SPDX-License-Identifier: MIT */
/*
 * libkvmm: the client side of kvmm, for inference engines.
 *
 * Connect to kvmmd, declare a region (one model's KV layout), open
 * sequences in it and grow them; the library reserves one contiguous
 * virtual range per (layer, K|V) and maps the daemon's physical pages into
 * it on demand, so sequence s of layer l has its K cache at
 * kvmm_seq_k_ptr(r, s, l) for max_tokens tokens, contiguous.
 *
 * Every call returns 0 or a negative errno (kvmm_strerror() names them).
 * A connection may be used by several threads of one process.  Revocations
 * (the daemon taking pages back) are applied at step boundaries
 * (kvmm_step_begin / kvmm_step_end) or by kvmm_process_revocations() when
 * kvmm_poll_fd() becomes readable; also by a kvmm_seq_extend() that finds
 * blocks it needs revoked, or fresh pages the map-ahead thread kept for
 * revoked blocks of its sequence: it applies every pending revocation of the
 * connection (other sequences' too), then maps fresh pages, and the
 * sequence's length stays where the revocation cut it.  An engine
 * that extends while kernels may still read its KV should therefore
 * extend before launching the step's kernels, as a decoder does.
 * libkvmm's own map-ahead thread (map_ahead_blocks) only adds blocks past
 * those mapped: fresh pages it gets for blocks revoked meanwhile are kept
 * aside and mapped where the revocation is applied, so between
 * kvmm_step_begin() and kvmm_step_end() no mapping and no length changes
 * but by the engine's own calls.  That thread blocks every signal: a
 * process-directed signal goes to the engine's threads, whatever mask
 * they set after kvmm_connect().
 *
 * Threads: every call may run concurrently with any other on the same
 * connection but kvmm_disconnect() and kvmm_region_destroy(), which free
 * what the others use: no call on the connection (on the region) may run
 * while they do, nor follow them.  Calls that go through the socket take
 * it one at a time, each for its request and reply.  A call that waits
 * for the daemon's restores (a prefix open that restores blocks from a
 * lower tier; kvmm_seq_wait_ready() without KVMM_WAIT_READY_POLL) does
 * not hold the socket while it waits (ABI 1.16): it sleeps on a word of
 * the shared ring the daemon moves, so the other threads' socket calls,
 * kvmm_process_revocations() and the map-ahead thread go on meanwhile
 * (an extend's slowest took 5-7 ms behind a 2 s open, 1.9 s before).
 * Against a daemon before ABI 1.16 such a call holds the socket for its
 * whole wait, as it did: open with KVMM_PREFIX_OPEN_EARLY and ask
 * kvmm_seq_wait_ready() with KVMM_WAIT_READY_POLL there.  Nor does an
 * extend (kvmm_seq_extend(), the map-ahead thread's) or a prefix open
 * that the daemon parks until demotion copies free pool pages (up to
 * 5 s) hold the socket (ABI 1.17; 5-17 ms behind a 1.2 s park, the whole
 * park before); a call naming that sequence meanwhile (a truncate, a
 * close, a publish, another extend of it) waits for it, as it waited for
 * the socket before.  Against a daemon before 1.17 a parked extend holds
 * the socket for its park.
 *
 * Lifetimes: a region belongs to its connection, and kvmm_disconnect()
 * frees every region of it: a struct kvmm_region pointer is invalid
 * after it (kvmm_region_destroy() on it is a use after free).
 * kvmm_region_destroy() frees the region whatever it returns.
 *
 * When kvmmd dies or restarts: every call that talks to it, on the socket
 * or the ring, returns -ECONNRESET, and goes on doing so (a new kvmmd does
 * not take the connection over); the pages stay mapped and readable, with
 * what was written, until kvmm_disconnect() (calls that answer from the
 * library's own state, kvmm_seq_len(), kvmm_seq_k_ptr() or
 * kvmm_seq_block_pages(), still do).  Their contents are the engine's
 * last copy: a new kvmmd starts with an empty GPU pool.  Disconnect, then
 * connect again (to the new kvmmd) and rebuild the regions.
 */
#ifndef KVMM_KVMM_H
#define KVMM_KVMM_H

#include <stddef.h>
#include <stdint.h>

#include "uapi.h" /* KVMM_PIN_F_*, KVMM_PREFIX_OPEN_*, KVMM_BLOCK_*, ... */

#ifdef __cplusplus
extern "C" {
#endif

struct kvmm_conn;
struct kvmm_region;

struct kvmm_connect_opts {
	size_t size; /* sizeof(struct kvmm_connect_opts) */
	const char *socket_path; /* NULL: $KVMM_SOCKET or /run/kvmm/kvmm.sock */
	const char *name; /* shown by kvmmctl, may be NULL; at most 31
			   * bytes (longer: -ENAMETOOLONG) */
	uint32_t map_ahead_blocks; /* blocks mapped ahead per sequence; the
				    * default 1 when map_ahead_set is 0;
				    * charged to the uid's quota, best
				    * effort (an extend that fits exactly
				    * succeeds without them) */
	uint32_t map_ahead_set; /* 1: use map_ahead_blocks as given (0 off) */
	uint32_t sq_entries; /* 0 = default */
	uint32_t spin_us; /* CQ spin before sleeping; 0 = default */
};

/*
 * Connect after fork(): a connection belongs to the process that made it.
 * In a child of fork() every call on an inherited connection or its
 * regions returns -ECHILD (kvmm_seq_k_ptr() and _v_ptr() give 0) before
 * it touches anything the parent shares (socket, rings, locks another
 * parent thread may have held), and kvmm_disconnect() only drops the
 * child's copy: the session stays the parent's.  Only the region's layout
 * still answers (kvmm_region_tokens_per_block(), kvmm_region_hash_seed()).
 * A child that needs kvmm connects on its own.
 *
 * libkvmm learns of a fork from its pthread_atfork() handler, so that the
 * check costs no system call.  A child made by a raw clone() or
 * syscall(SYS_clone) (or glibc's _Fork()) runs no at-fork handler: its
 * calls are not refused and would act on the parent's session, so it must
 * make none; only kvmm_disconnect(), which compares the pid too, knows
 * the connection is inherited there and drops the child's copy.
 */
int kvmm_connect(const struct kvmm_connect_opts *opts, struct kvmm_conn **out);
/*
 * Unmaps everything, says goodbye, frees the connection.  In a forked
 * child (an inherited connection) it sends nothing, joins no thread and
 * frees only the child's copies: it closes the child's fds, unmaps its
 * copy of the ring and, on the host backend, of the regions' ranges.
 */
void kvmm_disconnect(struct kvmm_conn *conn);

struct kvmm_region_opts {
	size_t size; /* sizeof(struct kvmm_region_opts) */
	uint32_t layers;
	uint32_t kv_heads;
	uint32_t head_dim;
	uint32_t dtype_bytes;
	uint32_t max_seqs;
	uint32_t max_tokens; /* per sequence */
	uint64_t salt;
};

int kvmm_region_create(struct kvmm_conn *conn,
		       const struct kvmm_region_opts *opts,
		       struct kvmm_region **out);
/*
 * Closes the region's sequences, unmaps its ranges and frees it, whatever
 * it returns: an error (-ECONNRESET: kvmmd is gone, the region went with
 * the session) only says the daemon did not confirm.  Never call it again
 * on the same pointer.  In a forked child (-ECHILD) nothing is freed:
 * kvmm_disconnect() frees the child's copy.
 */
int kvmm_region_destroy(struct kvmm_region *region);
uint32_t kvmm_region_tokens_per_block(const struct kvmm_region *region);

int kvmm_seq_open(struct kvmm_region *region, uint32_t *seq);
/* Grow to new_len tokens (the new length, not an increment; <=
 * max_tokens): every layer's K and V are backed up to new_len on return.
 * new_len below the sequence's length is -EINVAL (kvmm_seq_truncate()
 * shortens), the same length a no-op.  When the length ends inside a
 * read-only block (a sequence truncated into its shared prefix, see
 * kvmm_seq_block_readonly()), the new tokens would be written into pages
 * other readers share: the extend unshares that block first
 * (kvmm_seq_block_unshare(): one block copied by kvmmd, its errors, such
 * as -EDQUOT, are the extend's and leave the block shared).  Against a
 * daemon before ABI 1.20 that is -EROFS: truncate to that block's start
 * and recompute its tokens on fresh pages instead.  When a revocation took
 * blocks below new_len meanwhile (applied by this call, or met at the
 * daemon), the range is backed up to new_len on return but
 * kvmm_seq_len() is shorter: the KV from there on is gone, recompute it
 * and extend again. */
int kvmm_seq_extend(struct kvmm_region *region, uint32_t seq, uint32_t new_len);
int kvmm_seq_truncate(struct kvmm_region *region, uint32_t seq,
		      uint32_t new_len);
int kvmm_seq_close(struct kvmm_region *region, uint32_t seq);
/* Length in tokens, or -errno. */
int64_t kvmm_seq_len(struct kvmm_region *region, uint32_t seq);
/* Base address of the sequence's K (V) cache in layer; 0 on bad ids.
 * A CUdeviceptr on the cuda backend, a host pointer on host.  Every slot
 * below max_seqs has its range reserved, open or not: the address is
 * given either way, and only its first kvmm_seq_len() tokens are backed. */
uint64_t kvmm_seq_k_ptr(struct kvmm_region *region, uint32_t seq,
			uint32_t layer);
uint64_t kvmm_seq_v_ptr(struct kvmm_region *region, uint32_t seq,
			uint32_t layer);
/* Daemon page ids of one block: pages_per_block ids (layer 0 K, layer 0
 * V, ...) into ids[n]; returns the count or -errno (-ENODATA: unbacked). */
int kvmm_seq_block_pages(struct kvmm_region *region, uint32_t seq,
			 uint32_t block, uint32_t *ids, uint32_t n);
/*
 * Is a block of the sequence mapped read-only?  1 for a cached block a
 * prefix open shared (KVMM_BLOCK_GPU_SHARED) or reloaded
 * (KVMM_BLOCK_RELOADED_*): the cache's pages, which every reader maps;
 * 0 for the sequence's own (extended, KVMM_BLOCK_RECOMPUTE, an early
 * reload kvmm_seq_wait_ready() reported failed); -ENODATA: not backed.
 * A write into a read-only block faults: SIGSEGV on the host backend, an
 * illegal address error on the GPU.  A block still mapped read-only was
 * never revoked (a revoked block is unmapped, and whatever backs it again
 * is the sequence's own): an engine that recomputes the tokens a
 * revocation took, or all of them when it cannot tell which (an extend
 * that applied one), skips these blocks.
 */
int kvmm_seq_block_readonly(struct kvmm_region *region, uint32_t seq,
			    uint32_t block);

/* ---- ABI 1.20: copy-on-write ---- */
/*
 * Make a read-only block of the sequence its own (SEQ_UNSHARE): kvmmd
 * takes fresh pages for it, charged as an extend's are (the uid's quota,
 * the pool: -EDQUOT, -ENOMEM, -ENOBUFS, once the blocks mapped ahead
 * were given back and it asked again, as an extend does), copies the shared block's bytes
 * into them, and libkvmm maps them read-write at the same addresses, so
 * the engine's pointers stay valid; the cache's copy, which other readers
 * and later prefix opens get, is unchanged.  Then write into it: the
 * block holding a prompt's last token, recomputed after a prefix open
 * that covered every full block of the prompt; a rewind into the shared
 * prefix (kvmm_seq_extend() does it by itself when the length ends inside
 * the block).  The cost is one block's copy (2L pages) in kvmmd and one
 * round trip.  0 also when the block is the sequence's own already (mapped
 * read-write: nothing asked); -ENODATA: not backed (or revoked under us:
 * kvmm_process_revocations() applies it); -EBUSY: its early-open reload
 * has not landed (kvmm_seq_wait_ready() first); -EINVAL: bad ids;
 * -EOPNOTSUPP: a daemon before ABI 1.20, nothing sent.  On an error the
 * block stays read-only and shared.  Not while a step reads the block.
 */
int kvmm_seq_block_unshare(struct kvmm_region *region, uint32_t seq,
			   uint32_t block);

/*
 * Block identity: the hashes that name full blocks in kvmmd's cache.  Two
 * engines share a block only if they name it with the same hash, so they
 * must compute it exactly this way; these functions are the one
 * implementation (the daemon's, kvmm/policy/block_hash.c).
 *
 *   seed = XXH3_64bits(le32(layers) || le32(kv_heads) || le32(head_dim) ||
 *                      le32(dtype_bytes) || le32(tokens_per_block) ||
 *                      model name bytes, without the NUL; none for NULL)
 *   h_i  = XXH3_64bits_withSeed(le64(h_{i-1}) || le64(salt) ||
 *                               le32(tok_0) || ... || le32(tok_{n-1}), seed)
 *
 * with h_{-1} = 0 for the first block of a sequence, tok_0..tok_{n-1} the
 * n = tokens_per_block token ids (32-bit) of block i, `salt` a per-tenant
 * value (0: shared between tenants; e.g. the region's salt) and leN(x)
 * the N-bit integer x in little-endian byte order, whatever the host.
 * Different models, layouts or salts therefore never name each other's
 * blocks, and equal hashes mean an equal prefix up to and including that
 * block.  XXH3 is libxxhash's (XXH3_64bits, 64-bit output).
 *
 * These values are part of the ABI: blocks kept in kvmmd's NVMe tier
 * persist under their hashes across restarts of the daemon and of the
 * engines, so the byte layout above never changes within KVMM_ABI_MAJOR
 * (Documentation/abi.md pins golden values; tests/hash-golden.c checks
 * them).
 *
 * Every function returns 0 (kvmm_hash_chain: a count) or -errno: -EINVAL
 * for a NULL output, a size below the struct's, a zero layout field or
 * tokens_per_block, a block of no tokens, NULL tokens with a count;
 * -E2BIG for a nonzero reserved, or a larger struct (a newer caller's)
 * with nonzero bytes past this one; -ENOTSUP when libkvmm was built
 * without libxxhash (a hash computed otherwise would share nothing).
 * None needs a connection.  A hash of 0 (probability 2^-64) is refused
 * by kvmm_block_publish().
 */
struct kvmm_hash_layout {
	size_t size; /* sizeof(struct kvmm_hash_layout) */
	const char *model; /* model name, e.g. "llama-3-8b"; NULL = "" */
	uint32_t layers;
	uint32_t kv_heads;
	uint32_t head_dim;
	uint32_t dtype_bytes;
	uint32_t tokens_per_block; /* kvmm_region_tokens_per_block() */
	/*
	 * Must be 0 (-E2BIG otherwise).  It names what was tail padding:
	 * a field a newer kvmm.h appended would land here with sizeof still
	 * 40, and a library that skipped these bytes would give two
	 * different layouts one seed.
	 */
	uint32_t reserved;
};

int kvmm_hash_seed(const struct kvmm_hash_layout *layout, uint64_t *seed);
/* The seed of a region's layout (its layers, kv_heads, head_dim,
 * dtype_bytes and tokens_per_block) and model: the layout cannot differ
 * from the region's. */
int kvmm_region_hash_seed(const struct kvmm_region *region, const char *model,
			  uint64_t *seed);
/* One block of ntokens (>= 1) tokens whose previous block is parent (0
 * for block 0). */
int kvmm_block_hash(uint64_t seed, uint64_t parent, uint64_t salt,
		    const uint32_t *tokens, size_t ntokens, uint64_t *hash);
/*
 * The chain of a token sequence: the hashes of its full blocks of
 * tokens_per_block tokens, in order (a partial tail block is not hashed:
 * only full blocks are published).  Writes at most max hashes; returns
 * how many it wrote, min(ntokens / tokens_per_block, max), or -errno
 * (-EOVERFLOW past INT32_MAX).  hashes may be NULL when max is 0.
 */
int kvmm_hash_chain(uint64_t seed, uint64_t salt, const uint32_t *tokens,
		    size_t ntokens, uint32_t tokens_per_block, uint64_t *hashes,
		    size_t max);

/*
 * Content-addressed blocks (kvmmd's block cache).  Publish full blocks
 * [first_block, first_block + nr_blocks) of a sequence under their hashes
 * (the chain h_i = XXH3_64(h_{i-1}, salt, tokens of block i), computed by
 * kvmm_hash_chain() below; parent_hash = h_{first_block-1}, 0 for block
 * 0): they become immutable
 * and other sequences, in any process, can share them.  Returns how many
 * of them the cache now holds, or -errno: -ESTALE (ABI 1.20; -EINVAL from
 * an older daemon) when a revocation took some of the named blocks since
 * the caller looked (apply it, kvmm_process_revocations(), and publish
 * what is left), -EINVAL for a malformed request.
 */
int kvmm_block_publish(struct kvmm_region *region, uint32_t seq,
		       uint32_t first_block, uint32_t nr_blocks,
		       uint64_t parent_hash, const uint64_t *hashes);
/*
 * Open a sequence whose leading blocks are the longest cached prefix of
 * hashes[0..nr_hashes): blocks on the GPU are mapped as they are (the same
 * physical pages: read them, never write them), blocks from lower tiers
 * are restored first.  libkvmm maps these blocks read-only (host:
 * PROT_READ, cuda: CU_MEM_ACCESS_FLAGS_PROT_READ), so a write into one
 * faults (SIGSEGV on the host backend) instead of changing the prefix
 * every other reader gets; the blocks the sequence grows past them are
 * read-write (kvmm_seq_block_readonly()).  On the host backend kvmmd
 * sends their pages read-only as well, so no mapping of them in this
 * process can be made writable (mprotect: EACCES).  *nr_blocks gets the prefix length in blocks; the
 * sequence's length is nr_blocks * tokens_per_block, extend it from there.
 * While blocks are restored the call waits without the connection's
 * socket (ABI 1.16; before, every other thread's socket call and the
 * map-ahead thread waited behind it: Threads, above); the _opts form
 * with KVMM_PREFIX_OPEN_EARLY returns once they are submitted.
 */
int kvmm_seq_open_prefix(struct kvmm_region *region, const uint64_t *hashes,
			 uint32_t nr_hashes, uint32_t *seq,
			 uint32_t *nr_blocks);

/*
 * The same, following the daemon's restore plan: a block in a lower tier
 * may come back as KVMM_BLOCK_RECOMPUTE (fresh pages: the engine must
 * recompute it at its original positions, through all layers, before
 * reading it; it may then publish it).  actions (NULL: not wanted) gets
 * one enum kvmm_block_action (kvmm/uapi.h) per prefix block (room for
 * nr_hashes); the
 * counts are filled on success.  opts may be NULL: kvmm_seq_open_prefix().
 *
 * flags: 0 or KVMM_PREFIX_OPEN_SEGMENTS (kvmm/uapi.h, ABI 1.6): the
 * prefix goes on past blocks in no tier, up to the last block cached in
 * some tier; each block in no tier before it comes back as
 * KVMM_BLOCK_RECOMPUTE (a hole), so the blocks after a hole are reused.
 * Recompute the RECOMPUTE blocks in ascending order (each attends over
 * the blocks before it, which are then all valid) before reading any
 * block after them.  -EOPNOTSUPP from a daemon older than ABI 1.6; any
 * other bit -EINVAL.
 *
 * KVMM_PREFIX_OPEN_EARLY (ABI 1.8, with or without SEGMENTS): the call
 * returns once every block has its pages and the reloads are under way;
 * the KVMM_BLOCK_RELOADED_* blocks are not valid until
 * kvmm_seq_wait_ready() says so, and one whose reload failed is to be
 * recomputed like a RECOMPUTE block.  So a client can recompute the early
 * RECOMPUTE blocks while the later ones still load, waiting only for the
 * blocks below each one it computes.  -EOPNOTSUPP from a daemon older
 * than ABI 1.8.  Without EARLY the call returns when the restores are
 * done; it waits without the connection's socket against a daemon of ABI
 * 1.16 or later, and holds it (stalling the other threads' socket calls
 * and the map-ahead thread: Threads, above) against an older one.
 */
struct kvmm_prefix_opts {
	uint32_t size; /* sizeof(struct kvmm_prefix_opts) */
	/* 0 or KVMM_PREFIX_OPEN_SEGMENTS and/or KVMM_PREFIX_OPEN_EARLY */
	uint32_t flags;
	uint8_t *actions; /* in: room for nr_hashes entries, or NULL */
	/* out */
	uint32_t shared, reloaded_host, reloaded_nvme, recompute;
};

int kvmm_seq_open_prefix_opts(struct kvmm_region *region,
			      const uint64_t *hashes, uint32_t nr_hashes,
			      uint32_t *seq, uint32_t *nr_blocks,
			      struct kvmm_prefix_opts *opts);
/* "gpu-shared", "reloaded-host", "reloaded-nvme", "recompute" */
const char *kvmm_block_action_string(uint8_t action);

/*
 * Ask what the cache holds of a chain without opening a sequence (ABI
 * 1.19; a router or scheduler choosing the replica, or the request, that
 * needs least recomputed): the length, in blocks, of the longest cached
 * prefix of hashes (named as region's, its salt and kvmmd's
 * --cache-scope applied as for an open: another uid's blocks are never
 * seen), and in tiers[0..that) (NULL: not wanted; room for nr_hashes)
 * one enum kvmm_query_tier (kvmm/uapi.h) per block: KVMM_QUERY_GPU (an
 * open shares it), _HOST or _NVME (an open reloads it), _MOVING (being
 * copied between tiers: an open waits for it).  Nothing changes: no
 * restore, no pin, no policy access (the eviction order stays as it
 * was), no hit counted in TIER_STATS or telemetry.  The answer is a
 * snapshot; an open that follows may find less.  nr_hashes is cut as an
 * open's is (the region's blocks).  flags must be 0.  Returns the
 * number of blocks (0 before the cache's first use) or -errno:
 * -EOPNOTSUPP from a daemon older than ABI 1.19, -ENOENT no such region
 * (-EINVAL for no hashes, more than KVMM_PREFIX_MAX_BLOCKS, or flags).
 */
int kvmm_prefix_query(struct kvmm_region *region, const uint64_t *hashes,
		      uint32_t nr_hashes, uint8_t *tiers, uint32_t flags);
/* "gpu", "host", "nvme", "moving" */
const char *kvmm_query_tier_string(uint8_t tier);

/*
 * After a KVMM_PREFIX_OPEN_EARLY open: wait until no block below
 * upto_block of the sequence is still being reloaded (with
 * KVMM_WAIT_READY_POLL in flags: do not wait; *pending, if not NULL, gets
 * how many still are).  Returns how many blocks below upto_block failed to
 * reload (their pages hold garbage and are the sequence's own: this call
 * makes them writable, mapped read-only like every reloaded block until
 * then; recompute them, in ascending order, before reading past them;
 * asking again reports them again), their
 * numbers in failed[0..max_failed), ascending; or -errno: -ERANGE when a
 * block below upto_block has no pages (-ESTALE, ABI 1.20: a revocation
 * took it; apply it), -ENOENT no such sequence, -EINVAL
 * upto_block past the region's blocks, -EOPNOTSUPP a daemon older than
 * ABI 1.8.  A sequence not opened early is ready at once (0).  While it
 * waits the connection's socket is free for other threads (ABI 1.16: it
 * asks with KVMM_WAIT_READY_POLL and sleeps on the ring's notify word
 * between asks, which kvmmd moves when a block settles); against an
 * older daemon the socket is busy for the whole wait.
 */
int kvmm_seq_wait_ready(struct kvmm_region *region, uint32_t seq,
			uint32_t upto_block, uint32_t flags, uint32_t *failed,
			uint32_t max_failed, uint32_t *pending);

/*
 * Pin a cached block (by hash) where it is, for this connection: it is not
 * demoted or dropped until kvmm_block_unpin(), the end of the connection,
 * or, with KVMM_PIN_F_TTL in opts->flags, ttl_ns from now (an agent
 * waiting on a tool call).  With KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE (ABI
 * 1.3; -EOPNOTSUPP from an older daemon) the block stays cached but may move
 * down a tier when its tier has nothing else to evict, rather than hold
 * pages a running request needs.  KVMM_PIN_F_PRIORITY sets the block's priority
 * (-128..127) as well; KVMM_PIN_F_PRIORITY_ONLY sets only that (flags in
 * kvmm/uapi.h).  Pinning a hash again replaces the earlier pin.  opts may
 * be NULL (a plain pin).  -ENOENT: not cached; -EDQUOT: this connection
 * holds its quota of pins (opts->pin_quota says how many).
 */
struct kvmm_pin_opts {
	uint32_t size; /* sizeof(struct kvmm_pin_opts) */
	uint32_t flags; /* KVMM_PIN_F_* */
	uint64_t ttl_ns; /* with KVMM_PIN_F_TTL */
	int32_t priority; /* with KVMM_PIN_F_PRIORITY */
	/* out */
	uint32_t tier; /* where the block is: 0 GPU, 1 host, 2 NVMe */
	uint32_t pins, pin_quota; /* this connection's pins now, its quota */
	uint64_t expires_ns; /* TTL pins: the daemon's CLOCK_MONOTONIC */
};

int kvmm_block_pin(struct kvmm_conn *conn, uint64_t hash,
		   struct kvmm_pin_opts *opts);
int kvmm_block_unpin(struct kvmm_conn *conn, uint64_t hash);
/*
 * kvmm_block_pin() of nr_hashes hashes (1..KVMM_PIN_MANY_MAX) in one
 * round trip (ABI 1.19; -EOPNOTSUPP from an older daemon: pin one by
 * one there), every one with opts' flags, ttl_ns and priority (opts may
 * be NULL: plain pins).  Each is pinned, in order, as kvmm_block_pin()
 * would pin it, against the same --pin-quota: results[i] (NULL: not
 * wanted; room for nr_hashes) gets hash i's tier (0 GPU, 1 host, 2 NVMe)
 * or the -errno its own pin would have had (-ENOENT not cached, -EDQUOT
 * past the quota, -EINVAL for hash 0).  Returns how many were pinned, or
 * -errno for the whole call (bad flags, as kvmm_block_pin()'s: nothing
 * pinned); opts->pins, pin_quota and expires_ns are filled (tier 0).
 */
int kvmm_block_pin_many(struct kvmm_conn *conn, const uint64_t *hashes,
			uint32_t nr_hashes, struct kvmm_pin_opts *opts,
			int32_t *results);

/* A step uses every open sequence of the connection; revocations are
 * applied before a step begins and after it ends. */
int kvmm_step_begin(struct kvmm_conn *conn);
int kvmm_step_end(struct kvmm_conn *conn);

/* Readable when the daemon has posted revocations (or, ABI 1.19, asks
 * for the blocks mapped ahead: kvmm_process_revocations() answers). */
int kvmm_poll_fd(struct kvmm_conn *conn);
/* Apply pending revocations now; returns how many mappings were given
 * back: one per revocation entry applied, so a page mapped at two places
 * counts twice (kvmm_stats.pages_revoked adds the same count, but for
 * the pages an extend already counted when it replaced them).  A call
 * applies at most 64 revocation requests; when more are pending,
 * kvmm_poll_fd() stays readable for the next call.  Safe from any thread,
 * as are kvmm_step_begin() and kvmm_step_end().  It (and so each step
 * boundary) also answers kvmmd's requests for the blocks mapped ahead of
 * the sequences' lengths, which an extend of another process of the uid
 * lacks (ABI 1.19): those sequences are truncated to their lengths,
 * never below (kvmm_stats.blocks_lent_on_request counts the blocks). */
int kvmm_process_revocations(struct kvmm_conn *conn);

/* A no-op round trip (through the ring, or the socket with via_socket). */
int kvmm_nop(struct kvmm_conn *conn, int via_socket);

/*
 * This connection's counters and the daemon's view of its pages (one
 * STATS round trip).  An out struct, as kvmm_daemon_info is: st->size is
 * set by the caller, at least KVMM_STATS_SIZE_VER0 (-EINVAL below it: no
 * caller ever had a smaller struct, and a size inside a field would get
 * half of it); libkvmm fills min(its size, the caller's) bytes and sets
 * size to that, so a newer caller's bytes past libkvmm's are left as they
 * were and size says where libkvmm's end.
 */
struct kvmm_stats {
	size_t size; /* sizeof(struct kvmm_stats), set by the caller */
	uint32_t session_id;
	uint32_t backend;
	uint64_t page_size;
	uint64_t extends; /* kvmm_seq_extend calls */
	uint64_t extend_waits; /* ... that had to wait for mapping */
	uint64_t pages_imported; /* fds received and imported */
	uint64_t pages_mapped; /* mappings made */
	uint64_t pages_revoked; /* mappings given back on revocation */
	uint64_t map_ahead_blocks; /* blocks the background thread mapped */
	uint64_t cmds_ring, cmds_socket;
	uint64_t pages_held; /* daemon's view (one STATS round trip) */
	/* since 6 December (Documentation/lifecycle.md, "In the client
	 * process"): blocks mapped ahead of other sequences given back for an
	 * extend that was short of blocks; extends that succeeded only
	 * then; times the map-ahead thread held off after a shortage */
	uint64_t blocks_lent;
	uint64_t extends_lent;
	uint64_t map_ahead_backoffs;
	/* since ABI 1.19: blocks mapped ahead given back because kvmmd
	 * asked (an extend of another process of the uid was short of
	 * blocks; answered at a boundary, kvmm_process_revocations()) */
	uint64_t blocks_lent_on_request;
	/* since ABI 1.20: shared blocks made this process's own
	 * (kvmm_seq_block_unshare(), or an extend from inside one), each a
	 * block copied by kvmmd */
	uint64_t blocks_unshared;
};

int kvmm_get_stats(struct kvmm_conn *conn, struct kvmm_stats *st);

/*
 * kvmmd's cache counters (one TIER_STATS round trip, any session): the
 * whole daemon's, every uid's opens together, not this connection's:
 * prefix opens, blocks asked and hit, hits per tier (tiers[0] GPU, [1]
 * host, [2] NVMe), demotions, restores, drops (kvmm/uapi.h says what
 * each field counts).  size is sizeof(*st) as the caller was built (at
 * least the ABI 1.6 reply, offsetof(..., prefix_holes); -EINVAL below);
 * libkvmm fills min(size, its own) bytes, the fields an older daemon
 * does not send as 0, and st->size says how many bytes the daemon sent
 * (up to that).  PREFIX_QUERY is counted nowhere here.
 */
int kvmm_tier_stats(struct kvmm_conn *conn, struct kvmm_tier_stats_reply *st,
		    size_t size);
/*
 * ABI 1.21: the same for the cache of one block size alone, blocks of
 * block_pages pages (a draft beside its target model: one cache a size):
 * st->block_pages says which, a tier's block_bytes is that size's, and
 * st->sizes[0..nr_sizes) (in any reply of a 1.21 daemon) the sizes
 * cached.  block_pages 0 is kvmm_tier_stats(), every size summed.
 * -ENOENT: no cache has that size; -EOPNOTSUPP: a daemon before 1.21
 * (nothing sent) and block_pages not 0.
 */
int kvmm_tier_stats_size(struct kvmm_conn *conn, uint32_t block_pages,
			 struct kvmm_tier_stats_reply *st, size_t size);
const char *kvmm_strerror(int err);

/*
 * Option struct sizes.  Each option struct starts with its size, so that
 * one libkvmm.so.1 serves callers built against older and newer kvmm.h
 * (the openat2() and perf_event_attr rule): a size below the struct's
 * first published size (below) is -EINVAL; a smaller struct than this
 * library's (an older caller) is read and written only up to its size,
 * the fields it lacks taken as 0; a larger one (a newer caller) is
 * accepted when every byte past what this library knows is 0, else
 * -E2BIG (it asks for something this library cannot do), and out fields
 * are written only up to this library's size.  So set .size =
 * sizeof(the struct) and zero the struct (an initializer does) before
 * setting fields.  New fields only ever go at the end, and no struct ends
 * in padding (a field appended there would keep the size, and an older
 * library would not see it): a reserved field names it.  The same holds
 * for kvmm_connect, kvmm_region_create, kvmm_block_pin,
 * kvmm_seq_open_prefix_opts and kvmm_hash_seed (Documentation/abi.md,
 * "libkvmm's option structs").
 */
#define KVMM_CONNECT_OPTS_SIZE_VER0 24 /* up to name */
#define KVMM_REGION_OPTS_SIZE_VER0 32 /* up to max_tokens */
#define KVMM_HASH_LAYOUT_SIZE_VER0 40
#define KVMM_PREFIX_OPTS_SIZE_VER0 32
#define KVMM_PIN_OPTS_SIZE_VER0 40
#define KVMM_DAEMON_INFO_SIZE_VER0 64
#define KVMM_STATS_SIZE_VER0 96 /* out: up to pages_held */
#define KVMM_STATS_SIZE_VER1 120 /* up to map_ahead_backoffs (6 December) */
#define KVMM_STATS_SIZE_VER2 128 /* up to blocks_lent_on_request (ABI 1.19) */
#define KVMM_STATS_SIZE_VER3 136 /* up to blocks_unshared (ABI 1.20) */

/*
 * What the daemon said when the connection was made (its HELLO reply), so
 * that a client can check the daemon's ABI minor before it uses a feature
 * a later minor added (Documentation/abi.md lists them; libkvmm itself
 * answers -EOPNOTSUPP for a flag the daemon's minor lacks).  No round
 * trip.  info->size is set by the caller (at least
 * KVMM_DAEMON_INFO_SIZE_VER0); libkvmm fills min(its size, the caller's)
 * bytes and sets size to that.  On a connection inherited through fork()
 * it is -ECHILD like every other call, and writes nothing.
 */
struct kvmm_daemon_info {
	size_t size; /* sizeof(struct kvmm_daemon_info), set by the caller */
	uint32_t abi_major; /* KVMM_ABI_MAJOR */
	/* the daemon's; may differ from KVMM_ABI_MINOR (under the test knob
	 * KVMM_TEST_HELLO_MINOR=N, the older of it and N: abi.md, HELLO) */
	uint32_t abi_minor;
	uint32_t backend; /* KVMM_BACKEND_HOST or KVMM_BACKEND_CUDA */
	uint32_t revoke_timeout_ms; /* revocations not acknowledged by then
				     * end the connection */
	uint64_t page_size;
	uint64_t pages_total; /* the daemon's page pool */
	uint64_t quota_pages; /* this uid's quota at connect, 0 = none */
	uint8_t gpu_uuid[16]; /* the served GPU; all 0 on the host backend
			       * and from a daemon before ABI 1.13 */
};

int kvmm_get_daemon_info(struct kvmm_conn *conn, struct kvmm_daemon_info *info);

#ifdef __cplusplus
}
#endif

#endif
