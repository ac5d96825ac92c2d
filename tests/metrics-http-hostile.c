// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * kvmmd's GET /metrics endpoint against bad and hostile HTTP clients, on a
 * real daemon with a libkvmm client working meanwhile:
 *   - answers: 404 for other paths, 405 (with Allow) for other methods,
 *     400 for garbage and NUL bytes, 505 for HTTP/2.0, 431 for a head
 *     over 4 KiB (the rest drained, the reply not lost to a reset), HEAD
 *     a head with the GET's Content-Length, HTTP/1.0, a query string,
 *     the absolute form (any case of "http://") and empty lines before
 *     the request line served, a request sent a byte at a time served;
 *   - one build serves many scrapes (kvmmd's debug log counts builds):
 *     plain GETs within a second of a build get its very bytes and build
 *     nothing, a HEAD gets its exact Content-Length, a HEAD with nothing
 *     to reuse has none and builds nothing, Cache-Control: no-cache gets a
 *     new build; 8 such GETs at once are all answered;
 *   - a client that connects and sends nothing gets 408 and a close after
 *     the 2 s read timeout, while another scrape succeeds and the libkvmm
 *     client extends its sequence in well under that time;
 *   - with the 8 connection slots held by silent clients, a ninth scrape
 *     is served at once: the oldest silent client is closed (503) for it,
 *     the others get their 408s; the libkvmm client is answered meanwhile;
 *   - a client keeping 60 silent connections open and reopening each one
 *     the daemon closes does not hold up scrapes (each answered within
 *     3 s; before evictions each took 12-13 s);
 *   - 50 connections closed at once leave the endpoint serving.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/metrics.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define SLOTS 8
#define READ_TIMEOUT_S 2.0
#define HOGS 60

static int port;
static struct td_daemon d;

/* How many expositions kvmmd has built: the N of its last debug line
 * "metrics: build N: ..." (0 before the first). */
static unsigned long builds(void)
{
	static const char key[] = "metrics: build ";
	unsigned long n = 0;
	char line[1024];
	const char *p;
	FILE *f = fopen(d.log, "r");

	t_assert(f);
	while (fgets(line, sizeof(line), f))
		if ((p = strstr(line, key)))
			n = strtoul(p + sizeof(key) - 1, NULL, 10);
	fclose(f);
	return n;
}

/* One request, its status code (the body freed). */
static int code_of(const char *req, size_t len)
{
	struct tm_resp r;
	int code;

	tm_http(port, req, len, &r);
	code = r.code;
	t_assert_eq(r.content_length, r.body_len);
	tm_resp_free(&r);
	return code;
}

#define CODE(lit) code_of(lit, sizeof(lit) - 1)

/* The libkvmm client still gets answers quickly: grow by one block. */
static void client_works(struct kvmm_region *reg, uint32_t seq, uint32_t *len)
{
	double t0 = tm_now();

	*len += TR_TPB;
	t_ok(kvmm_seq_extend(reg, seq, *len));
	if (tm_now() - t0 > 1.0)
		t_fail("a SEQ_EXTEND took %.3f s", tm_now() - t0);
}

/* Wait for the reply to a silent connection: 408 then EOF. */
static double expect_408(int fd, double since)
{
	struct tm_resp r;

	tm_read_resp(fd, &r);
	t_assert_eq(r.code, 408);
	tm_resp_free(&r);
	close(fd);
	return tm_now() - since;
}

int main(void)
{
	static const char *const extra[] = { "--metrics-listen", "127.0.0.1:0",
					     "--log-level", "debug", NULL };
	static const char fresh_req[] =
		"GET /metrics HTTP/1.1\r\nCache-Control: no-cache\r\n\r\n";
	static const char head_fresh[] =
		"HEAD /metrics HTTP/1.1\r\n"
		"Cache-Control: max-age=0, No-Cache\r\n\r\n";
	/* no map-ahead: the pages allocated are exactly the sequence's */
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.map_ahead_set = 1,
					.map_ahead_blocks = 0 };
	struct kvmm_region *reg;
	struct kvmm_conn *c;
	struct tm_resp r, rh;
	struct tm_expo *e = malloc(sizeof(*e));
	uint32_t seq, len = 0;
	char big[8192];
	int fd, idle[SLOTS], hog[HOGS];
	unsigned long b0, b1;
	double t0, dt;
	int err, reused;

	t_assert(e);
	err = td_start(&d, extra);
	if (err)
		t_fail("daemon did not start: %s", strerror(-err));
	port = tm_port(&d);
	co.name = "metrics-hostile";
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &tr_small_region, &reg));
	t_ok(kvmm_seq_open(reg, &seq));
	client_works(reg, seq, &len);

	/* answers */
	t_assert_eq(CODE("GET /foo HTTP/1.1\r\n\r\n"), 404);
	t_assert_eq(CODE("GET / HTTP/1.1\r\n\r\n"), 404);
	t_assert_eq(CODE("GET /metricsx HTTP/1.1\r\n\r\n"), 404);
	t_assert_eq(CODE("DELETE /metrics HTTP/1.1\r\n\r\n"), 405);
	tm_http(port,
		"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 49,
		&r);
	t_assert_eq(r.code, 405);
	t_assert(strstr(r.head, "\r\nAllow: GET, HEAD"));
	tm_resp_free(&r);
	t_assert_eq(CODE("garbage\r\n\r\n"), 400);
	t_assert_eq(CODE("GET /metrics\r\n\r\n"), 400);
	t_assert_eq(CODE("GET  /metrics HTTP/1.1\r\n\r\n"), 400);
	t_assert_eq(CODE("GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n"),
		    400);
	t_assert_eq(CODE("GET /met\0rics HTTP/1.1\r\n\r\n"), 400);
	t_assert_eq(CODE("GET metrics HTTP/1.1\r\n\r\n"), 400);
	t_assert_eq(CODE("GET /metrics HTTP/2.0\r\n\r\n"), 505);
	t_assert_eq(CODE("GET /metrics HTTP/1.0\r\n\r\n"), 200);
	t_assert_eq(CODE("GET /metrics HTTP/1.1\n\n"), 200);
	t_assert_eq(CODE("GET /metrics?name[]=kvmm_up HTTP/1.1\r\n\r\n"), 200);
	t_assert_eq(CODE("GET http://localhost:9/metrics HTTP/1.1\r\n\r\n"),
		    200);
	/* the scheme is case-insensitive */
	t_assert_eq(CODE("GET HTTP://localhost:9/metrics HTTP/1.1\r\n\r\n"),
		    200);
	t_assert_eq(CODE("GET hTTp://localhost:9/x HTTP/1.1\r\n\r\n"), 404);
	/* empty lines before the request line are ignored (RFC 9112 2.2) */
	t_assert_eq(CODE("\r\nGET /metrics HTTP/1.1\r\n\r\n"), 200);
	t_assert_eq(CODE("\r\n\n\r\nGET /metrics HTTP/1.1\r\n\r\n"), 200);
	t_assert_eq(CODE("\r\n\r\nGET /x HTTP/1.1\r\n\r\n"), 404);
	t_assert_eq(CODE("\r\n \r\nGET /metrics HTTP/1.1\r\n\r\n"), 400);
	/* a head too long for the 4 KiB cap; the daemon reads no further
	 * than that, answers, and drains the rest before closing */
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /metrics HTTP/1.1\r\nX-Pad: ", 30);
	t_assert_eq(code_of(big, sizeof(big)), 431);
	/* one build serves the scrapes of the next second: a fresh scrape
	 * builds; plain GETs answered less than a second after it asked get
	 * its bytes, a HEAD its length, and nothing is built; later ones
	 * build at most once a second.  kvmmd reuses a text while the
	 * request comes less than a second after the build: the build was
	 * after t0 and the request before its reply was read, so a reply
	 * read within a second of t0 must be the reused text.  (Judged by
	 * when the request was sent, a reply delayed past the second by a
	 * loaded machine was a new build and failed the test.) */
	b0 = builds();
	t0 = tm_now();
	tm_scrape(port, &r);
	b1 = builds();
	t_assert(b1 > b0);
	reused = 0;
	for (int i = 0; i < 20; i++) {
		tm_http(port, "GET /metrics HTTP/1.1\r\n\r\n", 25, &rh);
		t_assert_eq(rh.code, 200);
		t_assert_eq(rh.content_length, rh.body_len);
		if (tm_now() - t0 < 1.0) {
			t_assert(rh.body_len == r.body_len &&
				 !memcmp(rh.body, r.body, r.body_len));
			reused++;
		}
		tm_resp_free(&rh);
		tm_http(port, "HEAD /metrics HTTP/1.1\r\n\r\n", 26, &rh);
		t_assert_eq(rh.code, 200);
		t_assert_eq(rh.body_len, 0);
		t_assert(strstr(rh.head,
				"\r\nContent-Type: text/plain; version=0.0.4"));
		if (tm_now() - t0 < 1.0) {
			t_assert_eq(rh.content_length, r.body_len);
			reused++;
		}
		tm_resp_free(&rh);
	}
	dt = tm_now() - t0;
	/* the first GET at least: a round trip of a second is no test */
	if (!reused)
		t_fail("no reply within a second of the fresh scrape (%.3f s for 40)",
		       dt);
	if (builds() - b1 > 1 + (unsigned long)dt)
		t_fail("40 plain GETs and HEADs in %.3f s: %lu builds", dt,
		       builds() - b1);
	printf("40 plain GETs and HEADs after a fresh scrape: %lu builds in %.3f s, %d checked for the fresh scrape's text\n",
	       builds() - b1, dt, reused);
	tm_parse(r.body, e); /* after: the second counts from t0 */
	tm_resp_free(&r);
	/* a HEAD that may not reuse a text: no length, no build */
	b0 = builds();
	tm_http(port, head_fresh, sizeof(head_fresh) - 1, &rh);
	t_assert_eq(rh.code, 200);
	t_assert_eq(rh.body_len, 0);
	t_assert_eq(rh.content_length, -1);
	t_assert_eq(builds(), b0);
	tm_resp_free(&rh);
	/* fresh GETs at once: all answered, from one build or a few */
	{
		int fds[SLOTS];

		b0 = builds();
		for (int i = 0; i < SLOTS; i++) {
			fds[i] = tm_connect(port);
			t_assert_eq(send(fds[i], fresh_req,
					 sizeof(fresh_req) - 1, MSG_NOSIGNAL),
				    sizeof(fresh_req) - 1);
		}
		for (int i = 0; i < SLOTS; i++) {
			tm_read_resp(fds[i], &r);
			t_assert_eq(r.code, 200);
			t_assert_eq(r.content_length, r.body_len);
			tm_parse(r.body, e);
			tm_resp_free(&r);
			close(fds[i]);
		}
		b1 = builds() - b0;
		t_assert(b1 >= 1 && b1 <= SLOTS);
		printf("%d fresh GETs at once: %lu builds\n", SLOTS, b1);
	}

	/* a request sent a byte at a time */
	{
		static const char req[] = "GET /metrics HTTP/1.1\r\n\r\n";

		fd = tm_connect(port);
		for (size_t i = 0; i < sizeof(req) - 1; i++) {
			t_assert_eq(send(fd, req + i, 1, MSG_NOSIGNAL), 1);
			usleep(2000);
		}
		tm_read_resp(fd, &r);
		t_assert_eq(r.code, 200);
		tm_parse(r.body, e);
		tm_resp_free(&r);
		close(fd);
	}
	client_works(reg, seq, &len);

	/* a silent client: the loop, another scrape and the libkvmm client
	 * go on; it gets 408 after the read timeout */
	t0 = tm_now();
	fd = tm_connect(port);
	tm_scrape(port, &r);
	tm_resp_free(&r);
	client_works(reg, seq, &len);
	t_assert(tm_now() - t0 < READ_TIMEOUT_S);
	dt = expect_408(fd, t0);
	if (dt < READ_TIMEOUT_S - 0.5 || dt > READ_TIMEOUT_S + 3)
		t_fail("the silent client was closed after %.3f s", dt);
	printf("silent client: 408 after %.3f s\n", dt);

	/* all slots held by silent clients: the next scrape takes the slot
	 * of the one that has waited longest.  kvmmd accepts in the order
	 * the connects returned (one listen queue), so the scrape comes
	 * after the eight whether or not it accepted them yet.  Waiting for
	 * a slot instead, it would be served at a read timeout at the
	 * earliest, READ_TIMEOUT_S after the first connect */
	t0 = tm_now();
	for (int i = 0; i < SLOTS; i++)
		idle[i] = tm_connect(port);
	tm_scrape(port, &r);
	dt = tm_now() - t0;
	tm_parse(r.body, e);
	tm_resp_free(&r);
	if (dt >= READ_TIMEOUT_S)
		t_fail("the ninth scrape was served after %.3f s: it waited for a read timeout",
		       dt);
	printf("ninth scrape with %d silent clients: served after %.3f s\n",
	       SLOTS, dt);
	client_works(reg, seq, &len);
	tm_read_resp(idle[0], &r);
	t_assert_eq(r.code, 503);
	tm_resp_free(&r);
	close(idle[0]);
	for (int i = 1; i < SLOTS; i++) {
		dt = expect_408(idle[i], t0);
		if (dt < READ_TIMEOUT_S - 0.5)
			t_fail("silent client %d closed after %.3f s", i, dt);
	}

	/* a client keeping HOGS silent connections open, opening a new one
	 * for each the daemon closes: scrapes still get through */
	for (int i = 0; i < HOGS; i++)
		hog[i] = tm_connect(port);
	for (int k = 0; k < 3; k++) {
		struct pollfd p[HOGS + 1];

		t0 = tm_now();
		fd = tm_connect(port);
		t_assert_eq(send(fd, fresh_req, sizeof(fresh_req) - 1,
				 MSG_NOSIGNAL),
			    sizeof(fresh_req) - 1);
		for (;;) {
			for (int i = 0; i < HOGS; i++)
				p[i] = (struct pollfd){ .fd = hog[i],
							.events = POLLIN };
			p[HOGS] = (struct pollfd){ .fd = fd, .events = POLLIN };
			t_assert(poll(p, HOGS + 1, 10) >= 0);
			if (p[HOGS].revents)
				break;
			if (tm_now() - t0 > 15)
				t_fail("no reply to a scrape in 15 s");
			/* a reply (503, 408) or a close: open another */
			for (int i = 0; i < HOGS; i++) {
				if (!p[i].revents)
					continue;
				close(hog[i]);
				hog[i] = tm_connect(port);
			}
		}
		tm_read_resp(fd, &r);
		dt = tm_now() - t0;
		close(fd);
		t_assert_eq(r.code, 200);
		tm_parse(r.body, e);
		tm_resp_free(&r);
		if (dt > 3)
			t_fail("scrape %d behind %d silent connections kept open: %.3f s",
			       k, HOGS, dt);
		printf("scrape %d behind %d silent connections kept open: %.3f s\n",
		       k, HOGS, dt);
		client_works(reg, seq, &len);
	}
	for (int i = 0; i < HOGS; i++)
		close(hog[i]);

	/* connections opened and closed at once */
	for (int i = 0; i < 50; i++)
		close(tm_connect(port));
	tm_scrape(port, &r);
	tm_parse(r.body, e);
	t_assert_eq(tm_u64(e, "kvmm_sequences", NULL), 1);
	t_assert_eq(tm_u64(e, "kvmm_pool_allocated_pages", NULL),
		    len / TR_TPB * 4);
	tm_resp_free(&r);
	client_works(reg, seq, &len);

	kvmm_disconnect(c);
	free(e);
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
