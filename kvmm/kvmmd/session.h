/* SPDX-License-Identifier: MIT */
/*
 * Client sessions (session.c): who gets one, the session object, its end,
 * deferred commands; their replies and the fds they hand out
 * (session_reply.c); the fds clients send, closed off the loop
 * (fd_closer.c).  kvmmd.h includes it.
 */
#ifndef KVMM_KVMMD_SESSION_H
#define KVMM_KVMMD_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvmm/kvmmd/abi_play.h"
#include "kvmm/kvmmd/loop.h"
#include "kvmm/uapi.h"

struct kd_daemon;
struct kd_pin;
struct kd_quota;
struct kd_region;
struct kd_revoke;

struct kd_ring;

/* At most this many client sessions (accept refuses more; --max-sessions
 * may say fewer), the last KD_ADMIN_SESSIONS of them only for admin uids:
 * kvmmctl gets in to list and kill sessions however many other uids
 * opened. */
#define KD_MAX_SESSIONS 1024
#define KD_ADMIN_SESSIONS 16
/* --max-sessions-per-uid's default */
#define KD_SESSIONS_PER_UID (KD_MAX_SESSIONS / 4)
/* --hello-timeout's default, ms */
#define KD_HELLO_TIMEOUT_MS 5000
/* Fds a live session holds: its socket, its pidfd, the ring's memfd and
 * three eventfds (ring.c).  Sizes RLIMIT_NOFILE at start (daemon.c). */
#define KD_SESSION_FDS 6

struct kd_session {
	struct kd_daemon *d;
	struct kd_session *prev, *next;
	uint32_t id;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char name[32];
	int fd;
	struct kd_file file;
	int pidfd; /* -1 when unsupported */
	/* its process's start time at accept (kd_pid_start_time), 0 unknown:
	 * without a pidfd, what tells it from a later process with its pid */
	uint64_t start_time;
	bool hello_done;
	/* the client's abi_minor in its HELLO: what its library does with
	 * what it is sent (abi_play.h) */
	uint16_t client_minor;
	bool admin; /* may run admin commands */
	bool admin_only; /* no rings (kvmmctl) */
	bool said_bye; /* unmapped everything before closing */
	bool in_step;
	bool doomed; /* end at the next safe point (hostile input) */
	bool revoke_timed_out;
	/* A command's reply is deferred (a PREFIX_OPEN waiting for its
	 * restores, cache_pending.c): the socket is not read until it is sent, so
	 * replies stay in request order. */
	bool reply_deferred;
	uint64_t deferred_ns; /* when it was deferred */
	const char *doom_why;
	struct kd_ring *ring;
	struct kd_region *regions;
	uint32_t nr_regions;
	uint64_t nr_sequences;
	uint64_t seq_slots; /* entries of its sequences' block tables */
	/* Per pool page: how many places this process maps it (both sides
	 * count the same way, see region.c). */
	uint32_t *held;
	uint64_t pages_held; /* pages with held[] > 0 */
	uint64_t pages_owned; /* pages of this session's blocks */
	struct kd_quota *quota;
	struct kd_revoke *revokes; /* pending, oldest first */
	struct kd_pin *pins; /* pin.c: this session's pin records */
	uint32_t nr_pins;
	uint64_t pinned_bytes; /* its records' blocks, each its size */
	struct kd_timer revoke_timer;
	struct kd_timer hello_timer; /* armed until HELLO is answered */
	/* time in sendmsg of replies since the command now served began
	 * (KVMMD_SLOW_CMD_US) */
	uint64_t reply_send_ns;
	uint64_t cmds_socket, cmds_ring;
	uint64_t revocations_posted, revocations_acked;
	/*
	 * cache_lend.c, the last request for its blocks ahead: when its
	 * wait ends (CLOCK_MONOTONIC ns, 0: none waits), its cookie (ABI
	 * 1.20: the client answers it; 0 before), when the client answered
	 * it (0: not yet), and its commands (cmds_socket + cmds_ring) when
	 * asked.  silent: a wait ran out with no answer and no command
	 * since it was asked (stopped, hung): not waited for again until
	 * its commands move.
	 */
	uint64_t lend_asked_until;
	uint64_t lend_cookie;
	uint64_t lend_answered_ns;
	uint64_t lend_cmds;
	bool lend_silent;
};

int kd_session_listen(struct kd_daemon *d);
/* What is at --socket PATH may be replaced (a socket): 0, -ENOENT when
 * nothing is there, -EEXIST when something else is (callers say so). */
int kd_socket_path_check(const char *path);
/* Tear down a session.  cut_off: the daemon ends it (timeout, admin);
 * pages its process may still map are quarantined until it exits. */
void kd_session_end(struct kd_session *s, bool cut_off, const char *why);
void kd_session_free_all(struct kd_daemon *d);
/* Mark the session to be cut off at the next safe point. */
void kd_session_doom(struct kd_session *s, const char *why);

/* Release every page hold of the session (its process unmapped them). */
void kd_session_release_holds(struct kd_session *s);
/* Stop reading the session's socket until kd_session_resume(): the
 * current command is answered later.  The session may still end (EOF,
 * admin kill) meanwhile; its revocation deadlines stop, since the client
 * cannot acknowledge while it waits (kd_revoke_resume()). */
void kd_session_defer(struct kd_session *s);
/* The deferred reply was sent: read the socket again.  Ends the session
 * when the reply doomed it (call only outside its socket handler). */
void kd_session_resume(struct kd_session *s);
/* Handle a deferred session's command msg again (a command parked for
 * pool pages, cache_park.c) as if just read.  The session stays deferred:
 * true when the command deferred it again (parked again, or waiting for
 * restores), false when it replied (then the caller resumes it). */
bool kd_session_rerun(struct kd_session *s, void *msg, size_t len);
struct kd_session *kd_session_by_id(struct kd_daemon *d, uint32_t id);
/* KVMMD_SLOW_CMD_US in ns (0: not set): the commands session.c times and
 * the sendmsg of their replies (session_reply.c) */
uint64_t kd_slow_cmd_ns(void);

int kd_session_reply(struct kd_session *s, const struct kvmm_msg_hdr *req,
		     int status, const void *body, size_t len, const int *fds,
		     unsigned int nfds);
/*
 * The same for a reply that hands out pages: fds[i] is the pool's fd of a
 * page (vmm_pool_page_fd()), sent as is, unless ro (NULL: none) names the
 * page there (ro[i] != KD_PAGE_AS_IS): that page is for a process that
 * may only read it (a cached block a prefix open shares), and goes as a
 * read-only fd (vmm_pool_page_fd_readonly(): the pool's, kept while the
 * page is allocated, or past the pool's cap of kept fds one opened for
 * the message alone), or as fds[i] where the backend cannot make one
 * (cuda) or the client's library may map the page writable (a HELLO
 * below KD_ABI_RO_FDS, abi_play.h).  One that cannot be opened fails the reply,
 * which dooms the session (its body announced the fd).
 */
#define KD_PAGE_AS_IS UINT32_MAX
int kd_session_reply_pages(struct kd_session *s, const struct kvmm_msg_hdr *req,
			   int status, const void *body, size_t len,
			   const int *fds, const uint32_t *ro,
			   unsigned int nfds);

/* Close fds a client sent, on a thread of their own: the last close of a
 * socket with SO_LINGER set blocks for as long as its sender chose. */
void kd_close_client_fds(const int *fds, unsigned int n);

#endif
