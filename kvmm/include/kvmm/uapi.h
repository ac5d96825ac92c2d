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

#define KVMM_ABI_MAJOR 1
#define KVMM_ABI_MINOR 25

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

/*
 * The commands' structs and flags, one header a group of commands
 * (Documentation/abi.md names them).  Each compiles alone, but this
 * header is the one to include: it says which ABI they are.
 */
#include "uapi/session.h" /* HELLO, the ring offsets */
#include "uapi/regions.h" /* regions, sequences */
#include "uapi/rings.h" /* the ring entries, REVOKE_ACK */
#include "uapi/stats.h" /* STATS, ADMIN_STATUS */
#include "uapi/blocks.h" /* publish, prefixes, pins */
#include "uapi/tiers.h" /* TIER_STATS */
#include "uapi/admin.h" /* the other administration commands */

#endif
