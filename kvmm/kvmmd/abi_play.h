/* SPDX-License-Identifier: MIT */
/*
 * The older kvmmd a test makes this one play (KVMMD_TEST_ABI_MINOR=N, a
 * test knob): its HELLO says 1.N and it answers as a kvmmd of 1.N did
 * wherever a client can see it.  One table per kind of change (a command
 * that came, a request flag that came, a reply that grew) says at which
 * minor each came in (Documentation/abi.md's change log, one section a
 * minor); the code that serves a command asks these tables instead of
 * comparing minors of its own.
 *
 * Two minors matter: the daemon's (kd_abi_minor(): what HELLO says) and
 * a session's (s->client_minor: the older of its HELLO's and the
 * daemon's).  What a client may send (commands, flags) follows the
 * daemon's; what it is sent (reply sizes, words that came later) the
 * session's.
 */
#ifndef KVMM_KVMMD_ABI_PLAY_H
#define KVMM_KVMMD_ABI_PLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmm/uapi.h"

/* The minor kvmmd plays: KVMM_ABI_MINOR, or KVMMD_TEST_ABI_MINOR's (read
 * once; the knob table checked its range at start, and the first read
 * logs a warning). */
uint16_t kd_abi_minor(void);

/* cmd is one the daemon played did not have yet: it answers -ENOTTY. */
bool kd_abi_cmd_unknown(uint16_t cmd);

/*
 * The request flags of cmd (PREFIX_OPEN, SEQ_EXTEND, BLOCK_PIN) that came
 * after the daemon played: -EINVAL when the request sets one, as that
 * daemon answered an unknown flag; 0 otherwise (and for a request too
 * short to hold its flags, which the command's own checks refuse).
 */
int kd_abi_flags_check(uint16_t cmd, const void *p, size_t len);

/* The replies that grew at their end since 1.0. */
enum kd_abi_reply {
	KD_ABI_ADMIN_STATUS,
	KD_ABI_TIER_STATS,
	KD_ABI_CACHE_DROP,
	KD_ABI_TENANT_ENTRY, /* one ADMIN_TENANTS entry (entry_size) */
	KD_ABI_REPLY_COUNT,
};

/*
 * The bytes of reply `which` to a session of client_minor: the size it
 * had at that minor, where kvmmd cuts it for an older client (TIER_STATS
 * since 1.21, ADMIN_STATUS and CACHE_DROP since 1.22; before, a client
 * that knew less got the whole reply and read the prefix it knew), and
 * never past what the daemon played sent.
 */
size_t kd_abi_reply_size(enum kd_abi_reply which, uint16_t client_minor);

/* TIER_STATS as a client of client_minor is sent it: st->size cut
 * (kd_abi_reply_size()), the words of later minors 0. */
void kd_abi_tier_stats(struct kvmm_tier_stats_reply *st, uint16_t client_minor);

/*
 * ADMIN_TENANTS as a client of client_minor is sent it: 1.10's entries
 * ended before limit_blocks (entry_size 120: the entries move down and
 * *len, rep->size shrink), the quota words were reserved before 1.13.
 */
void kd_abi_tenants(struct kvmm_tenants_reply *rep, size_t *len,
		    uint16_t client_minor);

/*
 * The minors at which a word in former reserved space (or a behaviour a
 * client sees) came: below it kvmmd sends 0 there, or does what it did
 * then.  Each is named where it is used.
 */
#define KD_ABI_SEQ_GEN 1 /* seq_gen of SEQ_OPEN, PREFIX_OPEN, RQEs */
#define KD_ABI_SESSION_PINS 2 /* ADMIN_SESSIONS' pin fields */
#define KD_ABI_PROMOTED 4 /* publish's promoted, promotions_by_publish */
#define KD_ABI_SESSIONS_TOTAL 12 /* ADMIN_SESSIONS' total */
/* ADMIN_SESSIONS' regions and quarantined entries; the tenants' quota
 * words; BLOCK_PIN's -EDQUOT body; HELLO's gpu_uuid */
#define KD_ABI_1_13 13
#define KD_ABI_STALE_INVALIDATED 15 /* CACHE_DROP's nvme_stale_invalidated */
/*
 * libkvmm has mapped shared blocks read-only since ABI 1.15; before it
 * (ABI 1.14 and older) it mapped them read-write, which a read-only fd
 * refuses (EACCES): a client that says it speaks an older minor keeps
 * getting the read-write fd, as abi.md's compatibility rule asks.  The
 * read-only fd guards against accidents (an engine's stray write into the
 * cache's copy), not against a client that means harm, which can claim
 * an old minor, or publish wrong bytes under hashes others use.
 */
#define KD_ABI_RO_FDS 15
#define KD_ABI_NOTIFY 16 /* HELLO's ring.notify */
/* libkvmm answers KVMM_RQE_F_GIVE_AHEAD from this minor on */
#define KD_ABI_GIVE_AHEAD 19
/* libkvmm answers it (KVMM_RQE_F_GIVE_ACK) from this minor on */
#define KD_ABI_GIVE_ACK 20
/* TIER_STATS' optional request (-EINVAL before) */
#define KD_ABI_TIER_STATS_BODY 21
/* ADMIN_TENANTS' optional request, CACHE_DROP's block_pages (-EINVAL
 * before) */
#define KD_ABI_SIZE_WORDS 22
/* The errno of a command of s naming a block a revocation took:
 * -ESTALE for a client of ABI 1.20 or later, -EINVAL, as any block
 * without pages, before (abi.md, 1.20). */
#define KD_ABI_REVOKED 20

/* The session's minor is below `since` (it is sent what it was then). */
#define KD_ABI_BEFORE(s, since) ((s)->client_minor < (since))

#endif
