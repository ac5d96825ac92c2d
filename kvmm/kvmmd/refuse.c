// SPDX-License-Identifier: MIT
/*
 * Refused connections: a connection kvmmd will not serve (session.c's
 * limits) is told why.  Its first message, the HELLO, is answered with
 * the refusal's errno (kd_refusal_errno(): -EUSERS over the uid's
 * --max-sessions-per-uid, -EBUSY when no session is left for it, ...),
 * then the connection is closed.
 *
 * Closing it at accept told the client nothing: its HELLO read EOF, or,
 * when the HELLO had already arrived, ECONNRESET (a Unix socket closed
 * with unread data in its receive queue resets its peer, whose reads then
 * fail before they see what was queued for them).  So the first message
 * is read before the close, and the close leaves nothing unread.
 *
 * What it costs is bounded, whatever a flood of refused connections
 * does: a client connects and sends HELLO before kvmmd accepts, mostly,
 * and is answered at accept; one that has sent nothing yet waits in one
 * of KD_REFUSED_WAITING slots (an fd and a timer, no allocation) for at
 * most --hello-timeout.  When every slot is taken the oldest connection
 * is closed unanswered, as all were before, so a flood costs at most
 * that many fds and never blocks the loop (every read and the reply are
 * non-blocking).
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kvmm/kvmmd/kvmmd.h"

/* Messages read (and dropped) after the first before the close: a client
 * that sent more than its HELLO would otherwise see the reset. */
#define KD_REFUSED_DRAIN 8

int kd_refusal_errno(enum kd_refusal why)
{
	switch (why) {
	case KD_REFUSED_UID_LIMIT:
		return -EUSERS;
	case KD_REFUSED_ADMIN_RESERVED:
	case KD_REFUSED_FULL:
		return -EBUSY;
	case KD_REFUSED_NO_MEMORY:
		return -ENOMEM;
	case KD_REFUSED_QUARANTINE:
		return -ETOOMANYREFS;
	default:
		return -ECONNREFUSED;
	}
}

/* One message off fd, its fds closed: its length (at least the header's
 * when it was cut short), 0 at EOF, or -errno (-EAGAIN: none yet). */
static ssize_t read_one(int fd, struct kvmm_msg_hdr *h)
{
	int fds[KVMM_MSG_MAX_FDS];
	unsigned int nfds = 0;
	ssize_t n;

	memset(h, 0, sizeof(*h));
	/* only the header matters: the rest of a longer message goes */
	n = kw_recv_keep_fds(fd, h, sizeof(*h), fds, &nfds, MSG_DONTWAIT);
	kd_close_client_fds(fds, nfds); /* off the loop: SO_LINGER */
	if (n == -EMSGSIZE || n == -EBADMSG)
		n = sizeof(*h);
	return n;
}

static void slot_close(struct kd_refused *r)
{
	struct kd_daemon *d = r->d;

	kd_timer_cancel(&d->loop, &r->timer);
	kd_loop_del(&d->loop, &r->file);
	close(r->fd);
	r->fd = -1;
	r->used = false;
}

/*
 * Answer fd's first message if it came (true: fd may be closed; so too at
 * EOF or an error), false while there is none yet.
 */
static bool answer(int fd, enum kd_refusal why)
{
	struct kvmm_msg_hdr req, rep = { 0 };
	ssize_t n = read_one(fd, &req);

	if (n == -EAGAIN)
		return false;
	if (n <= 0)
		return true;
	rep.size = sizeof(rep);
	rep.cmd = n >= (ssize_t)sizeof(req) ? req.cmd : 0;
	rep.id = n >= (ssize_t)sizeof(req) ? req.id : 0;
	rep.version = KVMM_ABI_MAJOR;
	rep.flags = KVMM_MSG_F_REPLY;
	rep.status = kd_refusal_errno(why);
	/* a full socket buffer loses the answer, not the loop's time */
	(void)kw_send(fd, &rep, sizeof(rep), NULL, 0, MSG_DONTWAIT);
	for (int i = 0; i < KD_REFUSED_DRAIN; i++)
		if (read_one(fd, &req) <= 0)
			break;
	return true;
}

static void on_refused_readable(struct kd_loop *loop, int fd, uint32_t events,
				void *data)
{
	struct kd_refused *r = data;

	if (answer(fd, r->why) || (events & (EPOLLHUP | EPOLLERR)))
		slot_close(r);
}

static void on_refused_timeout(struct kd_loop *loop, struct kd_timer *t)
{
	slot_close(t->data);
}

/* A free slot, or the one that has waited longest, closed for the new. */
static struct kd_refused *slot_get(struct kd_daemon *d)
{
	struct kd_refused *oldest = &d->refused[0];

	for (int i = 0; i < KD_REFUSED_WAITING; i++) {
		struct kd_refused *r = &d->refused[i];

		if (!r->used)
			return r;
		if (r->since_ns < oldest->since_ns)
			oldest = r;
	}
	slot_close(oldest);
	return oldest;
}

void kd_refuse_conn(struct kd_daemon *d, int fd, enum kd_refusal why)
{
	struct kd_refused *r;

	if (answer(fd, why)) {
		close(fd);
		return;
	}
	r = slot_get(d);
	r->d = d;
	r->why = why;
	r->since_ns = kd_now_ns();
	if (kd_loop_add(&d->loop, &r->file, fd, EPOLLIN, on_refused_readable,
			r)) {
		close(fd);
		return;
	}
	r->fd = fd;
	r->used = true;
	r->timer.fn = on_refused_timeout;
	r->timer.data = r;
	kd_timer_arm(&d->loop, &r->timer,
		     r->since_ns +
			     (uint64_t)d->cfg.hello_timeout_ms * 1000000ull);
}

void kd_refused_free_all(struct kd_daemon *d)
{
	for (int i = 0; i < KD_REFUSED_WAITING; i++)
		if (d->refused[i].used)
			slot_close(&d->refused[i]);
}
