// SPDX-License-Identifier: MIT
/*
 * READ: a scrape connection's request head, read as it comes (a byte at
 * a time if the client sends it so), then parsed and answered.  Answers:
 * 200 (GET, HEAD of /metrics: metrics_snapshot.c), 404 (a path other
 * than /metrics), 405 (another method), 400 (not HTTP), 431 (the head is
 * too long), 505 (not HTTP/1.x); 408 (the head did not come in time,
 * metrics_conn.c) and 503 (evicted before its head came, metrics_http.c)
 * are sent elsewhere.  Client bytes are checked, never trusted: the head
 * must be ASCII text within KD_METRICS_REQ_MAX bytes.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "kvmm/kvmmd/metrics_gzip.h"
#include "kvmm/kvmmd/metrics_http_priv.h"

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
		kd_mconn_reply(c, 505, NULL, false);
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
		kd_mconn_reply(c, 404, NULL, false);
		return;
	}
	line[mlen] = '\0';
	get = !strcmp(line, "GET");
	head = !strcmp(line, "HEAD");
	if (!get && !head) {
		c->linger = true; /* a body may be on its way */
		kd_mconn_reply(c, 405, NULL, false);
		return;
	}
	kd_mconn_reply_metrics(c, head, fresh);
	return;
bad:
	kd_mconn_reply(c, 400, NULL, false);
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
bool kd_mconn_read(struct kd_mconn *c)
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
			kd_mconn_close(c);
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
			kd_mconn_reply(c, 431, NULL, false);
			return false;
		}
	}
}
