/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the Prometheus endpoint tests: the bound port from kvmmd's
 * log, a plain HTTP/1.x exchange over TCP, and a strict reader of the text
 * exposition format (version 0.0.4) that fails the test, naming the line,
 * on anything a Prometheus server would reject or that breaks kvmm's
 * conventions:
 *
 *   - metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
 *     [a-zA-Z_][a-zA-Z0-9_]*, label values are quoted with only \\ \" \n
 *     escapes, no label twice in a sample;
 *   - every sample's family has one HELP and one TYPE line before its
 *     first sample, and a family's samples are consecutive;
 *   - counters end in _total, gauges do not;
 *   - values parse as floats (NaN, +Inf, -Inf included);
 *   - no series (name and label set) twice; the text ends with a newline.
 */
#ifndef KVMM_TESTS_METRICS_H
#define KVMM_TESTS_METRICS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define TM_MAX_SAMPLES 512
#define TM_MAX_FAMILIES 256

struct tm_sample {
	char name[128];
	char labels[256]; /* as written, without the braces */
	char value[64]; /* as written */
};

struct tm_family {
	char name[128];
	char type[16];
	bool help, has_type;
	unsigned int samples;
};

struct tm_expo {
	struct tm_sample s[TM_MAX_SAMPLES];
	size_t n;
	struct tm_family f[TM_MAX_FAMILIES];
	size_t nf;
};

static inline double tm_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The port of "metrics: serving http://127.0.0.1:PORT/metrics" in the
 * daemon's log (kvmmd was started with --metrics-listen 127.0.0.1:0). */
static inline int tm_port(const struct td_daemon *d)
{
	static char log[65536];
	const char *key = "metrics: serving http://127.0.0.1:";
	const char *p;

	for (int i = 0; i < 500; i++) {
		if (td_read_log(d, log, sizeof(log)) > 0 &&
		    (p = strstr(log, key)))
			return atoi(p + strlen(key));
		usleep(10000);
	}
	td_dump_log(d);
	t_fail("no 'metrics: serving' line in kvmmd's log");
	return -1;
}

/* A connected TCP socket to 127.0.0.1:port with 10 s receive timeout. */
static inline int tm_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	t_assert(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		t_fail("connect 127.0.0.1:%d: %s", port, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

struct tm_resp {
	int code;
	char head[2048]; /* status line and headers, NUL-terminated */
	char *body; /* malloc'd, NUL-terminated */
	size_t body_len;
	long content_length; /* -1: no header */
};

static inline void tm_resp_free(struct tm_resp *r)
{
	free(r->body);
	r->body = NULL;
}

/* Read a whole reply up to the server's close (it must close). */
static inline void tm_read_resp(int fd, struct tm_resp *r)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap + 1), *sep, *cl;
	ssize_t n;

	t_assert(buf);
	for (;;) {
		if (len == cap) {
			char *grown = realloc(buf, 2 * cap + 1);

			t_assert(grown);
			buf = grown;
			cap *= 2;
		}
		n = recv(fd, buf + len, cap - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			t_fail("reading the reply: %s (after %zu bytes)",
			       strerror(errno), len);
		if (!n)
			break;
		len += n;
	}
	buf[len] = '\0';
	memset(r, 0, sizeof(*r));
	sep = strstr(buf, "\r\n\r\n");
	if (!sep || (size_t)(sep - buf) >= sizeof(r->head))
		t_fail("no HTTP head in %zu bytes: '%.200s'", len, buf);
	memcpy(r->head, buf, sep - buf);
	r->head[sep - buf] = '\0';
	if (sscanf(r->head, "HTTP/1.1 %d ", &r->code) != 1)
		t_fail("bad status line: '%.100s'", r->head);
	r->body_len = len - (sep + 4 - buf);
	r->body = malloc(r->body_len + 1);
	t_assert(r->body);
	memcpy(r->body, sep + 4, r->body_len);
	r->body[r->body_len] = '\0';
	cl = strcasestr(r->head, "\r\nContent-Length: ");
	r->content_length = cl ? atol(cl + 18) : -1;
	free(buf);
}

/* Send req (len bytes) on a fresh connection; the reply in *r. */
static inline void tm_http(int port, const char *req, size_t len,
			   struct tm_resp *r)
{
	int fd = tm_connect(port);

	t_assert_eq(send(fd, req, len, MSG_NOSIGNAL), len);
	tm_read_resp(fd, r);
	close(fd);
}

/*
 * GET /metrics: 200 with the exposition's content type and length.  It
 * asks for a text built after the request (Cache-Control: no-cache), so
 * what the test did just before shows; a plain GET may get one built up
 * to a second earlier.
 */
static inline void tm_scrape(int port, struct tm_resp *r)
{
	static const char req[] =
		"GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
		"User-Agent: kvmm-test\r\nAccept: text/plain\r\n"
		"Cache-Control: no-cache\r\n\r\n";

	tm_http(port, req, sizeof(req) - 1, r);
	if (r->code != 200)
		t_fail("GET /metrics: %d\n%s", r->code, r->head);
	t_assert(
		strstr(r->head, "\r\nContent-Type: text/plain; version=0.0.4"));
	t_assert(strstr(r->head, "\r\nConnection: close"));
	t_assert_eq(r->content_length, r->body_len);
}

static inline bool tm_name_ok(const char *s, size_t n, bool colon)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		bool alpha = (ch >= 'a' && ch <= 'z') ||
			     (ch >= 'A' && ch <= 'Z') || ch == '_' ||
			     (colon && ch == ':');

		if (!alpha && !(i && ch >= '0' && ch <= '9'))
			return false;
	}
	return true;
}

static inline size_t tm_name_len(const char *s)
{
	return strcspn(s, " {\t\n");
}

static inline struct tm_family *tm_family(struct tm_expo *e, const char *name,
					  size_t n, bool create)
{
	for (size_t i = 0; i < e->nf; i++)
		if (strlen(e->f[i].name) == n &&
		    !strncmp(e->f[i].name, name, n))
			return &e->f[i];
	if (!create)
		return NULL;
	t_assert(e->nf < TM_MAX_FAMILIES && n < sizeof(e->f[0].name));
	memset(&e->f[e->nf], 0, sizeof(e->f[0]));
	memcpy(e->f[e->nf].name, name, n);
	return &e->f[e->nf++];
}

static inline bool tm_ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* Labels "a="x",b="y"": checked, and copied into out as written. */
static inline void tm_labels(int lineno, const char *p, const char **end,
			     char *out, size_t cap)
{
	const char *start = p;
	char names[16][64];
	int nn = 0;

	while (*p != '}') {
		size_t n = strcspn(p, "=");

		if (!tm_name_ok(p, n, false) || n >= sizeof(names[0]))
			t_fail("line %d: bad label name '%.*s'", lineno, (int)n,
			       p);
		for (int i = 0; i < nn; i++)
			if (strlen(names[i]) == n && !strncmp(names[i], p, n))
				t_fail("line %d: label '%.*s' twice", lineno,
				       (int)n, p);
		t_assert(nn < 16);
		memcpy(names[nn], p, n);
		names[nn++][n] = '\0';
		p += n;
		if (p[0] != '=' || p[1] != '"')
			t_fail("line %d: label value not quoted", lineno);
		for (p += 2; *p != '"'; p++) {
			if (!*p || *p == '\n')
				t_fail("line %d: unterminated label value",
				       lineno);
			if (*p == '\\') {
				p++;
				if (*p != '\\' && *p != '"' && *p != 'n')
					t_fail("line %d: bad escape \\%c",
					       lineno, *p);
			}
		}
		p++;
		if (*p == ',')
			p++;
		else if (*p != '}')
			t_fail("line %d: expected , or } after a label",
			       lineno);
	}
	if ((size_t)(p - start) >= cap)
		t_fail("line %d: labels too long for the test", lineno);
	memcpy(out, start, p - start);
	out[p - start] = '\0';
	*end = p + 1;
}

static inline void tm_sample_line(struct tm_expo *e, int lineno,
				  const char *line, struct tm_family **last)
{
	size_t n = tm_name_len(line);
	struct tm_sample *s;
	struct tm_family *f;
	const char *p = line + n;
	char *end;

	if (!tm_name_ok(line, n, true) || n >= sizeof(s->name))
		t_fail("line %d: bad metric name '%.*s'", lineno, (int)n, line);
	t_assert(e->n < TM_MAX_SAMPLES);
	s = &e->s[e->n];
	memset(s, 0, sizeof(*s));
	memcpy(s->name, line, n);
	if (*p == '{')
		tm_labels(lineno, p + 1, &p, s->labels, sizeof(s->labels));
	if (*p != ' ')
		t_fail("line %d: no space before the value", lineno);
	p++;
	n = strcspn(p, " \n");
	if (!n || n >= sizeof(s->value))
		t_fail("line %d: no value", lineno);
	memcpy(s->value, p, n);
	strtod(s->value, &end);
	if (*end)
		t_fail("line %d: value '%s' is not a float", lineno, s->value);
	p += n;
	if (*p == ' ') { /* a timestamp: an integer of milliseconds */
		strtoll(p + 1, &end, 10);
		if (end == p + 1 || *end != '\n')
			t_fail("line %d: bad timestamp", lineno);
	} else if (*p != '\n') {
		t_fail("line %d: junk after the value", lineno);
	}
	f = tm_family(e, s->name, strlen(s->name), false);
	if (!f) {
		/* _bucket, _sum, _count of a histogram or summary */
		static const char *const sfx[] = { "_bucket", "_sum",
						   "_count" };

		for (int i = 0; i < 3 && !f; i++)
			if (tm_ends_with(s->name, sfx[i]))
				f = tm_family(e, s->name,
					      strlen(s->name) - strlen(sfx[i]),
					      false);
		if (f && strcmp(f->type, "histogram") &&
		    strcmp(f->type, "summary"))
			f = NULL;
	}
	if (!f || !f->help || !f->has_type)
		t_fail("line %d: %s has no HELP and TYPE before it", lineno,
		       s->name);
	if (!strcmp(f->type, "counter") && !tm_ends_with(s->name, "_total"))
		t_fail("line %d: counter %s does not end in _total", lineno,
		       s->name);
	if (!strcmp(f->type, "gauge") && tm_ends_with(s->name, "_total"))
		t_fail("line %d: gauge %s ends in _total", lineno, s->name);
	if (f != *last && f->samples)
		t_fail("line %d: samples of %s are not together", lineno,
		       f->name);
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->s[i].name, s->name) &&
		    !strcmp(e->s[i].labels, s->labels))
			t_fail("line %d: series %s{%s} twice", lineno, s->name,
			       s->labels);
	f->samples++;
	*last = f;
	e->n++;
}

/* Check and read a whole exposition (see the top of this file). */
static inline void tm_parse(const char *text, struct tm_expo *e)
{
	struct tm_family *last = NULL;
	const char *line = text;
	int lineno = 0;

	memset(e, 0, sizeof(*e));
	if (!*text || text[strlen(text) - 1] != '\n')
		t_fail("the exposition does not end with a newline");
	for (; *line; line = strchr(line, '\n') + 1) {
		lineno++;
		if (*line == '\n')
			continue;
		if (!strncmp(line, "# HELP ", 7) ||
		    !strncmp(line, "# TYPE ", 7)) {
			bool help = line[2] == 'H';
			const char *name = line + 7;
			size_t n = tm_name_len(name);
			struct tm_family *f;

			if (!tm_name_ok(name, n, true))
				t_fail("line %d: bad name", lineno);
			f = tm_family(e, name, n, true);
			if (f->samples)
				t_fail("line %d: %s after samples of %s",
				       lineno, help ? "HELP" : "TYPE", f->name);
			if (help ? f->help : f->has_type)
				t_fail("line %d: second %s for %s", lineno,
				       help ? "HELP" : "TYPE", f->name);
			if (help) {
				f->help = true;
				continue;
			}
			if (name[n] != ' ')
				t_fail("line %d: TYPE without a type", lineno);
			n = sscanf(name + n + 1, "%15[a-z]", f->type);
			if (n != 1 || (strcmp(f->type, "counter") &&
				       strcmp(f->type, "gauge") &&
				       strcmp(f->type, "histogram") &&
				       strcmp(f->type, "summary") &&
				       strcmp(f->type, "untyped")))
				t_fail("line %d: unknown type", lineno);
			f->has_type = true;
			continue;
		}
		if (*line == '#')
			continue; /* a comment */
		tm_sample_line(e, lineno, line, &last);
	}
}

/* The value of series name{labels} as written, NULL when absent. */
static inline const char *tm_value(const struct tm_expo *e, const char *name,
				   const char *labels)
{
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->s[i].name, name) &&
		    !strcmp(e->s[i].labels, labels ? labels : ""))
			return e->s[i].value;
	return NULL;
}

/* The same, which must be there. */
static inline const char *tm_get(const struct tm_expo *e, const char *name,
				 const char *labels)
{
	const char *v = tm_value(e, name, labels);

	if (!v)
		t_fail("no series %s{%s}", name, labels ? labels : "");
	return v;
}

/* An integer series, which must be there. */
static inline unsigned long long tm_u64(const struct tm_expo *e,
					const char *name, const char *labels)
{
	const char *v = tm_get(e, name, labels);
	char *end;
	unsigned long long x = strtoull(v, &end, 10);

	if (*end)
		t_fail("%s{%s} = %s is not an integer", name,
		       labels ? labels : "", v);
	return x;
}

/* A command's whole standard output (NULL-terminated string, malloc'd);
 * *status gets its exit status. */
static inline char *tm_run(const char *cmd, int *status)
{
	FILE *p = popen(cmd, "r");
	size_t cap = 65536, len = 0, n;
	char *buf = malloc(cap + 1);
	int st;

	t_assert(p && buf);
	while ((n = fread(buf + len, 1, cap - len, p)) > 0) {
		len += n;
		if (len == cap) {
			char *grown = realloc(buf, 2 * cap + 1);

			t_assert(grown);
			buf = grown;
			cap *= 2;
		}
	}
	buf[len] = '\0';
	st = pclose(p);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	return buf;
}

/* The whole standard output of `kvmmctl --socket sock args` (malloc'd),
 * which must exit 0: the test fails naming the command otherwise. */
static inline char *tm_kvmmctl(const char *sock, const char *args)
{
	char bin[256], cmd[512];
	char *out;
	int st;

	td_build_path("kvmmctl", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "%s --socket %s %s", bin, sock, args);
	out = tm_run(cmd, &st);
	if (st)
		t_fail("%s: exit %d", cmd, st);
	return out;
}

#endif
