/* SPDX-License-Identifier: MIT */
/*
 * Socket messages and shared rings, the parts kvmmd and libkvmm share.
 *
 * kw_*: one SOCK_SEQPACKET message with optional SCM_RIGHTS fds, sent and
 * received with every fd O_CLOEXEC and every truncation detected (a
 * truncated message is an error, and fds that came with it are closed).
 *
 * kr_*: the ring layout inside the session memfd and the acquire/release
 * helpers both sides use on head/tail words.  Each side owns the index it
 * advances (SQ: client owns tail, daemon head; CQ and RQ: daemon owns tail,
 * client head) and keeps a private copy of it, so a peer scribbling on the
 * shared word cannot make it read outside the arrays.
 */
#ifndef KVMM_LIB_WIRE_H
#define KVMM_LIB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvmm/uapi.h"

int kw_send(int sock, const void *buf, size_t len, const int *fds,
	    unsigned int nfds, int flags);
/* Returns the message length, 0 on EOF, or -errno (-EMSGSIZE: truncated,
 * -EBADMSG: more fds than maxfds); *nfds = fds stored. */
ssize_t kw_recv(int sock, void *buf, size_t cap, int *fds, unsigned int *nfds,
		unsigned int maxfds, int flags);
/* As kw_recv(), except that a message whose fds the kernel cut short
 * (MSG_CTRUNC: the receiver's fd table is full, RLIMIT_NOFILE) is returned
 * all the same, with the fds that did arrive and *fds_lost set: its body is
 * whole, so the receiver can still follow the conversation. */
ssize_t kw_recv_fds_lost(int sock, void *buf, size_t cap, int *fds,
			 unsigned int *nfds, unsigned int maxfds,
			 bool *fds_lost);
/*
 * As kw_recv() with room for every fd one message can carry
 * (KVMM_MSG_MAX_FDS, the kernel's SCM_MAX_FD, so fds has that many), and
 * the fds left to the caller also when the message is cut (-EMSGSIZE):
 * for a receiver that must not close them itself (kvmmd: the last close
 * of a client's lingering socket blocks).
 */
ssize_t kw_recv_keep_fds(int sock, void *buf, size_t cap, int *fds,
			 unsigned int *nfds, int flags);
void kw_close_fds(int *fds, unsigned int nfds);

/*
 * Validate a command struct inside a message payload: payload must hold
 * exactly the struct, whose first u32 is its size; sizes below min are
 * -EINVAL, extra bytes beyond known must be zero (-E2BIG).  On success the
 * first min(size, known) bytes are copied into out and the rest of out is
 * zeroed.
 */
int kw_copy_struct(void *out, size_t known, size_t min, const void *payload,
		   size_t len);
/* True when every byte of p[0..n) is zero. */
static inline int kw_all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		if (c[i])
			return 0;
	return 1;
}

/* ---- rings ---- */

/* Loads the peer's index: the entries it published before it are visible. */
static inline uint32_t kr_load_acquire(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Publishes our index: the entries written before it become visible. */
static inline void kr_store_release(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* Plain atomic read of a flag word (no ordering by itself). */
static inline uint32_t kr_load_relaxed(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Sets/clears bits of a flag word the peer polls. */
static inline void kr_flag_set(uint32_t *p, uint32_t bits)
{
	__atomic_fetch_or(p, bits, __ATOMIC_RELAXED);
}

static inline void kr_flag_clear(uint32_t *p, uint32_t bits)
{
	__atomic_fetch_and(p, ~bits, __ATOMIC_RELAXED);
}

/* Orders our index store before our load of the peer's sleep flag (and the
 * peer's flag store before its index load): no lost wakeups. */
static inline void kr_full_barrier(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline void kr_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

struct kr_ring {
	uint32_t *head, *tail;
	uint32_t entries, mask;
	void *array;
};

struct kr_rings {
	void *mem;
	size_t size;
	uint32_t *flags; /* daemon -> client: KVMM_RING_F_* */
	uint32_t *client_flags; /* client -> daemon: KVMM_RING_CF_* */
	/* daemon -> client: bumped when a deferred reply is ready (futex);
	 * NULL from a daemon before ABI 1.16 */
	uint32_t *notify;
	struct kr_ring sq, cq, rq;
};

#define KR_DEFAULT_SQ 256
#define KR_MAX_ENTRIES 16384

/* Offsets for rings of these sizes (rounded up to powers of two). */
int kr_layout(uint32_t sq, uint32_t cq, uint32_t rq,
	      struct kvmm_ring_offsets *off);
/* Point r at the rings inside mem (size bytes); -EINVAL when the offsets
 * do not fit in size or the sizes are not powers of two. */
int kr_attach(void *mem, size_t size, const struct kvmm_ring_offsets *off,
	      struct kr_rings *r);

#endif
