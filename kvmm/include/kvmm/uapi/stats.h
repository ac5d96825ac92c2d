/* SPDX-License-Identifier: MIT */
/*
 * kvmm wire ABI, statistics: what STATS (this session's view) and
 * ADMIN_STATUS (the daemon's) answer, and enum kvmm_policy_state of the
 * latter.
 *
 * Part of <kvmm/uapi.h>, which includes it; include that one (it has
 * the ABI version, the command numbers and the message header).  It
 * compiles alone too (tests/header-alone.sh).
 */
#ifndef KVMM_UAPI_STATS_H
#define KVMM_UAPI_STATS_H

#include <stdint.h>

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

#endif
