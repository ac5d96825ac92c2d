/* SPDX-License-Identifier: MIT */
/*
 * kvmm wire ABI: what travels between kvmmd and its clients.
 *
 * Two channels, one session:
 *   - a SOCK_SEQPACKET Unix socket for setup, fd passing (SCM_RIGHTS) and
 *     slow commands: one message = struct kvmm_msg_hdr + one command struct;
 *   - per-session shared memory (a memfd handed over by HELLO) holding a
 *     submission ring (SQ), a completion ring (CQ) and a revocation ring
 *     (RQ), io_uring style: power-of-two entries, free-running 32-bit
 *     head/tail, offsets of every field published in struct
 *     kvmm_ring_offsets so the layout can grow.  Doorbells are eventfds.
 *
 * Rules every struct follows: it starts with its own size (u32), uses only
 * fixed-width types, has explicit padding, and reserved fields that must be
 * zero.  A receiver accepts a struct larger than the one it knows when the
 * extra bytes are zero (-E2BIG otherwise) and a smaller one down to the
 * command's first published size (-EINVAL below that), like openat2().
 *
 * Commands are numbered like ioctls; the number ranges are fixed:
 *   0x01-0x0f  session          0x10-0x1f  regions
 *   0x20-0x2f  sequences        0x30-0x3f  steps and revocation
 *   0x40-0x4f  statistics       0x50-0x6f  blocks, prefixes, tiers
 *   0x80-0x9f  administration   (see Documentation/abi.md)
 * Every reply carries 0 or a negative errno in kvmm_msg_hdr.status.
 */
#ifndef KVMM_UAPI_H
#define KVMM_UAPI_H

#include <stdint.h>

/* A reply's variable part is a C99 flexible array member, which ISO C++
 * lacks (g++ and clang++ accept it, but warn under -pedantic): quiet that
 * warning for this header only, so an engine built with -pedantic -Werror
 * can include it (tests/header-alone.sh). */
#ifdef __cplusplus
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif

#define KVMM_ABI_MAJOR 1
#define KVMM_ABI_MINOR 22

/* kvmm_hello_reply.backend, kvmm_status_reply.backend, and in kvmm.h
 * struct kvmm_stats.backend and struct kvmm_daemon_info.backend: where
 * the daemon's pages live (vmm/vmm.h's enum vmm_backend_kind). */
#define KVMM_BACKEND_HOST 0u /* host memory (memfds): no GPU */
#define KVMM_BACKEND_CUDA 1u /* GPU memory through the CUDA VMM API */

/* Largest socket message either side sends or accepts. */
#define KVMM_MSG_MAX 65536
/* Most fds in one message (the kernel's SCM_MAX_FD is 253). */
#define KVMM_MSG_MAX_FDS 253

enum kvmm_cmd {
	/* session */
	KVMM_CMD_HELLO = 0x01,
	KVMM_CMD_BYE = 0x02,
	KVMM_CMD_NOP = 0x03,
	KVMM_CMD_FDS = 0x04, /* daemon -> client: more fds of a reply */
	/* regions */
	KVMM_CMD_REGION_CREATE = 0x10,
	KVMM_CMD_REGION_DESTROY = 0x11,
	/* sequences */
	KVMM_CMD_SEQ_OPEN = 0x20,
	KVMM_CMD_SEQ_EXTEND = 0x21,
	KVMM_CMD_SEQ_TRUNCATE = 0x22,
	KVMM_CMD_SEQ_CLOSE = 0x23,
	KVMM_CMD_SEQ_WAIT_READY = 0x24,
	KVMM_CMD_SEQ_UNSHARE = 0x25, /* ABI 1.20 */
	/* steps and revocation (ring hot path) */
	KVMM_CMD_STEP_BEGIN = 0x30,
	KVMM_CMD_STEP_END = 0x31,
	KVMM_CMD_REVOKE_ACK = 0x38,
	/* statistics */
	KVMM_CMD_STATS = 0x40,
	/* reserved for content-addressed blocks and tiers (issue #4) */
	KVMM_CMD_BLOCK_PUBLISH = 0x50,
	KVMM_CMD_PREFIX_OPEN = 0x51,
	KVMM_CMD_RESTORE_PLAN = 0x52,
	KVMM_CMD_BLOCK_PIN = 0x53,
	KVMM_CMD_BLOCK_UNPIN = 0x54,
	KVMM_CMD_PREFIX_COLLECT = 0x55, /* ABI 1.16 */
	KVMM_CMD_SEQ_COLLECT = 0x56, /* ABI 1.17 */
	KVMM_CMD_PREFIX_QUERY = 0x57, /* ABI 1.19 */
	KVMM_CMD_TIER_STATS = 0x58,
	KVMM_CMD_BLOCK_PIN_MANY = 0x59, /* ABI 1.19 */
	/* administration (root or the daemon's uid) */
	KVMM_CMD_ADMIN_STATUS = 0x80,
	KVMM_CMD_ADMIN_SESSIONS = 0x81,
	KVMM_CMD_ADMIN_KILL_SESSION = 0x82,
	KVMM_CMD_ADMIN_SET_QUOTA = 0x83,
	KVMM_CMD_ADMIN_SET_LOG_LEVEL = 0x84,
	KVMM_CMD_ADMIN_REVOKE = 0x85,
	KVMM_CMD_ADMIN_TENANTS = 0x86, /* ABI 1.10 */
	KVMM_CMD_ADMIN_SET_TENANT_LIMIT = 0x87, /* ABI 1.11 */
	KVMM_CMD_ADMIN_CACHE_DROP = 0x88, /* ABI 1.14 */
	KVMM_CMD_MAX = 0xff,
};

/* kvmm_msg_hdr.flags */
#define KVMM_MSG_F_REPLY 0x01 /* daemon -> client answer to id */
#define KVMM_MSG_F_MORE_FDS 0x02 /* KVMM_CMD_FDS messages follow */

/* Every socket message starts with this header. */
struct kvmm_msg_hdr {
	uint32_t size; /* whole message, header included */
	uint16_t cmd; /* enum kvmm_cmd */
	uint8_t version; /* KVMM_ABI_MAJOR */
	uint8_t flags; /* KVMM_MSG_F_* */
	uint32_t id; /* request id, echoed by the reply */
	int32_t status; /* reply: 0 or -errno; request: 0 */
};

/* ---- session ---------------------------------------------------------- */

/* kvmm_hello.flags */
#define KVMM_HELLO_F_ADMIN 0x1 /* admin-only session: no rings */

struct kvmm_hello {
	uint32_t size;
	uint16_t abi_major; /* must equal KVMM_ABI_MAJOR */
	uint16_t abi_minor;
	uint32_t flags; /* KVMM_HELLO_F_* */
	uint32_t sq_entries; /* 0 = default; rounded up to a power of two */
	uint32_t cq_entries; /* 0 = 2 * sq_entries, at most 16384 */
	uint32_t rq_entries; /* 0 = default */
	char name[32]; /* free text for kvmmctl, NUL padded */
	uint64_t reserved[4];
};

/* Where each ring field sits in the shared memfd, in bytes. */
struct kvmm_ring_offsets {
	uint32_t size;
	uint32_t mmap_size; /* bytes to map */
	uint32_t flags; /* u32 word: KVMM_RING_F_* (daemon sets, client reads) */
	uint32_t client_flags; /* u32 word: KVMM_RING_CF_* */
	uint32_t sq_head, sq_tail, sq_entries, sq_array;
	uint32_t cq_head, cq_tail, cq_entries, cq_array;
	uint32_t rq_head, rq_tail, rq_entries, rq_array;
	/* telemetry fallback counters (ebpf/telemetry_shm.h) the client
	 * writes when BPF is unavailable; tel_size 0 = none */
	uint32_t tel_off, tel_size;
	/* u32 word the daemon increments, then FUTEX_WAKEs, when a
	 * PREFIX_COLLECT reply is ready or a block of an early open settles
	 * (ABI 1.16; 0 = none, a daemon before it), and when a parked
	 * KVMM_SEQ_EXTEND_COLLECT extend's SEQ_COLLECT reply is (ABI 1.17) */
	uint32_t notify;
	uint32_t reserved[5];
};

/* Daemon -> client flag word: the daemon sleeps, write the SQ doorbell. */
#define KVMM_RING_F_NEED_WAKEUP 0x1
/* Client -> daemon flag word: the client sleeps, write the CQ doorbell. */
#define KVMM_RING_CF_CQ_WAIT 0x1

/*
 * Reply to HELLO.  Fds attached, in order: ring memfd, SQ doorbell eventfd
 * (client writes), CQ doorbell eventfd (daemon writes), revocation eventfd
 * (daemon writes; kvmm_poll_fd()).  None for an admin session.
 */
struct kvmm_hello_reply {
	uint32_t size;
	uint16_t abi_major;
	uint16_t abi_minor;
	uint32_t session_id;
	uint32_t backend; /* KVMM_BACKEND_* */
	uint64_t page_size;
	uint64_t pages_total; /* pool capacity */
	uint64_t quota_pages; /* this uid's quota, 0 = unlimited */
	uint32_t revoke_timeout_ms;
	uint32_t nr_fds;
	struct kvmm_ring_offsets ring;
	/* The served GPU's UUID (cuDeviceGetUuid's 16 bytes), so a client
	 * opens that device whatever ordinal it has in the client's process;
	 * all zero on the host backend and from a daemon before ABI 1.13. */
	uint8_t gpu_uuid[16];
	uint64_t reserved[2];
};

/* ---- regions ----------------------------------------------------------- */

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

/* ---- revocation ---------------------------------------------------------- */

struct kvmm_revoke_ack {
	uint32_t size;
	uint32_t pad;
	uint64_t cookie; /* from the revocation entries being answered */
	uint64_t reserved[2];
};

/* ---- statistics ---------------------------------------------------------- */

/* STATS: this session's view; ADMIN_STATUS: the daemon's. */
struct kvmm_stats_reply {
	uint32_t size;
	uint32_t session_id;
	uint64_t pages_held; /* pages this session's process has mapped */
	uint64_t pages_owned; /* pages of this session's sequences */
	uint64_t regions, sequences;
	uint64_t cmds_socket, cmds_ring;
	uint64_t revocations_posted, revocations_acked;
	uint64_t reserved[8];
};

struct kvmm_status_reply {
	uint32_t size;
	uint32_t backend; /* KVMM_BACKEND_* */
	char device[64];
	uint64_t page_size;
	uint64_t pages_total; /* capacity */
	uint64_t pages_created;
	uint64_t pages_free; /* capacity - allocated */
	uint64_t pages_allocated; /* owned by sequences or revoking */
	uint64_t pages_mapped; /* mapped by at least one process */
	uint64_t pages_revoking;
	uint64_t pages_quarantined; /* held by cut-off, still-live processes
				     * (each page once) */
	uint64_t sessions;
	uint64_t regions;
	uint64_t sequences;
	uint64_t sessions_total; /* since start */
	uint64_t sessions_cut_off;
	uint64_t cmds_socket, cmds_ring;
	uint64_t revocations_posted, revocations_acked, revocations_timed_out;
	uint64_t uptime_ms;
	uint32_t pid;
	uint32_t revoke_timeout_ms;
	/* kvmmd --profile cost model (0 without telemetry): bytes/s into
	 * the GPU, corrected online and as the profile says */
	uint64_t cost_host_bw, cost_host_bw_profile;
	uint64_t cost_nvme_bw, cost_nvme_bw_profile;
	uint64_t cost_transfers; /* restore observations folded in */
	/* SEQ_EXTENDs and PREFIX_OPENs whose reply waited for demotion
	 * copies to give pool pages back (parked, the loop serving others
	 * meanwhile): since start, and now */
	uint64_t cmds_parked, cmds_parked_now;
	/* now: demotions waiting for a free host slot (their blocks stay in
	 * their GPU pages until the copy can start) */
	uint64_t demotions_queued;
	/* ABI 1.2, which made the struct 16 bytes longer (older daemons send
	 * the shorter one: these read 0; older clients read a prefix):
	 * BLOCK_PIN records of every session, and the bytes of the distinct
	 * cached blocks they name */
	uint64_t pins, pinned_bytes;
	/* ABI 1.5 (32 more bytes; older daemons send the shorter struct:
	 * these read "", older clients read a prefix): kvmmd's
	 * --cache-policy and --restore-mode, NUL padded */
	char cache_policy[16];
	char restore_mode[16];
	/* ABI 1.9 (56 more bytes; older daemons send the shorter struct:
	 * these read "" and 0): kvmmd's --cache-scope ("shared", "uid", "gid"),
	 * NUL padded, and its --policy-state (KVMM_POLICY_STATE_*): the
	 * block lives the state loaded at start was learned from (0: none
	 * loaded), saves that worked and that failed since the start, and
	 * the ms since the last one that worked (UINT64_MAX: none yet) */
	char cache_scope[16];
	uint64_t policy_state;
	uint64_t policy_state_lives;
	uint64_t policy_state_saves, policy_state_save_errors;
	uint64_t policy_state_save_age_ms;
	/* ABI 1.13 (56 more bytes; older daemons send the shorter struct:
	 * these read "" and 0): pool pages zeroed before they went to a
	 * client of another uid than the one they last served, and scrubs
	 * that failed (the allocation failed with them; the page was not
	 * handed out); kvmmd's telemetry source ("bpf" or "shm"; "" when
	 * off), NUL padded, and what telemetry could not count since the
	 * start (the *_dropped counters of struct kvmm_counters,
	 * ebpf/kvmm_telemetry.h): access records over a probe's cap, block
	 * statistics with no room, histogram rows with no room, events the
	 * ring had no room for (BPF only) */
	uint64_t pages_scrubbed;
	uint64_t page_scrub_failures;
	char telemetry[8];
	uint64_t tel_access_dropped, tel_blocks_dropped;
	uint64_t tel_hist_dropped, tel_events_dropped;
	/* ABI 1.13 too (40 more bytes, 496 in all; a daemon without them
	 * sends 456: they read 0): connections kvmmd closed at accept since
	 * the start, by why: their uid had --max-sessions-per-uid sessions,
	 * only the sessions kept for admin uids were left, kvmmd had its
	 * most (1024), no memory to count the uid's pages; and connections
	 * it closed for sending no HELLO within --hello-timeout */
	uint64_t sessions_refused_uid_limit;
	uint64_t sessions_refused_admin_reserved;
	uint64_t sessions_refused_full;
	uint64_t sessions_refused_no_memory;
	uint64_t sessions_hello_timeouts;
	/* ABI 1.13 too (8 more bytes, 504 in all; 0 from a daemon that sends
	 * 496): connections refused at accept because their uid had 256
	 * quarantined processes and theirs was none of them */
	uint64_t sessions_refused_quarantine;
	/* ABI 1.13 too (8 more bytes, 512 in all; a daemon that sends 504
	 * or less leaves it 0): revocations still pending when their
	 * session ended (closed, killed, cut off), the one whose timeout
	 * cut it off aside (in revocations_timed_out).  posted = acked +
	 * timed_out + cancelled + those pending now */
	uint64_t revocations_cancelled;
	/* ABI 1.14 (8 more bytes, 520 in all; 0 from a daemon that sends
	 * 512 or less): cached blocks ADMIN_CACHE_DROP dropped since the
	 * start (kvmmctl cache-drop) */
	uint64_t cache_drop_blocks;
	/* ABI 1.15 (16 more bytes, 536 in all; 0 from a daemon that sends
	 * 520 or less): pool pages swapped for new ones before they went to
	 * a process of another cache scope (uid or gid under --cache-scope
	 * uid|gid) than one that had got their fd, and swaps that failed
	 * (the allocation failed with them; the page stayed free) */
	uint64_t pages_renewed;
	uint64_t page_renew_failures;
	/* ABI 1.18 (40 more bytes, 576 in all; 0 from a daemon that sends
	 * 536 or less): the read-only page fds kvmmd keeps for shared pages'
	 * readers now, the most it keeps (from its RLIMIT_NOFILE; the pool's
	 * capacity when that was enough, 0 on a backend with none), those it
	 * opened to keep, those it closed under an fd shortage, and those
	 * it opened past the cap for one reply alone (closed once sent) */
	uint64_t page_ro_fds;
	uint64_t page_ro_fd_cap;
	uint64_t page_ro_fd_opens;
	uint64_t page_ro_fd_drops;
	uint64_t page_ro_fd_unkept_opens;
	/* ABI 1.19 (56 more bytes, 632 in all; 0 from a daemon that sends
	 * 576 or less): for extends short of the uid's quota or of the
	 * pool, the requests to other processes of the uid for their
	 * blocks mapped ahead (KVMM_RQE_F_GIVE_AHEAD entries posted, one
	 * per process asked), the blocks those processes gave back
	 * (truncated past their lengths) while asked, the extends that
	 * asked and then got their blocks, those that asked and failed all
	 * the same (their wait was over, or nothing was left ahead), and
	 * kvmmd --lend-wait (ms such an extend waits; 0: none asks) */
	uint64_t lend_requests;
	uint64_t lend_blocks;
	uint64_t lend_extends;
	uint64_t lend_failures;
	uint64_t lend_wait_ms;
	/* ABI 1.19 too (16 more bytes, 632 in all): kvmmd --max-sessions
	 * and --max-sessions-per-uid, the sessions it admits at once in all
	 * and per uid (0: no limit per uid but max_sessions), so that the
	 * refusals above can be read against them */
	uint64_t max_sessions;
	uint64_t max_sessions_per_uid;
	/* ABI 1.20 (88 more bytes, 720 in all; 0 from a daemon that sends
	 * 632 or less): what routers and schedulers ask of the cache, which
	 * changes nothing and so showed nowhere: PREFIX_QUERYs answered, the
	 * hashes they asked about and the leading blocks they found, by
	 * where (the query reply's four tiers); BLOCK_PIN_MANYs answered,
	 * the hashes they named and the pins they made (each also one
	 * BLOCK_PIN record, in pins above); TIER_STATS answered (kvmmctl
	 * status sends one after its ADMIN_STATUS); and the quarantined
	 * processes of one uid past which its new processes are refused
	 * (sessions_refused_quarantine) */
	uint64_t prefix_queries;
	uint64_t prefix_query_hashes;
	uint64_t prefix_query_gpu, prefix_query_host;
	uint64_t prefix_query_nvme, prefix_query_moving;
	uint64_t pin_many_calls;
	uint64_t pin_many_hashes;
	uint64_t pin_many_pinned;
	uint64_t tier_stats_calls;
	uint64_t quarantine_per_uid;
	/* ABI 1.22 (56 more bytes, 776 in all; a client whose HELLO said
	 * 1.21 or less is sent the 720 bytes of before): the block sizes
	 * cached (pages a block, as TIER_STATS' sizes[], the first size
	 * first) and, for each, its demotions waiting for a free host slot
	 * now (they add up to demotions_queued) */
	uint32_t nr_sizes;
	uint32_t sizes[4]; /* KVMM_TIER_STATS_SIZES */
	uint32_t pad_sizes;
	uint64_t demotions_queued_size[4];
};

enum kvmm_policy_state {
	KVMM_POLICY_STATE_OFF = 0, /* no --policy-state */
	KVMM_POLICY_STATE_ON = 1, /* loaded (or not found) and saved */
	KVMM_POLICY_STATE_UNUSED = 2, /* the policy learns nothing (lru...) */
};

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

/* ---- blocks, prefixes, tiers (0x50-0x6f) --------------------------------- */

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

/* ---- rings ------------------------------------------------------------- */

/*
 * Submission entry.  Ring commands: NOP, SEQ_EXTEND (only within blocks
 * that already have pages: arg0 = new_len), STEP_BEGIN, STEP_END,
 * REVOKE_ACK (arg0 = cookie), STATS is not a ring command.
 */
struct kvmm_sqe {
	uint16_t cmd;
	uint16_t flags; /* must be 0 */
	uint32_t region_id;
	uint64_t user_data; /* echoed in the completion */
	uint32_t seq_id;
	uint32_t pad;
	uint64_t arg0, arg1, arg2;
	uint64_t reserved[2];
};

struct kvmm_cqe {
	uint64_t user_data;
	int32_t res; /* 0 / value, or -errno */
	uint32_t flags;
	uint64_t value; /* command-specific */
	uint64_t reserved;
};

/* One mapping to take back: unmap the page at region/seq/block, drop the
 * handle when no mapping is left, then acknowledge the cookie with
 * REVOKE_ACK once every entry of the batch (up to the one flagged LAST) has
 * been handled.  A page mapped in n places comes in n entries.  seq_gen
 * names the opening of the sequence: when the slot was closed (and maybe
 * opened again) since, or no longer maps the page there, the client
 * unmapped it already and the entry takes nothing.  seq_gen 0 (daemons
 * before ABI 1.1): a mapping not at the named place is taken at the first
 * place this process maps the page. */
struct kvmm_rqe {
	uint64_t cookie;
	uint32_t page_id;
	uint32_t flags; /* KVMM_RQE_F_* */
	uint32_t region_id;
	uint32_t seq_id;
	uint32_t block;
	uint32_t seq_gen; /* kvmm_seq_open_reply.seq_gen of seq_id, 0 = unknown */
};

#define KVMM_RQE_F_LAST 0x1
/*
 * ABI 1.19, sent only to a client whose HELLO says abi_minor >= 19: not
 * a revocation but a request.  An extend of another process of the same
 * uid is short of the uid's quota or of the pool, and this process maps
 * blocks ahead of its sequences' lengths (libkvmm's map-ahead): give
 * them back, by truncating sequences to their own lengths (SEQ_TRUNCATE,
 * never below a length), the sequences with the most blocks ahead first,
 * until page_id pages (a count here, not a page) are given or none is
 * left ahead.  cookie, region_id, seq_id, block and seq_gen are 0, and
 * the entry is never acknowledged (no KVMM_RQE_F_LAST): kvmmd learns the
 * answer from the truncates, and a client that does not answer only
 * makes the other extend fail once its wait is over.  (ABI 1.20: unless
 * it is flagged KVMM_RQE_F_GIVE_ACK too, below, with a cookie.)
 */
#define KVMM_RQE_F_GIVE_AHEAD 0x2

/*
 * ABI 1.20: set with KVMM_RQE_F_GIVE_AHEAD only in an entry to a client
 * whose HELLO says abi_minor >= 20, which answers it.  cookie names the
 * request (non-zero, from the revocation cookies' sequence, so never a
 * revocation's).  The SEQ_TRUNCATEs the client sends to give blocks for
 * it carry the cookie in kvmm_seq_extend.reserved[0] (kvmmd counts the
 * blocks they drop past its lengths in ADMIN_STATUS lend_blocks); once
 * it has given what it will, nothing maybe, the client sends REVOKE_ACK
 * with arg0 = cookie (ring) or kvmm_revoke_ack.cookie (socket) and the
 * blocks it gave in arg1 (reserved[0]).  kvmmd then stops waiting for
 * it: an extend whose asked processes have all answered fails at once
 * when its pages are still short, rather than at the end of --lend-wait.
 * No answer is due in any time: nothing is cut off for want of one.
 */
#define KVMM_RQE_F_GIVE_ACK 0x4

#ifdef __cplusplus
#pragma GCC diagnostic pop
#endif

#endif
