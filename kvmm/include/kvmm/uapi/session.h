/* SPDX-License-Identifier: MIT */
/*
 * kvmm wire ABI, the session (commands 0x01-0x0f): HELLO, its reply
 * and struct kvmm_ring_offsets, where each field of the rings the reply
 * hands over sits.
 *
 * Part of <kvmm/uapi.h>, which includes it; include that one (it has
 * the ABI version, the command numbers and the message header).  It
 * compiles alone too (tests/header-alone.sh).
 */
#ifndef KVMM_UAPI_SESSION_H
#define KVMM_UAPI_SESSION_H

#include <stdint.h>

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

#endif
