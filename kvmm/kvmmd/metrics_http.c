// SPDX-License-Identifier: MIT
/*
 * The Prometheus endpoint: kvmmd --metrics-listen [HOST:]PORT serves
 * GET /metrics (the text of metrics_text.c) from the daemon's one event
 * loop, so it needs no thread and no lock: the reply is a snapshot taken
 * between two commands.  metrics_http_priv.h lists the files that make
 * it up; this one owns the listener.
 *
 * Every connection answers once and is closed (Connection: close).  At
 * most KD_METRICS_MAX_CONNS are open.  With that many, a new connection
 * takes the slot of the one that has waited longest in READ (evictable());
 * only while all of them have sent their request is the listener taken
 * out of epoll, new connections waiting in the kernel's backlog.  So
 * clients that connect and send nothing, however many, delay a scraper
 * that sends its request at once by a few loop turns at most, and never
 * block the loop or its clients.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kvmm/kvmmd/metrics_http_priv.h"

void kd_metrics_set_accepting(struct kd_metrics *m, bool on)
{
	if (m->accepting == on)
		return;
	if (!kd_loop_mod(&m->d->loop, &m->file, on ? EPOLLIN : 0))
		m->accepting = on;
}

static void on_retry(struct kd_loop *loop, struct kd_timer *t)
{
	/* on_accept() stops again if every slot is busy answering */
	kd_metrics_set_accepting(t->data, true);
}

/*
 * Every slot is taken and a connection waits in the backlog: the
 * connection that has waited longest for its request head, to make room,
 * or NULL when a slot came free or every connection has sent its request
 * (those are answered, never evicted).  Each candidate's socket is read
 * first, so one whose head has just come is answered instead.  Idle
 * connections therefore delay a scraper that sends its request at once by
 * a few turns of the loop at most (KD_METRICS_ACCEPT_BATCH accepts each),
 * however many a client keeps opening.
 */
static struct kd_mconn *evictable(struct kd_metrics *m)
{
	while (m->nr_conns >= KD_METRICS_MAX_CONNS) {
		struct kd_mconn *c, *oldest = NULL;

		for (c = m->conns; c; c = c->next)
			if (c->state == KD_MC_READ)
				oldest = c; /* the list is newest first */
		if (!oldest || kd_mconn_read(oldest))
			return oldest;
	}
	return NULL;
}

/* Close c, which has sent no whole request, for a newer connection. */
static void conn_evict(struct kd_mconn *c)
{
	static const char msg[] =
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
		"Connection: close\r\n\r\n";

	c->m->evictions++; /* logged at stop: a line each would flood */
	if (send(c->fd, msg, sizeof(msg) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) <
	    0) {
		/* it learns from the close */
	}
	kd_mconn_close(c);
}

static void on_accept(struct kd_loop *loop, int fd, uint32_t events, void *data)
{
	struct kd_metrics *m = data;

	for (int i = 0; i < KD_METRICS_ACCEPT_BATCH; i++) {
		struct kd_mconn *c, *victim = NULL;
		int cfd;

		if (m->nr_conns >= KD_METRICS_MAX_CONNS) {
			victim = evictable(m);
			if (!victim && m->nr_conns >= KD_METRICS_MAX_CONNS) {
				/* all are being answered: the rest wait in
				 * the backlog for a free slot */
				kd_metrics_set_accepting(m, false);
				return;
			}
		}
		cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (cfd < 0) {
			if (errno == EAGAIN || errno == EINTR ||
			    errno == ECONNABORTED)
				return;
			/* EMFILE and the like: the listener stays readable,
			 * so stop looking at it for a while */
			vmm_log(VMM_LOG_WARN, "metrics: accept: %s",
				strerror(errno));
			kd_metrics_set_accepting(m, false);
			kd_timer_arm(loop, &m->retry,
				     kd_now_ns() +
					     KD_METRICS_RETRY_MS * 1000000ull);
			return;
		}
		if (victim)
			conn_evict(victim);
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(cfd);
			return;
		}
		c->m = m;
		c->fd = cfd;
		c->state = KD_MC_READ;
		c->timer.fn = kd_mconn_on_timeout;
		c->timer.data = c;
		if (kd_loop_add(loop, &c->file, cfd, EPOLLIN, kd_mconn_on_event,
				c)) {
			close(cfd);
			free(c);
			return;
		}
		c->next = m->conns;
		if (m->conns)
			m->conns->prev = c;
		m->conns = c;
		m->nr_conns++;
		kd_mconn_deadline(c, KD_METRICS_READ_MS);
		/* a scraper's request is usually here already: answered
		 * now, it cannot be evicted by the next accepts */
		kd_mconn_read(c);
	}
}

int kd_metrics_start(struct kd_daemon *d)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct kd_metrics *m;
	char addr[80];
	int one = 1, err;

	if (!d->cfg.metrics_listen[0])
		return 0;
	err = kd_metrics_parse_listen(d->cfg.metrics_listen, &ss, &len);
	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->d = d;
	m->retry.fn = on_retry;
	m->retry.data = m;
	m->build.fn = kd_metrics_on_build;
	m->build.data = m;
	m->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		       0);
	if (m->fd < 0) {
		err = -errno;
		goto err_log;
	}
	/* a restart must not wait for the last scrapes' TIME_WAIT */
	setsockopt(m->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(m->fd, (struct sockaddr *)&ss, len) < 0 ||
	    listen(m->fd, 64) < 0) {
		err = -errno;
		goto err_close;
	}
	len = sizeof(ss);
	if (getsockname(m->fd, (struct sockaddr *)&ss, &len) < 0) {
		err = -errno;
		goto err_close;
	}
	err = kd_loop_add(&d->loop, &m->file, m->fd, EPOLLIN, on_accept, m);
	if (err)
		goto err_close;
	m->accepting = true;
	d->metrics = m;
	kd_metrics_addr_string(&ss, addr, sizeof(addr));
	vmm_log(VMM_LOG_INFO, "metrics: serving http://%s/metrics", addr);
	return 0;

err_close:
	close(m->fd);
err_log:
	vmm_log(VMM_LOG_ERR, "--metrics-listen %s: %s", d->cfg.metrics_listen,
		strerror(-err));
	free(m);
	return err;
}

void kd_metrics_stop(struct kd_daemon *d)
{
	struct kd_metrics *m = d->metrics;

	if (!m)
		return;
	if (m->evictions)
		vmm_log(VMM_LOG_INFO,
			"metrics: %llu connections without a request closed for newer ones",
			m->evictions);
	while (m->conns)
		kd_mconn_close(m->conns);
	kd_timer_cancel(&d->loop, &m->retry);
	kd_timer_cancel(&d->loop, &m->build);
	kd_loop_del(&d->loop, &m->file);
	close(m->fd);
	kd_mtext_put(m->text);
	free(m);
	d->metrics = NULL;
}
