/* SPDX-License-Identifier: MIT */
/*
 * Revocations (revoke.c): pages taken back from a session's process,
 * posted on its revocation ring, held until the client acknowledges or its
 * timeout cuts the session off.  kvmmd.h includes it.
 */
#ifndef KVMM_KVMMD_REVOKE_H
#define KVMM_KVMMD_REVOKE_H

#include <stdbool.h>
#include <stdint.h>

#include "kvmm/uapi.h"

struct kd_region;
struct kd_session;

struct kd_revoke {
	uint64_t cookie;
	uint64_t deadline_ns;
	struct kd_revoke *next;
	/* Runs once: 0 acknowledged, -ETIMEDOUT the session was cut off for
	 * not answering, -ECONNRESET it ended otherwise. */
	void (*done)(void *arg, int status);
	void *arg;
	uint32_t nr_pages;
	/* The mappings whose holds drop on acknowledgement: page_id and
	 * where the client maps it; page_id KD_REVOKE_GONE once the client
	 * unmapped that place itself (kd_revoke_unmapped()). */
	struct kvmm_rqe places[];
};

#define KD_REVOKE_GONE UINT32_MAX

/*
 * Take back blocks [first, end) of a sequence: post the pages, keep the
 * holds until the client acknowledges or the timeout cuts it off.  When
 * the revocation ring has room for only the last blocks' pages, those are
 * taken back (from *from on) and -EAGAIN says to ask again for the rest;
 * on 0, *from is the first block taken.
 */
int kd_revoke_seq(struct kd_session *s, struct kd_region *r, uint32_t seq,
		  uint32_t first_block, uint32_t *from);
/*
 * The generic form: take back pages from one session's process.  The
 * caller has already detached them from their owners (blocks), so the pool
 * holds them REVOKING; hints[] are the RQ entries to post (page_id and the
 * region/seq/block where the client mapped it; cookie and flags are filled
 * in).  The session's holds drop on acknowledgement; done (may be NULL)
 * reports how it ended.  -EBUSY when the RQ has no room (nothing posted).
 */
int kd_revoke_pages(struct kd_session *s, const struct kvmm_rqe *hints,
		    uint32_t n, void (*done)(void *arg, int status), void *arg,
		    uint64_t *cookie);
int kd_revoke_ack(struct kd_session *s, uint64_t cookie);
/* The client closed (truncated from first_block, destroyed: seq
 * UINT32_MAX) places that pending revocations name; their holds drop
 * now (revoke.c). */
void kd_revoke_unmapped(struct kd_session *s, uint32_t region_id, uint32_t seq,
			uint32_t gen, uint32_t first_block);
/* A deferred reply was sent: the revocations' deadlines move by the time
 * the client waited for it since since_ns (it could not acknowledge). */
void kd_revoke_resume(struct kd_session *s, uint64_t since_ns);
/* Session end: drop pending revocations, calling done(status); each
 * counts as cancelled but the one whose timeout ended the session. */
void kd_revoke_free_all(struct kd_session *s, bool release_holds, int status);

#endif
