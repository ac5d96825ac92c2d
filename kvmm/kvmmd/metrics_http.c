// SPDX-License-Identifier: MIT
/*
 * The Prometheus endpoint: kvmmd --metrics-listen [HOST:]PORT serves
 * GET /metrics (the text of metrics_text.c) from the daemon's one event
 * loop, so it needs no thread and no lock: the reply is a snapshot taken
 * between two commands.
 *
 * Building the text is the endpoint's one real cost to the loop (over a
 * millisecond for 255 tenants' rows, ~240 KB), so it is bounded however
 * the scrapes come: a text built less than KD_METRICS_REUSE_MS ago
 * answers every GET and HEAD (a Prometheus scrapes every 15 s or so: a
 * second's age is nothing to it, and it is not worth rebuilding whenever
 * the state changes, since under load it changes with every command); a
 * HEAD never builds; builds run only from one timer, so at most one per
 * loop turn serves every GET waiting, and the next waits until the loop
 * has run KD_METRICS_BUILD_GAP times as long as this one took (1% of the
 * loop at most).  Cache-Control: no-cache asks for a text built after the
 * request (tests use it to see what they just did).  A scrape whose
 * Accept-Encoding takes gzip (a Prometheus's does) gets the text
 * compressed, made once per built text at the first such scrape and
 * counted against the 1% like a build (metrics_gzip.c): the loop then
 * copies a tenth of the bytes into each socket.
 *
 * A scrape connection is a small state machine, every fd non-blocking:
 *
 *   READ   the request head (request line and headers, up to
 *          KD_METRICS_REQ_MAX bytes, within KD_METRICS_READ_MS of the
 *          accept); the body, if any, is never read
 *   WAIT   a GET with no text to reuse: polled for nothing but a hang-up
 *          until the next build (on_build())
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
 * Every connection answers once and is closed (Connection: close).  At
 * most KD_METRICS_MAX_CONNS are open.  With that many, a new connection
 * takes the slot of the one that has waited longest in READ (evictable());
 * only while all of them have sent their request is the listener taken
 * out of epoll, new connections waiting in the kernel's backlog.  So
 * clients that connect and send nothing, however many, delay a scraper
 * that sends its request at once by a few loop turns at most, and never
 * block the loop or its clients.  Answers: 200 (GET, HEAD), 404 (a path
 * other than /metrics), 405 (another method), 400 (not HTTP), 408 (the
 * head did not come in time), 431 (the head is too long), 503 (evicted
 * before its head came), 505 (not HTTP/1.x).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/metrics_gzip.h"
#include "kvmm/kvmmd/metrics_http.h"
#include "kvmm/kvmmd/metrics_text.h"

#define KD_METRICS_MAX_CONNS 8
/* a built exposition answers plain GETs and HEADs for this long */
#define KD_METRICS_REUSE_MS 1000
/* after a build that took T, the next waits until the loop has run
 * KD_METRICS_BUILD_GAP * T (at most KD_METRICS_REUSE_MS): builds take at
 * most 1% of the loop however the scrapes come */
#define KD_METRICS_BUILD_GAP 99
#define KD_METRICS_REQ_MAX 4096
#define KD_METRICS_READ_MS 2000
#define KD_METRICS_WRITE_MS 10000
#define KD_METRICS_DRAIN_MS 1000
#define KD_METRICS_DRAIN_MAX (256 * 1024)
/* accepts per listener event, so a burst cannot hog one loop turn */
#define KD_METRICS_ACCEPT_BATCH 16
/* accept failing for want of fds: try again after this */
#define KD_METRICS_RETRY_MS 1000

/*
 * One built exposition.  The cache holds a reference while it is the
 * latest, and each connection sending it one, so a text is built once
 * for every scrape it answers and never copied.
 */
struct kd_mtext {
	unsigned int refs;
	uint64_t built_ns; /* when its snapshot was taken */
	size_t len;
	char *data;
	/* its gzip, made at the first scrape that takes it (mtext_gzip());
	 * NULL before, or when that failed (gz_failed: plain text then) */
	char *gz;
	size_t gz_len;
	bool gz_failed;
};

enum kd_mconn_state { KD_MC_READ, KD_MC_WAIT, KD_MC_WRITE, KD_MC_DRAIN };

struct kd_mconn {
	struct kd_metrics *m;
	struct kd_mconn *prev, *next;
	int fd;
	struct kd_file file;
	struct kd_timer timer; /* the deadline of the current state */
	enum kd_mconn_state state;
	size_t req_len;
	/* the reply: head (status line, headers, an error's body), then
	 * body's text when it is a 200 to a GET */
	char head[384];
	size_t head_len;
	struct kd_mtext *body;
	bool gzip; /* the request's Accept-Encoding takes gzip */
	bool body_gz; /* body is sent as its gzip */
	size_t out_off; /* of head then body */
	size_t drained;
	bool linger; /* drain before closing (see DRAIN above) */
	char req[KD_METRICS_REQ_MAX + 1]; /* NUL-terminated */
};

struct kd_metrics {
	struct kd_daemon *d;
	int fd;
	struct kd_file file;
	bool accepting; /* the listener is in epoll */
	struct kd_timer retry; /* re-enables accepting after EMFILE */
	struct kd_mconn *conns;
	unsigned int nr_conns;
	struct kd_mtext *text; /* the latest build, or NULL */
	struct kd_timer build; /* builds for the connections in WAIT */
	uint64_t next_build_ns; /* no build before this (the 1% rule) */
	unsigned long long builds;
	unsigned long long gzips; /* texts compressed */
	unsigned long long evictions; /* see evictable() */
};

static void mtext_put(struct kd_mtext *t)
{
	if (t && !--t->refs) {
		free(t->data);
		free(t->gz);
		free(t);
	}
}

/* ---- address ---- */

static int parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;

	if (!*s || strlen(s) > 5)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (*p - '0');
	}
	if (v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int kd_metrics_parse_listen(const char *s, struct sockaddr_storage *ss,
			    socklen_t *len)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	char host[64];
	const char *port, *colon;
	uint16_t p;

	memset(ss, 0, sizeof(*ss));
	if (!s || !*s)
		goto bad;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':' ||
		    (size_t)(end - s - 1) >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, end - s - 1);
		host[end - s - 1] = '\0';
		if (parse_port(end + 2, &p) ||
		    inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
			goto bad;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(p);
		*len = sizeof(*in6);
		return 0;
	}
	colon = strrchr(s, ':');
	if (!colon) {
		strcpy(host, "127.0.0.1");
		port = s;
	} else {
		if (colon == s || (size_t)(colon - s) >= sizeof(host))
			goto bad;
		memcpy(host, s, colon - s);
		host[colon - s] = '\0';
		port = colon + 1;
		if (!strcmp(host, "localhost"))
			strcpy(host, "127.0.0.1");
	}
	if (parse_port(port, &p) ||
	    inet_pton(AF_INET, host, &in4->sin_addr) != 1)
		goto bad;
	in4->sin_family = AF_INET;
	in4->sin_port = htons(p);
	*len = sizeof(*in4);
	return 0;
bad:
	fprintf(stderr,
		"kvmmd: --metrics-listen: '%s' is not [HOST:]PORT (PORT alone binds 127.0.0.1; HOST an IPv4 address, localhost or [IPv6])\n",
		s ? s : "");
	return -EINVAL;
}

/* "127.0.0.1:9400" or "[::1]:9400" */
static void addr_string(const struct sockaddr_storage *ss, char *buf,
			size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, ntohs(in6->sin6_port));
	} else {
		const struct sockaddr_in *in4 = (const void *)ss;

		inet_ntop(AF_INET, &in4->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(in4->sin_port));
	}
}

/* ---- connections ---- */

static void set_accepting(struct kd_metrics *m, bool on)
{
	if (m->accepting == on)
		return;
	if (!kd_loop_mod(&m->d->loop, &m->file, on ? EPOLLIN : 0))
		m->accepting = on;
}

static void conn_close(struct kd_mconn *c)
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
	mtext_put(c->body);
	free(c);
	if (!m->retry.armed)
		set_accepting(m, true);
}

static void conn_deadline(struct kd_mconn *c, unsigned int ms)
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
			conn_close(c); /* EOF or an error: done */
			return;
		}
		c->drained += n;
		if (c->drained > KD_METRICS_DRAIN_MAX) {
			conn_close(c);
			return;
		}
	}
}

static void conn_write(struct kd_mconn *c)
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
			conn_close(c);
			return;
		}
		c->out_off += n;
	}
	mtext_put(c->body);
	c->body = NULL;
	if (!c->linger) {
		conn_close(c);
		return;
	}
	shutdown(c->fd, SHUT_WR);
	c->state = KD_MC_DRAIN;
	if (kd_loop_mod(&c->m->d->loop, &c->file, EPOLLIN)) {
		conn_close(c);
		return;
	}
	conn_deadline(c, KD_METRICS_DRAIN_MS);
	conn_drain(c);
}

static const char *reason(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 505:
		return "HTTP Version Not Supported";
	}
	return "Error";
}

/*
 * Give text its gzip, once: the first scrape that takes gzip pays for it
 * (about a tenth of a build for the same text), and the next build waits
 * KD_METRICS_BUILD_GAP times as long again, as it does for a build, so
 * compressing stays within the endpoint's 1% of the loop.  A failure
 * leaves the text plain for good.
 */
static void mtext_gzip(struct kd_metrics *m, struct kd_mtext *t)
{
	uint64_t t0, cost;

	if (t->gz || t->gz_failed)
		return;
	t0 = kd_now_ns();
	if (kd_gzip(t->data, t->len, &t->gz, &t->gz_len)) {
		t->gz = NULL;
		t->gz_failed = true;
		return;
	}
	cost = kd_now_ns() - t0;
	if (m->next_build_ns < t0 + cost * (1 + KD_METRICS_BUILD_GAP))
		m->next_build_ns = t0 + cost * (1 + KD_METRICS_BUILD_GAP);
	m->gzips++;
	vmm_log(VMM_LOG_DEBUG,
		"metrics: gzip %llu: %zu bytes to %zu in %llu us", m->gzips,
		t->len, t->gz_len, (unsigned long long)cost / 1000);
}

/*
 * Queue the reply and write what the socket takes.  A 200 carries text:
 * its length, and for a GET its bytes; a HEAD with no text (none built
 * recently enough, see reply_metrics()) leaves Content-Length out, which
 * RFC 9110 8.6 allows, rather than building a body only to measure it.
 * Any other code has the reason as its body.
 */
static void conn_reply(struct kd_mconn *c, int code, struct kd_mtext *text,
		       bool head_only)
{
	char body[64] = "", length[40] = "";
	const char *type = KD_METRICS_CONTENT_TYPE;
	bool gz = false;
	int n;

	if (code != 200) {
		snprintf(body, sizeof(body), "%d %s\n", code, reason(code));
		type = "text/plain; charset=utf-8";
		text = NULL;
	} else if (c->gzip && HAVE_ZLIB) {
		if (text && !head_only)
			mtext_gzip(c->m, text);
		gz = !text || !text->gz_failed;
		/* a HEAD compresses nothing: it says gzip, with the length
		 * only when the text has its gzip already */
		if (gz && text && !text->gz)
			text = NULL;
	}
	if (code != 200 || text)
		snprintf(length, sizeof(length), "Content-Length: %zu\r\n",
			 !text ? strlen(body) :
			 gz    ? text->gz_len :
				 text->len);
	if (head_only)
		body[0] = '\0';
	/* a 200 differs by Accept-Encoding: caches must know */
	n = snprintf(c->head, sizeof(c->head),
		     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
		     "%s%s%s%sConnection: close\r\n\r\n%s",
		     code, reason(code), type, length,
		     gz ? "Content-Encoding: gzip\r\n" : "",
		     code == 200 ? "Vary: Accept-Encoding\r\n" : "",
		     code == 405 ? "Allow: GET, HEAD\r\n" : "", body);
	if (n < 0 || (size_t)n >= sizeof(c->head)) {
		conn_close(c); /* cannot happen: the longest is ~200 bytes */
		return;
	}
	c->head_len = n;
	mtext_put(c->body);
	c->body = NULL;
	if (text && !head_only) {
		text->refs++;
		c->body = text;
		c->body_gz = gz;
	}
	c->out_off = 0;
	c->state = KD_MC_WRITE;
	if (kd_loop_mod(&c->m->d->loop, &c->file, EPOLLOUT)) {
		conn_close(c);
		return;
	}
	conn_deadline(c, KD_METRICS_WRITE_MS);
	conn_write(c);
}

/*
 * Build the exposition as of now into m->text: 0 or -errno.  Only
 * on_build() calls this, so there is at most one build per loop turn,
 * and it sets when the next may come: KD_METRICS_BUILD_GAP times this
 * build's cost later, so a flood of scrapes, however it comes, has the
 * loop for at most 1% of the time (a build of 255 tenants' rows is
 * ~240 KB and over a millisecond; Documentation/admin.md).
 */
static int metrics_build(struct kd_metrics *m)
{
	struct kd_daemon *d = m->d;
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	struct kd_metrics_src src = {
		.st = &st,
		.abi_major = KVMM_ABI_MAJOR,
		.abi_minor = KVMM_ABI_MINOR,
	};
	uint64_t t0 = kd_now_ns(), cost, gap;
	struct kvmm_tenants_reply *tn = NULL;
	struct kd_mtext *t;
	char *text = NULL;
	size_t len = 0, tn_len;
	FILE *f;
	int err;

	kd_status(d, &st);
	if (!kd_cache_tier_stats(d, &ts))
		src.ts = &ts;
	if (!kd_tenants_reply(d, &tn, &tn_len))
		src.tn = tn;
	f = open_memstream(&text, &len);
	if (!f) {
		err = -errno;
		goto out;
	}
	err = kd_metrics_write(f, &src);
	if (fclose(f) && !err)
		err = -EIO;
	if (err)
		goto out;
	t = calloc(1, sizeof(*t));
	if (!t) {
		err = -ENOMEM;
		goto out;
	}
	t->refs = 1; /* the cache's */
	t->built_ns = t0;
	t->len = len;
	t->data = text;
	text = NULL;
	mtext_put(m->text);
	m->text = t;
out:
	free(text);
	free(tn);
	cost = kd_now_ns() - t0;
	gap = cost * KD_METRICS_BUILD_GAP;
	if (gap > KD_METRICS_REUSE_MS * 1000000ull)
		gap = KD_METRICS_REUSE_MS * 1000000ull;
	m->next_build_ns = t0 + cost + gap;
	m->builds++;
	/* what the scrape cost the loop (Documentation/admin.md); the
	 * count lets tests check how many scrapes one build served */
	vmm_log(VMM_LOG_DEBUG,
		"metrics: build %llu: %zu bytes built in %llu us", m->builds,
		len, (unsigned long long)cost / 1000);
	return err;
}

/* The build timer: one build answers every connection waiting for it. */
static void on_build(struct kd_loop *loop, struct kd_timer *timer)
{
	struct kd_metrics *m = timer->data;
	struct kd_mconn *c, *next;
	int err;

	for (c = m->conns; c && c->state != KD_MC_WAIT; c = c->next)
		;
	if (!c)
		return; /* they all hung up */
	err = metrics_build(m);
	for (c = m->conns; c; c = next) {
		next = c->next; /* conn_reply() may free c, nothing else */
		if (c->state != KD_MC_WAIT)
			continue;
		if (err)
			conn_reply(c, 500, NULL, false);
		else
			conn_reply(c, 200, m->text, false);
	}
}

/*
 * GET or HEAD /metrics.  A text built less than KD_METRICS_REUSE_MS ago
 * answers at once, unless the request asked for a fresh one
 * (Cache-Control: no-cache).  Otherwise a HEAD is answered without a
 * length and a GET waits (WAIT) for the next build, which on_build() runs
 * as soon as the 1% rule allows: within a loop turn when the endpoint is
 * quiet, and for every GET waiting then at once.
 */
static void reply_metrics(struct kd_mconn *c, bool head_only, bool fresh)
{
	struct kd_metrics *m = c->m;
	struct kd_loop *loop = &m->d->loop;
	uint64_t now = kd_now_ns();

	if (m->text && !fresh &&
	    now - m->text->built_ns < KD_METRICS_REUSE_MS * 1000000ull) {
		conn_reply(c, 200, m->text, head_only);
		return;
	}
	if (head_only) {
		conn_reply(c, 200, NULL, true);
		return;
	}
	/* no events but a hang-up or an error, which close it */
	c->state = KD_MC_WAIT;
	if (kd_loop_mod(loop, &c->file, 0)) {
		conn_close(c);
		return;
	}
	conn_deadline(c, KD_METRICS_WRITE_MS);
	if (!m->build.armed)
		kd_timer_arm(loop, &m->build,
			     now > m->next_build_ns ? now : m->next_build_ns);
}

static bool is_tchar(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch);
}

/*
 * Whether the header line h, its name ending at colon, is a Cache-Control
 * with the no-cache directive (RFC 9111 5.2.1.4): the client wants a text
 * built after its request, not the one kept for reuse.
 */
static bool asks_no_cache(const char *h, const char *colon)
{
	const char *v = colon + 1;

	if (colon - h != 13 || strncasecmp(h, "Cache-Control", 13))
		return false;
	while (*v) {
		size_t n;

		v += strspn(v, " \t,");
		n = strcspn(v, " \t,=\r");
		if (n == 8 && !strncasecmp(v, "no-cache", 8))
			return true;
		v += n;
		v += strcspn(v, ","); /* an argument, as in max-age=0 */
	}
	return false;
}

/*
 * The head is complete (req[start..end) up to the blank line, after the
 * empty lines skipped before it): answer it.  Request line "METHOD SP
 * TARGET SP HTTP/1.x", then "Name: value" lines.
 */
static void conn_request(struct kd_mconn *c, size_t start, size_t end)
{
	char *line = c->req + start, *eol, *sp1, *sp2, *target;
	size_t mlen, tlen;
	bool get, head, fresh = false;

	c->linger = c->req_len > end; /* more than the head came */
	c->req[end] = '\0';
	for (size_t i = start; i < end; i++) {
		unsigned char ch = c->req[i];

		/* a head is ASCII text; control bytes besides CR LF TAB
		 * (a NUL) mean it is not HTTP */
		if ((ch < 0x20 && ch != '\r' && ch != '\n' && ch != '\t') ||
		    ch == 0x7f)
			goto bad;
	}
	eol = strchr(line, '\n');
	if (!eol)
		goto bad;
	*eol = '\0';
	if (eol > line && eol[-1] == '\r')
		eol[-1] = '\0';
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || strchr(sp2 + 1, ' '))
		goto bad;
	mlen = sp1 - line;
	target = sp1 + 1;
	tlen = sp2 - target;
	if (!mlen || !tlen)
		goto bad;
	for (size_t i = 0; i < mlen; i++)
		if (!is_tchar(line[i]))
			goto bad;
	if (strncmp(sp2 + 1, "HTTP/", 5) || sp2[6] < '0' || sp2[6] > '9' ||
	    sp2[7] != '.' || sp2[8] < '0' || sp2[8] > '9' || sp2[9])
		goto bad;
	if (sp2[6] != '1') {
		conn_reply(c, 505, NULL, false);
		return;
	}
	/* every header line must be "Name: value" */
	for (char *h = eol + 1; *h;) {
		char *next = strchr(h, '\n');
		char *colon = strchr(h, ':');

		if (next)
			*next = '\0';
		if (*h && strcmp(h, "\r") && (!colon || colon == h))
			goto bad;
		if (colon && asks_no_cache(h, colon))
			fresh = true;
		if (colon && colon - h == 15 &&
		    !strncasecmp(h, "Accept-Encoding", 15))
			c->gzip = kd_accepts_gzip(colon + 1);
		if (!next)
			break;
		h = next + 1;
	}
	*sp2 = '\0';
	/* absolute-form (RFC 9112 3.2.2): the path after the authority; the
	 * scheme is case-insensitive (RFC 3986 3.1) */
	if (!strncasecmp(target, "http://", 7)) {
		target = strchr(target + 7, '/');
		if (!target)
			target = "/";
	}
	if (target[0] != '/')
		goto bad;
	tlen = strcspn(target, "?#");
	if (tlen != 8 || strncmp(target, "/metrics", 8)) {
		conn_reply(c, 404, NULL, false);
		return;
	}
	line[mlen] = '\0';
	get = !strcmp(line, "GET");
	head = !strcmp(line, "HEAD");
	if (!get && !head) {
		c->linger = true; /* a body may be on its way */
		conn_reply(c, 405, NULL, false);
		return;
	}
	reply_metrics(c, head, fresh);
	return;
bad:
	conn_reply(c, 400, NULL, false);
}

/*
 * The length of the empty lines (CRLF or LF) before the request line:
 * RFC 9112 2.2 asks a server to ignore at least one, which a client may
 * send after a previous request's body.  They count against the head's
 * cap like any other byte.
 */
static size_t empty_lines(const char *buf, size_t len)
{
	size_t i = 0;

	for (;;) {
		if (i < len && buf[i] == '\n')
			i++;
		else if (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n')
			i += 2;
		else
			return i;
	}
}

/* The end of the head (after its blank line), or 0 when not there yet. */
static size_t head_end(const char *buf, size_t len)
{
	for (size_t i = 1; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i - 1] == '\n')
			return i + 1;
		if (i >= 3 && buf[i - 1] == '\r' && buf[i - 2] == '\n')
			return i + 1;
	}
	return 0;
}

/* Read what came of the head: true while c still waits for the rest,
 * false once it is answered or closed (and perhaps freed). */
static bool conn_read(struct kd_mconn *c)
{
	size_t start, end;
	ssize_t n;

	for (;;) {
		n = recv(c->fd, c->req + c->req_len,
			 KD_METRICS_REQ_MAX - c->req_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0) {
			/* gone before a whole request: nobody to answer */
			conn_close(c);
			return false;
		}
		c->req_len += n;
		start = empty_lines(c->req, c->req_len);
		end = head_end(c->req + start, c->req_len - start);
		if (end) {
			conn_request(c, start, start + end);
			return false;
		}
		if (c->req_len == KD_METRICS_REQ_MAX) {
			c->linger = true;
			conn_reply(c, 431, NULL, false);
			return false;
		}
	}
}

static void on_conn(struct kd_loop *loop, int fd, uint32_t events, void *data)
{
	struct kd_mconn *c = data;

	switch (c->state) {
	case KD_MC_READ:
		conn_read(c);
		break;
	case KD_MC_WAIT:
		/* polled for nothing: a hang-up or an error, nobody to
		 * answer */
		conn_close(c);
		break;
	case KD_MC_WRITE:
		conn_write(c);
		break;
	case KD_MC_DRAIN:
		conn_drain(c);
		break;
	}
}

static void on_conn_timeout(struct kd_loop *loop, struct kd_timer *t)
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
	conn_close(c);
}

static void on_retry(struct kd_loop *loop, struct kd_timer *t)
{
	/* on_accept() stops again if every slot is busy answering */
	set_accepting(t->data, true);
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
		if (!oldest || conn_read(oldest))
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
	conn_close(c);
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
				set_accepting(m, false);
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
			set_accepting(m, false);
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
		c->timer.fn = on_conn_timeout;
		c->timer.data = c;
		if (kd_loop_add(loop, &c->file, cfd, EPOLLIN, on_conn, c)) {
			close(cfd);
			free(c);
			return;
		}
		c->next = m->conns;
		if (m->conns)
			m->conns->prev = c;
		m->conns = c;
		m->nr_conns++;
		conn_deadline(c, KD_METRICS_READ_MS);
		/* a scraper's request is usually here already: answered
		 * now, it cannot be evicted by the next accepts */
		conn_read(c);
	}
}

/* ---- start, stop ---- */

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
	m->build.fn = on_build;
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
	addr_string(&ss, addr, sizeof(addr));
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
		conn_close(m->conns);
	kd_timer_cancel(&d->loop, &m->retry);
	kd_timer_cancel(&d->loop, &m->build);
	kd_loop_del(&d->loop, &m->file);
	close(m->fd);
	mtext_put(m->text);
	free(m);
	d->metrics = NULL;
}
