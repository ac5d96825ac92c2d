// SPDX-License-Identifier: MIT
/*
 * A scrape connection is a small state machine, every fd non-blocking:
 *
 *   READ   the request head (request line and headers, up to
 *          KD_METRICS_REQ_MAX bytes, within KD_METRICS_READ_MS of the
 *          accept); the body, if any, is never read (metrics_request.c)
 *   WAIT   a GET with no text to reuse: polled for nothing but a hang-up
 *          until the next build (kd_metrics_on_build(),
 *          metrics_snapshot.c)
 *   WRITE  the whole reply, head and the shared text, within
 *          KD_METRICS_WRITE_MS
 *   DRAIN  after shutdown(SHUT_WR), only when the client sent or may
 *          still send more than the head (bytes after it, a head over the
 *          cap, a method other than GET or HEAD, which may have a body):
 *          what it sends is read and dropped until it closes, for
 *          KD_METRICS_DRAIN_MS at most, so closing with unread bytes does
 *          not turn into a reset that loses the reply; a plain GET is
 *          closed as soon as its reply is written
 *
 * This file holds what the states share: their events and deadlines,
 * WRITE and DRAIN, and closing, which frees the slot for the listener
 * (metrics_http.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kvmm/kvmmd/metrics_http_priv.h"

void kd_mconn_close(struct kd_mconn *c)
{
	struct kd_metrics *m = c->m;

	kd_timer_cancel(&m->d->loop, &c->timer);
	kd_loop_del(&m->d->loop, &c->file);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		m->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	m->nr_conns--;
	kd_mtext_put(c->body);
	free(c);
	if (!m->retry.armed)
		kd_metrics_set_accepting(m, true);
}

void kd_mconn_deadline(struct kd_mconn *c, unsigned int ms)
{
	kd_timer_arm(&c->m->d->loop, &c->timer,
		     kd_now_ns() + (uint64_t)ms * 1000000ull);
}

static void conn_drain(struct kd_mconn *c)
{
	char buf[4096];
	ssize_t n;

	for (;;) {
		n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			kd_mconn_close(c); /* EOF or an error: done */
			return;
		}
		c->drained += n;
		if (c->drained > KD_METRICS_DRAIN_MAX) {
			kd_mconn_close(c);
			return;
		}
	}
}

void kd_mconn_write(struct kd_mconn *c)
{
	const char *body = !c->body   ? NULL :
			   c->body_gz ? c->body->gz :
					c->body->data;
	size_t body_len = !c->body   ? 0 :
			  c->body_gz ? c->body->gz_len :
				       c->body->len;

	while (c->out_off < c->head_len + body_len) {
		struct iovec iov[2];
		struct msghdr msg = { .msg_iov = iov };
		size_t off = c->out_off;
		ssize_t n;

		if (off < c->head_len) {
			iov[msg.msg_iovlen].iov_base = c->head + off;
			iov[msg.msg_iovlen++].iov_len = c->head_len - off;
			off = c->head_len;
		}
		if (body_len) {
			iov[msg.msg_iovlen].iov_base =
				(char *)body + (off - c->head_len);
			iov[msg.msg_iovlen++].iov_len =
				body_len - (off - c->head_len);
		}
		n = sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return; /* EPOLLOUT brings us back */
		if (n <= 0) {
			kd_mconn_close(c);
			return;
		}
		c->out_off += n;
	}
	kd_mtext_put(c->body);
	c->body = NULL;
	if (!c->linger) {
		kd_mconn_close(c);
		return;
	}
	shutdown(c->fd, SHUT_WR);
	c->state = KD_MC_DRAIN;
	if (kd_loop_mod(&c->m->d->loop, &c->file, EPOLLIN)) {
		kd_mconn_close(c);
		return;
	}
	kd_mconn_deadline(c, KD_METRICS_DRAIN_MS);
	conn_drain(c);
}

void kd_mconn_on_event(struct kd_loop *loop, int fd, uint32_t events,
		       void *data)
{
	struct kd_mconn *c = data;

	switch (c->state) {
	case KD_MC_READ:
		kd_mconn_read(c);
		break;
	case KD_MC_WAIT:
		/* polled for nothing: a hang-up or an error, nobody to
		 * answer */
		kd_mconn_close(c);
		break;
	case KD_MC_WRITE:
		kd_mconn_write(c);
		break;
	case KD_MC_DRAIN:
		conn_drain(c);
		break;
	}
}

void kd_mconn_on_timeout(struct kd_loop *loop, struct kd_timer *t)
{
	struct kd_mconn *c = t->data;

	if (c->state == KD_MC_READ) {
		/* tell it why, if the socket takes it at once; then close */
		static const char msg[] =
			"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n"
			"Connection: close\r\n\r\n";

		if (send(c->fd, msg, sizeof(msg) - 1,
			 MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			/* it learns from the close */
		}
	}
	kd_mconn_close(c);
}
