/* SPDX-License-Identifier: MIT */
/*
 * kvmm wire ABI, the rings of a session's shared memory (uapi.h's
 * first comment; struct kvmm_ring_offsets in session.h says where they
 * sit): submission, completion and revocation entries, and REVOKE_ACK
 * (command 0x38), which answers a batch of revocation entries from the
 * ring or the socket.
 *
 * Part of <kvmm/uapi.h>, which includes it; include that one (it has
 * the ABI version, the command numbers and the message header).  It
 * compiles alone too (tests/header-alone.sh).
 */
#ifndef KVMM_UAPI_RINGS_H
#define KVMM_UAPI_RINGS_H

#include <stdint.h>

struct kvmm_revoke_ack {
	uint32_t size;
	uint32_t pad;
	uint64_t cookie; /* from the revocation entries being answered */
	uint64_t reserved[2];
};

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

#endif
