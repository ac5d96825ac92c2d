/* SPDX-License-Identifier: MIT */
/*
 * A session's shared-memory rings, kvmmd's side (ring.c): set-up,
 * submissions consumed, completions and revocations posted, doorbells.
 * kvmmd.h includes it.
 */
#ifndef KVMM_KVMMD_RING_H
#define KVMM_KVMMD_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "kvmm/uapi.h"

struct kd_session;

/* Sets up the rings; fds[4] = memfd, sq doorbell, cq doorbell, revoke
 * eventfd (dups the caller sends and closes). */
int kd_ring_create(struct kd_session *s, const struct kvmm_hello *h,
		   struct kvmm_ring_offsets *off, int fds[4]);
void kd_ring_destroy(struct kd_session *s);
/* Consume submissions; true if any were handled. */
bool kd_ring_poll(struct kd_session *s);
void kd_ring_need_wakeup(struct kd_session *s, bool on);
/* Bump the ring's notify word and wake the client's threads waiting on it
 * (a PREFIX_COLLECT or SEQ_COLLECT reply is ready, an early open's block
 * settled). */
void kd_ring_notify(struct kd_session *s);
bool kd_ring_pending(struct kd_session *s);
/* Free revocation entries (and the ring's size); -ECONNRESET when the
 * client corrupted the ring's head (the session is doomed). */
int kd_ring_rq_room(struct kd_session *s, uint32_t *room, uint32_t *entries);
/* Post n revocation entries; -EBUSY when they do not fit. */
int kd_ring_post_revokes(struct kd_session *s, const struct kvmm_rqe *e,
			 uint32_t n);
/* The furthest length the ring SEQ_EXTENDs of (region_id, seq) the
 * client submitted and kvmmd has not read yet ask for (0: none): a hint
 * read from client memory, never trusted beyond that (cache_lend.c). */
uint32_t kd_ring_extend_unread(struct kd_session *s, uint32_t region_id,
			       uint32_t seq);

#endif
