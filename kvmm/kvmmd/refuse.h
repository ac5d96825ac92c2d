/* SPDX-License-Identifier: MIT */
/*
 * Connections refused at accept (refuse.c; session.c decides): why
 * (enum kd_refusal), the slots they wait in for their HELLO, and the calls
 * that answer and close them.  daemon.h includes it for the slots kd_daemon
 * keeps.
 */
#ifndef KVMM_KVMMD_REFUSE_H
#define KVMM_KVMMD_REFUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "kvmm/kvmmd/loop.h"

struct kd_daemon;

/* Why a connection was closed at accept (session.c), each counted and
 * shown (ADMIN_STATUS, kvmmctl status, kvmm_sessions_refused_total). */
enum kd_refusal {
	KD_REFUSED_UID_LIMIT, /* its uid had --max-sessions-per-uid */
	KD_REFUSED_ADMIN_RESERVED, /* only the admin uids' slots were left */
	KD_REFUSED_FULL, /* KD_MAX_SESSIONS, admins too */
	KD_REFUSED_NO_MEMORY, /* no quota record for its uid */
	/* its uid had --quarantine-per-uid quarantined processes and it was
	 * none of them (zombie.c) */
	KD_REFUSED_QUARANTINE,
	KD_REFUSED_COUNT,
};

/*
 * A refused connection waiting for its first message, to answer it with
 * why (refuse.c).  At most KD_REFUSED_WAITING wait: past that the oldest
 * is closed unanswered, so a flood of refusals holds that many fds.
 */
#define KD_REFUSED_WAITING 32

struct kd_refused {
	struct kd_daemon *d;
	bool used;
	enum kd_refusal why;
	int fd;
	struct kd_file file;
	struct kd_timer timer; /* --hello-timeout after accept */
	uint64_t since_ns; /* accepted (the oldest goes first) */
};

/* The errno a refused connection's HELLO is answered with (abi.md). */
int kd_refusal_errno(enum kd_refusal why);
/* Tell the connection fd (kvmmd's now) why it is refused, and close it. */
void kd_refuse_conn(struct kd_daemon *d, int fd, enum kd_refusal why);
/* The daemon stops: every refused connection still waiting is closed. */
void kd_refused_free_all(struct kd_daemon *d);

#endif
