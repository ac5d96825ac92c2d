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
 *   - a client that connects and sends nothing gets 408 and a close after
 *     the 2 s read timeout, while another scrape succeeds and the libkvmm
 *     client extends its sequence in well under that time;
 *   - with the 8 connection slots held by silent clients, a ninth scrape
 *     waits in the backlog and is served once their timeouts free slots,
 *     and the libkvmm client is answered meanwhile;
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

static int port;

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
					     NULL };
	/* no map-ahead: the pages allocated are exactly the sequence's */
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.map_ahead_set = 1,
					.map_ahead_blocks = 0 };
	struct kvmm_region *reg;
	struct kvmm_conn *c;
	struct td_daemon d;
	struct tm_resp r, rh;
	struct tm_expo *e = malloc(sizeof(*e));
	uint32_t seq, len = 0;
	char big[8192];
	int fd, idle[SLOTS];
	double t0, dt;
	int err;

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
	/* HEAD: the GET's head, no body */
	tm_http(port, "HEAD /metrics HTTP/1.1\r\n\r\n", 26, &rh);
	t_assert_eq(rh.code, 200);
	t_assert_eq(rh.body_len, 0);
	tm_scrape(port, &r);
	tm_parse(r.body, e);
	/* the series are the same, the length of their text may differ
	 * (uptime, our own connection counts): compare the order only */
	t_assert(rh.content_length > (long)r.body_len / 2 &&
		 rh.content_length < (long)r.body_len * 2);
	tm_resp_free(&r);
	tm_resp_free(&rh);

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

	/* all slots held by silent clients: the next scrape waits for one */
	t0 = tm_now();
	for (int i = 0; i < SLOTS; i++)
		idle[i] = tm_connect(port);
	usleep(100000); /* let the daemon accept them all */
	fd = tm_connect(port); /* in the backlog */
	t_assert_eq(send(fd, "GET /metrics HTTP/1.1\r\n\r\n", 25, MSG_NOSIGNAL),
		    25);
	{
		struct pollfd p = { .fd = fd, .events = POLLIN };

		/* not served while the slots are held */
		t_assert_eq(poll(&p, 1, 500), 0);
	}
	client_works(reg, seq, &len);
	tm_read_resp(fd, &r);
	dt = tm_now() - t0;
	t_assert_eq(r.code, 200);
	tm_parse(r.body, e);
	tm_resp_free(&r);
	close(fd);
	if (dt < READ_TIMEOUT_S - 0.5)
		t_fail("the ninth scrape was served after %.3f s, before a slot was free",
		       dt);
	printf("ninth scrape with %d silent clients: served after %.3f s\n",
	       SLOTS, dt);
	for (int i = 0; i < SLOTS; i++)
		expect_408(idle[i], t0);

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
