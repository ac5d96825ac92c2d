/* SPDX-License-Identifier: MIT */
/*
 * A client of kvmmd's wire without libkvmm: HELLO over the socket as a
 * client of ABI 1.minor, and the rings mapped, for tests that take
 * revocation-ring entries off the ring (and answer them) by hand.
 * Include after tests/cache-common.h (struct cc, cc_call()).
 */
#ifndef KVMM_TESTS_LIB_RAW_RING_H
#define KVMM_TESTS_LIB_RAW_RING_H

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

struct raw_ring {
	struct cc c;
	struct kvmm_ring_offsets off;
	unsigned char *ring;
};

/* Connect r to the socket at path with a revocation ring of rq_entries
 * (kvmmd must grant exactly that many). */
static inline void raw_ring_connect(struct raw_ring *r, const char *path,
				    uint16_t minor, uint32_t rq_entries)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct kvmm_hello hello = { .size = sizeof(hello),
				    .abi_major = KVMM_ABI_MAJOR,
				    .abi_minor = minor,
				    .rq_entries = rq_entries };
	struct kvmm_hello_reply rep;
	unsigned int n;

	memset(r, 0, sizeof(*r));
	r->c.sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	t_assert(r->c.sock >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	t_ok(connect(r->c.sock, (struct sockaddr *)&sa, sizeof(sa)));
	t_ok(cc_call(&r->c, KVMM_CMD_HELLO, &hello, sizeof(hello), &rep,
		     sizeof(rep), r->c.ring_fds, &n));
	t_assert_eq(n, 4);
	t_assert_eq(rep.ring.rq_entries, rq_entries);
	r->off = rep.ring;
	r->ring = mmap(NULL, r->off.mmap_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED, r->c.ring_fds[0], 0);
	t_assert(r->ring != MAP_FAILED);
}

/* The ring word at offset off (a head, a tail, ...). */
static inline uint32_t *raw_ring_word(struct raw_ring *r, uint32_t off)
{
	return (uint32_t *)(r->ring + off);
}

/* Take every posted entry off r's ring and acknowledge the requests they
 * end (REVOKE_ACK, as a client of ABI 1.0 acknowledges a revocation
 * whole); returns the entries taken. */
static inline uint32_t raw_ring_take_entries(struct raw_ring *r)
{
	uint32_t head = __atomic_load_n(raw_ring_word(r, r->off.rq_head),
					__ATOMIC_RELAXED);
	uint32_t tail = __atomic_load_n(raw_ring_word(r, r->off.rq_tail),
					__ATOMIC_ACQUIRE);
	const struct kvmm_rqe *e = (const void *)(r->ring + r->off.rq_array);
	uint32_t n = tail - head;

	for (; head != tail; head++) {
		const struct kvmm_rqe *x = &e[head & (r->off.rq_entries - 1)];

		if (x->flags & KVMM_RQE_F_LAST) {
			struct kvmm_revoke_ack a = { .size = sizeof(a),
						     .cookie = x->cookie };

			__atomic_store_n(raw_ring_word(r, r->off.rq_head),
					 head + 1, __ATOMIC_RELEASE);
			t_ok(cc_call(&r->c, KVMM_CMD_REVOKE_ACK, &a, sizeof(a),
				     NULL, 0, NULL, NULL));
		}
	}
	__atomic_store_n(raw_ring_word(r, r->off.rq_head), tail,
			 __ATOMIC_RELEASE);
	return n;
}

#endif /* KVMM_TESTS_LIB_RAW_RING_H */
