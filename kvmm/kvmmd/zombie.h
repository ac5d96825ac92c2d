/* SPDX-License-Identifier: MIT */
/*
 * Quarantine (zombie.c): the pages a cut-off process may still map stay
 * held, and charged to its uid's quota, until it exits; one record per
 * process, a bounded number of pidfds, the rest polled.  kvmmd.h includes
 * it.
 */
#ifndef KVMM_KVMMD_ZOMBIE_H
#define KVMM_KVMMD_ZOMBIE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvmm/kvmmd/loop.h"
#include "kvmm/kvmmd/session.h"
#include "kvmm/uapi.h"

struct kd_daemon;
struct kd_quota;

/* Zombies of one uid that wait on a pidfd; the uid's others are polled. */
#define KD_ZOMBIE_PIDFDS_PER_UID 64
/* Zombies of all uids that wait on a pidfd: in kvmmd's fd budget. */
#define KD_MAX_ZOMBIE_PIDFDS 1024
/*
 * --quarantine-per-uid's default: quarantined processes (zombies) of one
 * non-admin uid past which a new process of that uid gets no session
 * (KD_REFUSED_QUARANTINE): what bounds the records a uid makes, which
 * otherwise grew with the processes it ran (those past the pidfd caps
 * cost a poll each every KD_ZOMBIE_POLL_MS).  Its sessions that live may
 * still add one each, so a uid has at most this + its
 * --max-sessions-per-uid.  256, as many as the default of the latter: a
 * uid with that many live processes cut off is broken.
 */
#define KD_ZOMBIES_PER_UID KD_SESSIONS_PER_UID
/* --quarantine-per-uid's most: a uid's records past its pidfds are
 * polled, a kill(2) and a read of /proc/PID/stat each every
 * KD_ZOMBIE_POLL_MS (about 20000 a second at this many) */
#define KD_ZOMBIES_PER_UID_MAX 4096
/* How often the zombies without a pidfd are looked at (kd_pid_exited). */
#define KD_ZOMBIE_POLL_MS 200
#define KD_ZPAGE_CHARGED 0x80000000u

/* When process pid started (/proc/PID/stat field 22, clock ticks since
 * boot), 0 when unknown: a pid and its start time name one process. */
uint64_t kd_pid_start_time(pid_t pid);
/* Whether the process with pid that started at start_time (0: whichever
 * has it) exited: no process has the pid, or a later process has it.
 * What cannot be read counts as living. */
bool kd_pid_exited(pid_t pid, uint64_t start_time);

/*
 * A quarantine record: the page holds of every session of one process
 * that ended while the process may still map their pages, until it exits.
 */
struct kd_zombie {
	struct kd_daemon *d;
	struct kd_zombie *prev, *next;
	uint32_t id; /* the first session quarantined into it */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char name[32]; /* that session's HELLO name */
	int pidfd; /* -1: over the pidfd caps or none, polled (kd_pid_exited) */
	uint64_t start_time; /* its process's, 0 unknown (kd_pid_start_time) */
	struct kd_file pid_file;
	struct kd_quota *quota; /* its uid's */
	uint32_t sessions; /* sessions quarantined into it */
	uint64_t nr_pages;
	uint32_t *pages; /* the pages it holds, ascending */
	bool *charged; /* per entry of pages[]: charged to its quota */
	uint64_t nr_charged;
};

/* The session ends without BYE while its process lives: its holds pass to
 * its process's zombie (made if it has none) until the process exits. */
void kd_zombie_quarantine(struct kd_session *s, bool cut_off);
/* Pages of a block just freed that a quarantined process still maps are
 * charged to that process's uid until it exits (the block's owner was
 * charged until now), one zombie's for each page. */
void kd_zombies_charge(struct kd_daemon *d, const uint32_t *pages, uint32_t n);
/* Whether a new session of process pid of q's uid may come: the uid has
 * fewer than --quarantine-per-uid zombies, or one of them is pid's process
 * (its sessions add to that one, no new record). */
bool kd_zombie_room(struct kd_daemon *d, const struct kd_quota *q, pid_t pid);
/* ADMIN_SESSIONS's entry for z (KVMM_SESSION_F_QUARANTINED). */
void kd_zombie_info(const struct kd_zombie *z, struct kvmm_session_info *i);
/* Every zombie goes (the daemon stops). */
void kd_zombies_free_all(struct kd_daemon *d);

#endif
