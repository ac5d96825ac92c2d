// SPDX-License-Identifier: MIT
/*
 * Sessions: one per client connection (one process).
 *
 * Accept takes the peer's pid/uid/gid from SO_PEERCRED and opens a pidfd
 * on the pid, so the daemon can tell when the process is really gone.
 * Each session counts, per pool page, how many places its process maps the
 * page (held[]); the pool's mapper count is the number of sessions holding
 * the page, so a page is reused only when every process that mapped it has
 * unmapped it or died.
 *
 * A session ends in one of three ways:
 *   - BYE then close: the client unmapped everything; holds released.
 *   - EOF without BYE (a crash, SIGKILL): the process is dying; its
 *     address space goes before its fds close, but to be sure the holds
 *     are released when its pidfd becomes readable (without a pidfd, when
 *     kill(pid, 0) says the pid is gone).
 *   - cut off by the daemon (revocation timeout, hostile input, admin
 *     kill): the process may live on with the pages mapped, so the holds
 *     stay quarantined until its pidfd (or, without one, its pid and
 *     start time) says it exited.
 * Ownership (sequences, blocks) and block pins are given back at once in
 * all cases.  Quarantine is zombie.c's: one record per process, whose
 * pages stay charged to its uid's quota until it exits (they are not free,
 * and a live process that dropped connection after connection without BYE
 * would otherwise take the whole pool past its quota).
 *
 * Who gets a session at all: at most --max-sessions (KD_MAX_SESSIONS), the last
 * KD_ADMIN_SESSIONS kept for admin uids; at most --max-sessions-per-uid
 * live ones for any other uid, and none for a new process of a uid with
 * --quarantine-per-uid quarantined ones (zombie.c); and a connection that
 * has not sent HELLO
 * within --hello-timeout is closed.  Without them one uid that opened
 * 1024 connections and sent nothing kept every other client out, kvmmctl
 * too, until it died.  A connection refused gets its HELLO answered with
 * why (refuse.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/test_knob.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define KD_MSGS_PER_WAKE 64
/* fds a request may carry before it is -EBADMSG (abi.md; none is used) */
#define KD_MSG_FDS_MAX 8

static void list_add(struct kd_session **head, struct kd_session *s)
{
	s->prev = NULL;
	s->next = *head;
	if (*head)
		(*head)->prev = s;
	*head = s;
}

static void list_del(struct kd_session **head, struct kd_session *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		*head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
}

struct kd_session *kd_session_by_id(struct kd_daemon *d, uint32_t id)
{
	for (struct kd_session *s = d->sessions; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

void kd_session_doom(struct kd_session *s, const char *why)
{
	if (!s->doomed) {
		s->doomed = true;
		s->doom_why = why;
	}
}

void kd_session_release_holds(struct kd_session *s)
{
	struct kd_daemon *d = s->d;

	for (uint64_t p = 0; p < d->capacity && s->pages_held; p++) {
		if (!s->held[p])
			continue;
		s->held[p] = 0;
		vmm_pool_unmapped(d->pool, p);
		s->pages_held--;
	}
	s->pages_held = 0;
	/* pages nobody else held are free now (a parked command's?) */
	kd_cache_pages_back(d);
}

void kd_session_defer(struct kd_session *s)
{
	s->reply_deferred = true;
	s->deferred_ns = kd_now_ns();
	/* level-triggered: without EPOLLIN a queued message does not wake
	 * the loop again and again; a hang-up still does */
	(void)kd_loop_mod(&s->d->loop, &s->file, 0);
}

void kd_session_resume(struct kd_session *s)
{
	if (!s->reply_deferred)
		return;
	s->reply_deferred = false;
	if (s->doomed) {
		kd_session_end(s, true, s->doom_why);
		return;
	}
	kd_revoke_resume(s, s->deferred_ns);
	/* messages that arrived meanwhile wake the loop at once */
	if (kd_loop_mod(&s->d->loop, &s->file, EPOLLIN))
		kd_session_end(s, false, "epoll");
}

bool kd_session_rerun(struct kd_session *s, void *msg, size_t len)
{
	uint64_t since = s->deferred_ns;
	bool still;

	/* as if just read: the command may defer the session again */
	s->reply_deferred = false;
	kd_proto_socket(s, msg, len, NULL, 0);
	still = s->reply_deferred;
	/* deferred until the caller's kd_session_resume() either way; the
	 * client has waited since the first deferral (revocation clocks) */
	s->reply_deferred = true;
	s->deferred_ns = since;
	return still;
}

static void session_free(struct kd_session *s)
{
	if (s->pidfd >= 0)
		close(s->pidfd);
	s->quota->sessions--;
	kd_quota_maybe_free(s->d, s->quota);
	free(s->held);
	free(s);
}

static bool process_gone(struct kd_session *s)
{
	struct pollfd p = { .fd = s->pidfd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

/*
 * Whether s's process lives on.  Without a pidfd (a kernel before 5.3, a
 * seccomp profile that blocks pidfd_open, EMFILE) the pid is asked, and
 * the start time tells s's process from a later one with its pid.  A
 * wrong yes only keeps pages longer; a wrong no would give pages the
 * process still maps to another owner.
 */
static bool process_lives(struct kd_session *s)
{
	if (s->pidfd >= 0)
		return !process_gone(s);
	return !kd_pid_exited(s->pid, s->start_time);
}

void kd_session_end(struct kd_session *s, bool cut_off, const char *why)
{
	struct kd_daemon *d = s->d;

	if (cut_off) {
		d->ctr.sessions_cut_off++;
		vmm_log(VMM_LOG_WARN, "session %u (pid %d uid %u): cut off: %s",
			s->id, (int)s->pid, s->uid, why);
	} else {
		vmm_log(VMM_LOG_DEBUG, "session %u (pid %d): closed (%s)",
			s->id, (int)s->pid, why);
	}
	kd_loop_del(&d->loop, &s->file);
	close(s->fd);
	s->fd = -1;
	/* a PREFIX_OPEN waiting for restores is forgotten (its sequence goes
	 * with the regions below; the restores finish into the cache) */
	kd_cache_session_end(s);
	s->reply_deferred = false;
	kd_timer_cancel(&d->loop, &s->revoke_timer);
	kd_timer_cancel(&d->loop, &s->hello_timer);
	kd_revoke_free_all(s, false,
			   s->revoke_timed_out ? -ETIMEDOUT : -ECONNRESET);
	kd_pin_release_all(s); /* pins end with the session, however */
	while (s->regions)
		kd_region_destroy(s->regions, false);
	kd_ring_destroy(s);
	list_del(&d->sessions, s);
	d->nr_sessions--;
	s->quota->connected--;

	/* the process may still map the pages: held until it exits; also
	 * after a BYE when the session is cut off before its EOF (the BYE
	 * may have come from a forked child that shares the socket) */
	if (s->pages_held && (cut_off || !s->said_bye) && process_lives(s))
		kd_zombie_quarantine(s, cut_off);
	kd_session_release_holds(s); /* none left when quarantined */
	session_free(s);
}

void kd_session_free_all(struct kd_daemon *d)
{
	while (d->sessions) {
		d->sessions->said_bye = true; /* shutting down: no quarantine */
		kd_session_end(d->sessions, false, "daemon shutdown");
	}
	kd_refused_free_all(d);
	kd_zombies_free_all(d);
}

/*
 * KVMMD_SLOW_CMD_US=N in kvmmd's environment logs (INFO) every socket
 * command whose handling took N microseconds or more, with the part spent
 * in sendmsg of its reply: a diagnostic for where an open's time goes.
 */
uint64_t kd_slow_cmd_ns(void)
{
	static uint64_t ns = UINT64_MAX;

	if (ns == UINT64_MAX) {
		uint64_t us;

		/* unset, empty or 0: off */
		ns = kd_test_knob_number("KVMMD_SLOW_CMD_US", &us) ? 0 :
								     us * 1000;
	}
	return ns;
}

/*
 * The socket is done (EOF, or an error reading it): the session ends, its
 * holds released at once only after a BYE that is still its last word.
 * A submission still in the ring is a command after the BYE as much as
 * one kvmmd took: the loop reads the socket between two ring polls, and
 * a full CQ keeps one there for good, so a parent's ring command after a
 * forked child's BYE was missed and the pages it still mapped were
 * released (tests/daemon-bye-forked-child.c, E).  One sent before the
 * BYE only costs a quarantine.
 */
static void hung_up(struct kd_session *s, const char *why)
{
	if (s->said_bye && s->ring && kd_ring_pending(s))
		s->said_bye = false;
	kd_session_end(s, false, why ? why : s->said_bye ? "bye" : "eof");
}

static void on_readable(struct kd_loop *loop, int fd, uint32_t events,
			void *data)
{
	struct kd_session *s = data;
	static char buf[KVMM_MSG_MAX];
	static int fds[KVMM_MSG_MAX_FDS];

	if (s->reply_deferred) {
		/* not reading until the deferred reply is sent; a hang-up
		 * (the process died) ends the session now */
		if (events & (EPOLLHUP | EPOLLERR))
			kd_session_end(s, false, "hang-up");
		return;
	}
	for (int i = 0; i < KD_MSGS_PER_WAKE && !s->reply_deferred; i++) {
		unsigned int nfds = 0;
		/* every fd a message can carry comes to us, closed off the
		 * loop (kd_close_client_fds()): one the kernel or kw_recv()
		 * dropped would be closed here, and the last close of a
		 * lingering socket blocks */
		ssize_t n = kw_recv_keep_fds(fd, buf, sizeof(buf), fds, &nfds,
					     MSG_DONTWAIT);

		kd_close_client_fds(fds, nfds); /* no command keeps one */
		if (nfds > KD_MSG_FDS_MAX && n > 0)
			n = -EBADMSG; /* the documented limit */
		if (n == -EAGAIN)
			break;
		if (n == 0 || n == -ECONNRESET) {
			hung_up(s, NULL);
			return;
		}
		if (n == -EMSGSIZE || n == -EBADMSG) {
			/* Truncated, or too many fds: answer and go on. */
			struct kvmm_msg_hdr h = { 0 };

			s->d->ctr.cmds_socket++;
			kd_session_reply(s, &h, (int)n, NULL, 0, NULL, 0);
		} else if (n < 0) {
			hung_up(s, strerror((int)-n));
			return;
		} else {
			uint64_t t0 = kd_slow_cmd_ns() ? kd_now_ns() : 0, dt;
			uint16_t cmd = ((const struct kvmm_msg_hdr *)buf)->cmd;

			s->d->ctr.cmds_socket++;
			s->cmds_socket++;
			s->reply_send_ns = 0;
			/* the cache's names for its hashes, once: a command
			 * parked and run again (kd_session_rerun()) has them */
			kd_scope_message(s, buf, (size_t)n);
			kd_proto_socket(s, buf, n, fds, nfds);
			if (s->hello_done)
				kd_timer_cancel(&s->d->loop, &s->hello_timer);
			dt = t0 ? kd_now_ns() - t0 : 0;
			if (t0 && dt >= kd_slow_cmd_ns())
				vmm_log(VMM_LOG_INFO,
					"session %u: command 0x%x took %llu us, %llu us of it sending the reply",
					s->id, cmd,
					(unsigned long long)dt / 1000,
					(unsigned long long)s->reply_send_ns /
						1000);
		}
		if (s->doomed) {
			kd_session_end(s, true, s->doom_why);
			return;
		}
	}
}

static const char *refusal_string(enum kd_refusal why)
{
	switch (why) {
	case KD_REFUSED_UID_LIMIT:
		return "the uid has its most sessions (--max-sessions-per-uid)";
	case KD_REFUSED_ADMIN_RESERVED:
		return "the last sessions are kept for admin uids";
	case KD_REFUSED_FULL:
		return "kvmmd has its most sessions (--max-sessions)";
	case KD_REFUSED_NO_MEMORY:
		return "no memory for its quota";
	case KD_REFUSED_QUARANTINE:
		return "the uid has its most quarantined processes (--quarantine-per-uid)";
	default:
		return "?";
	}
}

/*
 * A refused connection's HELLO is answered with why, then it is closed
 * (refuse.c; cfd is that file's now).  A flood of them would flood the
 * log: one WARN a second at most, with how many were refused since the
 * last; the counts by reason (ADMIN_STATUS) miss none.
 */
static void refuse(struct kd_daemon *d, int cfd, const struct ucred *cred,
		   enum kd_refusal why)
{
	uint64_t now = kd_now_ns();

	d->ctr.sessions_refused[why]++;
	d->refused_unlogged++;
	kd_refuse_conn(d, cfd, why);
	if (d->refused_log_ns && now - d->refused_log_ns < 1000000000ull)
		return;
	vmm_log(VMM_LOG_WARN,
		"refusing connection of pid %d uid %u: %s (%llu refused since the last such line)",
		(int)cred->pid, cred->uid, refusal_string(why),
		(unsigned long long)d->refused_unlogged);
	d->refused_log_ns = now;
	d->refused_unlogged = 0;
}

static void on_hello_timeout(struct kd_loop *loop, struct kd_timer *t)
{
	struct kd_session *s = t->data;

	s->d->ctr.sessions_hello_timeout++;
	vmm_log(VMM_LOG_DEBUG, "session %u (pid %d uid %u): no HELLO in %u ms",
		s->id, (int)s->pid, s->uid, s->d->cfg.hello_timeout_ms);
	/* not cut off: it has nothing to quarantine, and a WARN each
	 * would flood the log as the connections did */
	kd_session_end(s, false, "no HELLO in time");
}

/* Whether a connection of process pid may have a session now: -1, or
 * why not (an enum kd_refusal; the last KD_ADMIN_SESSIONS slots are
 * admins', whom no per-uid limit holds back either). */
static int session_refusal(struct kd_daemon *d, bool admin,
			   const struct kd_quota *q, pid_t pid)
{
	uint32_t per_uid = d->cfg.max_sessions_per_uid;

	if (d->nr_sessions >= d->cfg.max_sessions)
		return KD_REFUSED_FULL;
	if (admin)
		return -1;
	if (d->nr_sessions >= d->cfg.max_sessions - KD_ADMIN_SESSIONS)
		return KD_REFUSED_ADMIN_RESERVED;
	if (per_uid && q->connected >= per_uid)
		return KD_REFUSED_UID_LIMIT;
	if (!kd_zombie_room(d, q, pid))
		return KD_REFUSED_QUARANTINE;
	return -1;
}

static void on_accept(struct kd_loop *loop, int fd, uint32_t events, void *data)
{
	struct kd_daemon *d = data;
	struct kd_session *s;
	struct kd_quota *q;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	bool admin;
	int cfd, why;

	cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (cfd < 0)
		return;
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		goto err_close;
	admin = cred.uid == 0 || cred.uid == d->uid;
	/* never a session whose pages nothing counts */
	q = kd_quota_for(d, cred.uid);
	if (!q) {
		refuse(d, cfd, &cred, KD_REFUSED_NO_MEMORY);
		return;
	}
	why = session_refusal(d, admin, q, cred.pid);
	if (why >= 0) {
		refuse(d, cfd, &cred, why);
		kd_quota_maybe_free(d, q);
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		goto err_quota;
	s->held = calloc(d->capacity, sizeof(*s->held));
	if (!s->held)
		goto err_free;
	s->quota = q;
	q->sessions++;
	s->d = d;
	s->id = d->next_session_id++;
	s->pid = cred.pid;
	s->uid = cred.uid;
	s->gid = cred.gid;
	s->fd = cfd;
	s->admin = admin;
	s->revoke_timer.data = s;
	s->hello_timer.data = s;
	s->hello_timer.fn = on_hello_timeout;
	/* pidfds are always close-on-exec. */
	s->pidfd = syscall(SYS_pidfd_open, cred.pid, 0);
	s->start_time = kd_pid_start_time(cred.pid);
	if (kd_loop_add(&d->loop, &s->file, cfd, EPOLLIN, on_readable, s))
		goto err_pidfd;
	list_add(&d->sessions, s);
	d->nr_sessions++;
	q->connected++;
	d->ctr.sessions_total++;
	kd_timer_arm(&d->loop, &s->hello_timer,
		     kd_now_ns() +
			     (uint64_t)d->cfg.hello_timeout_ms * 1000000ull);
	vmm_log(VMM_LOG_DEBUG, "session %u: pid %d uid %u connected", s->id,
		(int)s->pid, s->uid);
	return;

err_pidfd:
	if (s->pidfd >= 0)
		close(s->pidfd);
	q->sessions--;
	free(s->held);
err_free:
	free(s);
err_quota:
	kd_quota_maybe_free(d, q);
err_close:
	close(cfd);
}

/*
 * Create the socket's directory and any missing one above it (mode 0755,
 * owned by whoever runs kvmmd: root under the shipped units), as mkdir -p
 * does: one level only left a deeper missing path failing at bind(),
 * under the name of the temporary file.  0, or -errno with a line naming
 * the socket path.
 */
static int make_parent_dirs(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct stat st;
	char *p;

	snprintf(dir, sizeof(dir), "%s", path);
	p = strrchr(dir, '/');
	if (!p || p == dir)
		return 0;
	*p = '\0';
	if (!stat(dir, &st))
		goto check;
	for (p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) == 0)
			vmm_log(VMM_LOG_INFO, "created %s", dir);
		*p = '/';
	}
	if (mkdir(dir, 0755) == 0)
		vmm_log(VMM_LOG_INFO, "created %s", dir);
	if (stat(dir, &st)) {
		int err = -errno;

		vmm_log(VMM_LOG_ERR, "--socket %s: creating %s: %s", path, dir,
			strerror(-err));
		return err;
	}
check:
	if (!S_ISDIR(st.st_mode)) {
		vmm_log(VMM_LOG_ERR, "--socket %s: %s is not a directory", path,
			dir);
		return -ENOTDIR;
	}
	return 0;
}

/*
 * What is at the socket path may go: nothing, or a socket.  Anything else
 * (a config file someone mistyped as --socket, a directory) was unlinked
 * and replaced: now the start stops.  kd_config_check() asks first, for
 * exit 2; this is the check at bind time.
 */
int kd_socket_path_check(const char *path)
{
	struct stat st;

	if (lstat(path, &st))
		return errno == ENOENT ? -ENOENT : 0;
	return S_ISSOCK(st.st_mode) ? 0 : -EEXIST;
}

int kd_session_listen(struct kd_daemon *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = d->cfg.socket_path, *bound;
	char tmp[sizeof(sa.sun_path)];
	mode_t old;
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		vmm_log(VMM_LOG_ERR, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	err = make_parent_dirs(path);
	if (err)
		return err;
	err = kd_socket_path_check(path);
	if (err == -EEXIST) {
		vmm_log(VMM_LOG_ERR, "--socket %s: exists and is not a socket",
			path);
		return err;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* A socket file nobody answers on is stale: replace it. */
	if (!err) {
		int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		if (probe >= 0 &&
		    connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			close(fd);
			vmm_log(VMM_LOG_ERR, "%s: another kvmmd is running",
				path);
			return -EADDRINUSE;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	/*
	 * Bound under a name of its own and renamed once it listens: a
	 * client (or a script) that waits for the socket file to appear and
	 * connects at once found it before listen() and was refused
	 * (daemon-systemd did, now and then).  A path too long for the
	 * suffix is bound as it is.
	 */
	bound = tmp;
	if (snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid()) >=
	    (int)sizeof(tmp))
		bound = path;
	else
		unlink(tmp); /* a crashed start's */
	memcpy(sa.sun_path, bound, strlen(bound) + 1);
	old = umask(~d->cfg.socket_mode & 0777);
	err = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	umask(old);
	if (err) {
		vmm_log(VMM_LOG_ERR, "--socket %s: bind %s: %s", path, bound,
			strerror(-err));
		goto err_close;
	}
	chmod(bound, d->cfg.socket_mode);
	/* --socket-group: the engines' users are in it (mode 0660) */
	if (d->cfg.socket_group != (gid_t)-1 &&
	    lchown(bound, (uid_t)-1, d->cfg.socket_group)) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "--socket-group %u: chown %s: %s",
			(unsigned int)d->cfg.socket_group, path,
			strerror(-err));
		goto err_unlink;
	}
	if (listen(fd, 128) < 0) {
		err = -errno;
		goto err_unlink;
	}
	if (bound != path && rename(bound, path)) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "rename %s to %s: %s", bound, path,
			strerror(-err));
		goto err_unlink;
	}
	bound = path;
	err = kd_loop_add(&d->loop, &d->listen_file, fd, EPOLLIN, on_accept, d);
	if (err)
		goto err_unlink;
	d->listen_fd = fd;
	return 0;

err_unlink:
	unlink(bound);
err_close:
	close(fd);
	return err;
}
