// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * kvmmd's GET /metrics compresses for a scrape that takes gzip:
 *   - Accept-Encoding parsing (kd_accepts_gzip()): gzip and x-gzip in any
 *     case, with parameters and spaces, q above 0; "*" when gzip is not
 *     named; gzip;q=0 (any spelling of zero) or *;q=0 refuse it; other
 *     codings and look-alike names do not count;
 *   - against a real daemon with 64 tenant rows: a GET with
 *     "Accept-Encoding: gzip" gets Content-Encoding: gzip, Vary:
 *     Accept-Encoding and a Content-Length equal to the compressed bytes,
 *     which inflate to exactly the plain text a GET without it gets from
 *     the same build, at least 4x smaller; the text is compressed once
 *     however many scrapes take it (kvmmd's debug log counts "metrics:
 *     gzip N"); a HEAD taking gzip gets the compressed length; a GET with
 *     gzip;q=0 gets the plain text, no Content-Encoding.
 * Built without zlib: every scrape gets the plain text.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "kvmm/kvmmd/metrics_gzip.h"
#include "tests/lib/daemon.h"
#include "tests/lib/metrics.h"
#include "tests/lib/test.h"

#define TENANTS 64

static struct td_daemon d;

/* The N of kvmmd's last debug line "metrics: KEY N..." (0: none). */
static unsigned long logged(const char *what)
{
	char key[64], line[1024];
	unsigned long n = 0;
	const char *p;
	FILE *f = fopen(d.log, "r");

	snprintf(key, sizeof(key), "metrics: %s ", what);
	t_assert(f);
	while (fgets(line, sizeof(line), f))
		if ((p = strstr(line, key)))
			n = strtoul(p + strlen(key), NULL, 10);
	fclose(f);
	return n;
}

static void parse_cases(void)
{
	static const struct {
		const char *v;
		bool gzip;
	} cases[] = {
		{ " gzip", true },
		{ " gzip\r", true },
		{ "gzip, deflate, br", true },
		{ " deflate, GZip;q=1.0", true },
		{ " x-gzip", true },
		{ " br;q=1, gzip ; q=0.5\r", true },
		{ " gzip;q=0.001", true },
		{ " gzip;level=1;q=1", true },
		{ " *", true },
		{ " deflate, *;q=0.3", true },
		{ " gzip;q=0", false },
		{ " gzip; q=0.000\r", false },
		{ " gzip;Q=0.", false },
		{ " *;q=0", false },
		{ " *, gzip;q=0", false },
		{ " gzip;q=0, *", false },
		{ " identity", false },
		{ " deflate, br", false },
		{ " gzipx", false },
		{ " xgzip", false },
		{ "", false },
		{ "\r", false },
		{ " ,,, ;", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (kd_accepts_gzip(cases[i].v) != cases[i].gzip)
			t_fail("Accept-Encoding:%s: gzip %s, expected %s",
			       cases[i].v, cases[i].gzip ? "refused" : "taken",
			       cases[i].gzip ? "taken" : "refused");
	printf("Accept-Encoding: %zu cases\n",
	       sizeof(cases) / sizeof(cases[0]));
}

static char *inflate_all(const char *gz, size_t len, size_t *out_len)
{
	size_t cap = 1 << 20;
	char *out = malloc(cap);
	z_stream z = { 0 };

	t_assert(out);
	t_assert_eq(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)len;
	for (;;) {
		char *grown;
		int r;

		z.next_out = (Bytef *)out + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		r = inflate(&z, Z_FINISH);
		if (r == Z_STREAM_END)
			break;
		if (r != Z_BUF_ERROR && r != Z_OK)
			t_fail("inflate: %d", r);
		grown = realloc(out, 2 * cap);
		t_assert(grown);
		out = grown;
		cap *= 2;
	}
	t_assert_eq(z.avail_in, 0); /* one member, nothing after it */
	*out_len = z.total_out;
	inflateEnd(&z);
	return out;
}

#define REQ(s) s, sizeof(s) - 1

int main(void)
{
	static const char *const extra[] = { "--metrics-listen", "127.0.0.1:0",
					     "--log-level", "debug", NULL };
	struct tm_resp gz, plain, head;
	unsigned long build = 0;
	char cmd[4096];
	int port, tries;

	parse_cases();
	t_ok(td_start(&d, extra));
	port = tm_port(&d);
	t_assert(port > 0);
	/* tenant rows make a text worth compressing */
	snprintf(
		cmd, sizeof(cmd),
		"for u in $(seq 3001 %d); do %s --socket %s tenant-limit $u gpu:4 >/dev/null || exit 1; done",
		3000 + TENANTS, td_build_path("kvmmctl", (char[256]){ 0 }, 256),
		d.sock);
	t_assert_eq(system(cmd), 0);

	if (!HAVE_ZLIB) {
		tm_http(port,
			REQ("GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n"),
			&plain);
		t_assert_eq(plain.code, 200);
		t_assert(!strcasestr(plain.head, "Content-Encoding"));
		t_assert(strstr(plain.body, "# TYPE kvmm_up gauge"));
		tm_resp_free(&plain);
		td_stop(&d);
		printf("built without zlib: plain text\n");
		return 0;
	}
	/* a fresh build compressed, then a plain GET of the same build (a
	 * slow machine may let the second come after the text's second: try
	 * again then) */
	for (tries = 0; tries < 10; tries++) {
		tm_http(port,
			REQ("GET /metrics HTTP/1.1\r\nAccept-Encoding: deflate, gzip\r\n"
			    "Cache-Control: no-cache\r\n\r\n"),
			&gz);
		build = logged("build");
		tm_http(port, REQ("GET /metrics HTTP/1.1\r\n\r\n"), &plain);
		if (logged("build") == build)
			break;
		tm_resp_free(&gz);
		tm_resp_free(&plain);
	}
	t_assert(tries < 10);
	t_assert_eq(gz.code, 200);
	t_assert(strstr(gz.head, "\r\nContent-Encoding: gzip"));
	t_assert(strstr(gz.head, "\r\nVary: Accept-Encoding"));
	t_assert(
		strstr(gz.head, "\r\nContent-Type: text/plain; version=0.0.4"));
	t_assert_eq(gz.content_length, gz.body_len);
	t_assert_eq(plain.code, 200);
	t_assert(!strcasestr(plain.head, "Content-Encoding"));
	t_assert(strstr(plain.head, "\r\nVary: Accept-Encoding"));
	t_assert_eq(plain.content_length, plain.body_len);
	{
		size_t n;
		char *text = inflate_all(gz.body, gz.body_len, &n);

		t_assert_eq(n, plain.body_len);
		t_assert(!memcmp(text, plain.body, n));
		t_assert(strstr(plain.body, "kvmm_tenant_limit_blocks"));
		printf("GET /metrics: %zu bytes, gzip %zu (%.1fx)\n", n,
		       gz.body_len, (double)n / (double)gz.body_len);
		t_assert(gz.body_len * 4 < n);
		free(text);
	}
	t_assert_eq(logged("gzip"), 1);

	/* more gzip scrapes of the same text: no second compression; a
	 * HEAD gets the compressed length; q=0 gets plain text */
	tm_http(port,
		REQ("GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n"),
		&head);
	tm_resp_free(&head);
	tm_http(port,
		REQ("HEAD /metrics HTTP/1.1\r\nAccept-Encoding: GZIP\r\n\r\n"),
		&head);
	if (logged("build") == build) {
		t_assert_eq(logged("gzip"), 1);
		t_assert(strstr(head.head, "\r\nContent-Encoding: gzip"));
		t_assert_eq(head.content_length, gz.body_len);
		t_assert_eq(head.body_len, 0);
	}
	tm_resp_free(&head);
	tm_http(port,
		REQ("GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip;q=0, identity\r\n\r\n"),
		&head);
	t_assert_eq(head.code, 200);
	t_assert(!strcasestr(head.head, "Content-Encoding"));
	t_assert(strstr(head.body, "# TYPE kvmm_up gauge"));
	tm_resp_free(&head);
	/* a text not compressed yet: a HEAD taking gzip says gzip without
	 * a length, and compresses nothing */
	tm_scrape(port, &head); /* a new build, plain */
	tm_resp_free(&head);
	build = logged("build");
	tm_http(port,
		REQ("HEAD /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n"),
		&head);
	if (logged("build") == build) {
		t_assert(strstr(head.head, "\r\nContent-Encoding: gzip"));
		t_assert_eq(head.content_length, -1);
		t_assert_eq(logged("gzip"), 1);
	}
	tm_resp_free(&head);
	tm_resp_free(&gz);
	tm_resp_free(&plain);
	t_ok(td_stop(&d));
	return 0;
}
