// SPDX-License-Identifier: MIT
/*
 * The reply to a scrape: a status line, headers and, for any code but
 * 200, the reason as its body, formatted into the connection's head
 * buffer; a 200 to a GET is followed by the shared text (or its gzip),
 * which the connection holds a reference to and never copies.  Once
 * queued, the connection goes to WRITE (metrics_conn.c).
 */
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "kvmm/kvmmd/metrics_http_priv.h"
#include "kvmm/kvmmd/metrics_text.h"

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
 * Queue the reply and write what the socket takes.  A 200 carries text:
 * its length, and for a GET its bytes; a HEAD with no text (none built
 * recently enough, see kd_mconn_reply_metrics()) leaves Content-Length
 * out, which RFC 9110 8.6 allows, rather than building a body only to
 * measure it.
 * Any other code has the reason as its body.
 */
void kd_mconn_reply(struct kd_mconn *c, int code, struct kd_mtext *text,
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
			kd_mtext_gzip(c->m, text);
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
		/* cannot happen: the longest is ~200 bytes */
		kd_mconn_close(c);
		return;
	}
	c->head_len = n;
	kd_mtext_put(c->body);
	c->body = NULL;
	if (text && !head_only) {
		text->refs++;
		c->body = text;
		c->body_gz = gz;
	}
	c->out_off = 0;
	c->state = KD_MC_WRITE;
	if (kd_loop_mod(&c->m->d->loop, &c->file, EPOLLOUT)) {
		kd_mconn_close(c);
		return;
	}
	kd_mconn_deadline(c, KD_METRICS_WRITE_MS);
	kd_mconn_write(c);
}
