/* SPDX-License-Identifier: MIT */
/*
 * Trace loader (see trace.h): a small JSON reader for the flat objects of
 * Mooncake traces.  It accepts any JSON value for unknown keys and
 * reports the first problem on a line precisely.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvmm/policy/hmap.h"
#include "kvmm/policy/trace.h"

struct parser {
	const char *p;
	int line;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int fail(struct parser *ps,
						      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (ps->err && ps->errlen) {
		n = snprintf(ps->err, ps->errlen, "line %d: ", ps->line);
		if (n >= 0 && (size_t)n < ps->errlen) {
			va_start(ap, fmt);
			vsnprintf(ps->err + n, ps->errlen - n, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

static void ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r')
		ps->p++;
}

/*
 * Unknown keys may hold any JSON value, skipped by recursion: deeper than
 * this is refused, so a hostile line cannot run the stack out (a trace's
 * objects are flat; 300000 '[' took kvmm-replay down).
 */
#define TRACE_MAX_DEPTH 64

static int skip_value(struct parser *ps, int depth);

static int skip_string(struct parser *ps)
{
	if (*ps->p != '"')
		return fail(ps, "expected a string");
	for (ps->p++; *ps->p && *ps->p != '"' && *ps->p != '\n'; ps->p++)
		if (*ps->p == '\\' && ps->p[1] && ps->p[1] != '\n')
			ps->p++;
	if (*ps->p != '"')
		return fail(ps, "unterminated string");
	ps->p++;
	return 0;
}

static int read_key(struct parser *ps, char *key, size_t len)
{
	const char *s;
	size_t n;

	if (*ps->p != '"')
		return fail(ps, "expected a key");
	s = ++ps->p;
	/* an escaped '"' does not end it (nor does any escape match a
	 * known key: they have none) */
	for (; *ps->p && *ps->p != '"' && *ps->p != '\n'; ps->p++)
		if (*ps->p == '\\' && ps->p[1] && ps->p[1] != '\n')
			ps->p++;
	if (*ps->p != '"')
		return fail(ps, "unterminated key");
	n = (size_t)(ps->p - s);
	if (n >= len)
		n = len - 1;
	memcpy(key, s, n);
	key[n] = '\0';
	ps->p++;
	return 0;
}

/*
 * A number's text, checked against JSON's grammar
 * -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?: no hex, inf or nan, no
 * leading '+' or blanks (strtod's would skip a newline and run the
 * object on into the next line, which then had the wrong number).
 */
struct number {
	const char *s;
	int len;
	bool negative;
	bool integer; /* neither a fraction nor an exponent */
};

static int scan_number(struct parser *ps, const char *key, struct number *n)
{
	const char *p = ps->p;

	n->s = p;
	n->negative = *p == '-';
	n->integer = true;
	if (n->negative)
		p++;
	if (*p == '0')
		p++;
	else if (isdigit((unsigned char)*p))
		while (isdigit((unsigned char)*p))
			p++;
	else
		goto bad;
	if (*p == '.') {
		n->integer = false;
		if (!isdigit((unsigned char)*++p))
			goto bad;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		n->integer = false;
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			goto bad;
		while (isdigit((unsigned char)*p))
			p++;
	}
	/* "0x10", "01", "1.5.2", "2e3f" */
	if (isalnum((unsigned char)*p) || *p == '.' || *p == '_')
		goto bad;
	n->len = (int)(p - n->s);
	ps->p = p;
	return 0;
bad:
	n->len = (int)strcspn(n->s, ",]} \t\r\n");
	if (n->len > 40)
		n->len = 40;
	if (*n->s == '\n' || !*n->s)
		return fail(ps,
			    "%s%s%sexpected a JSON number, not the end of the "
			    "line (one object a line)",
			    key ? "\"" : "", key ? key : "", key ? "\": " : "");
	if (!n->len)
		n->len = 1; /* the delimiter it found instead */
	return fail(ps, "%s%s%sexpected a JSON number, not '%.*s'",
		    key ? "\"" : "", key ? key : "", key ? "\": " : "", n->len,
		    n->s);
}

/*
 * An integer written with a fraction or an exponent (512.0, 1e3) is
 * taken where a double holds it exactly; past 2^53 only its digits say
 * which integer it is (two ids a double rounds alike would be merged).
 */
#define TRACE_EXACT_DOUBLE 9007199254740992.0 /* 2^53 */

/* A JSON integer in [min, max] for key, read exactly. */
static int read_int(struct parser *ps, const char *key, int64_t min,
		    uint64_t max, int64_t *sv, uint64_t *uv)
{
	struct number n;
	double d;
	int e;

	if ((e = scan_number(ps, key, &n)))
		return e;
	errno = 0;
	if (n.integer && !n.negative) {
		*uv = strtoull(n.s, NULL, 10);
		if (errno || *uv > max)
			goto range;
		*sv = (int64_t)*uv;
		return 0;
	}
	if (n.integer) {
		*sv = strtoll(n.s, NULL, 10);
		if (errno || *sv < min)
			goto range;
		*uv = (uint64_t)*sv;
		return 0;
	}
	d = strtod(n.s, NULL);
	if (d < (double)min || d > (double)max)
		goto range;
	if (d > TRACE_EXACT_DOUBLE || d < -TRACE_EXACT_DOUBLE)
		return fail(ps,
			    "\"%s\": %.*s is past 2^53, where a fraction or "
			    "exponent is not exact: write the integer's digits",
			    key, n.len, n.s);
	if (d != (double)(int64_t)d)
		goto range;
	*sv = (int64_t)d;
	*uv = (uint64_t)*sv;
	return 0;
range:
	return fail(ps, "\"%s\" must be an integer in [%lld, %llu], not %.*s",
		    key, (long long)min, (unsigned long long)max, n.len, n.s);
}

static int read_uint(struct parser *ps, const char *key, uint64_t max,
		     uint64_t *v)
{
	int64_t unused;

	return read_int(ps, key, 0, max, &unused, v);
}

/* Milliseconds, >= 0; a fraction is cut off. */
static int read_timestamp(struct parser *ps, uint64_t *ms)
{
	struct number n;
	double d;
	int e;

	if ((e = scan_number(ps, "timestamp", &n)))
		return e;
	errno = 0;
	if (n.integer && !n.negative) {
		*ms = strtoull(n.s, NULL, 10);
		if (errno)
			goto range;
		return 0;
	}
	d = strtod(n.s, NULL);
	/* -0 is 0; 2^64 is the first double past a uint64_t */
	if (d < 0 || d >= 18446744073709551616.0)
		goto range;
	*ms = (uint64_t)d;
	return 0;
range:
	return fail(ps,
		    "\"timestamp\" must be milliseconds in [0, 2^64), not %.*s",
		    n.len, n.s);
}

static int skip_compound(struct parser *ps, char open, char close, int depth)
{
	int r;

	if (depth >= TRACE_MAX_DEPTH)
		return fail(ps, "nested deeper than %d", TRACE_MAX_DEPTH);
	ps->p++;
	ws(ps);
	if (*ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		ws(ps);
		if (open == '{') {
			if ((r = skip_string(ps)))
				return r;
			ws(ps);
			if (*ps->p++ != ':')
				return fail(ps, "expected ':'");
			ws(ps);
		}
		if ((r = skip_value(ps, depth + 1)))
			return r;
		ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			ws(ps);
			if (*ps->p == close)
				return fail(ps,
					    "',' before '%c' (JSON has no "
					    "trailing commas)",
					    close);
			continue;
		}
		if (*ps->p == close) {
			ps->p++;
			return 0;
		}
		return fail(ps, "expected ',' or '%c'", close);
	}
}

static int skip_value(struct parser *ps, int depth)
{
	struct number n;

	switch (*ps->p) {
	case '"':
		return skip_string(ps);
	case '{':
		return skip_compound(ps, '{', '}', depth);
	case '[':
		return skip_compound(ps, '[', ']', depth);
	case 't':
		if (!strncmp(ps->p, "true", 4))
			return ps->p += 4, 0;
		break;
	case 'f':
		if (!strncmp(ps->p, "false", 5))
			return ps->p += 5, 0;
		break;
	case 'n':
		if (!strncmp(ps->p, "null", 4))
			return ps->p += 4, 0;
		break;
	default:
		return scan_number(ps, NULL, &n);
	}
	return fail(ps, "bad value");
}

struct growbuf {
	uint64_t *v;
	size_t n, cap;
};

static int push(struct growbuf *g, uint64_t x)
{
	if (g->n == g->cap) {
		size_t ncap = g->cap ? 2 * g->cap : 4096;
		uint64_t *nv = realloc(g->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		g->v = nv;
		g->cap = ncap;
	}
	g->v[g->n++] = x;
	return 0;
}

/* hash_ids: ps->p at '['; each id an exact uint64_t. */
static int read_hash_ids(struct parser *ps, struct pol_trace_req *r,
			 struct growbuf *hashes)
{
	uint64_t id;
	int e;

	if (*ps->p != '[')
		return fail(ps, "\"hash_ids\" must be an array");
	ps->p++;
	ws(ps);
	if (*ps->p == ']') {
		ps->p++;
		return 0;
	}
	for (;;) {
		if ((e = read_uint(ps, "hash_ids", UINT64_MAX, &id)))
			return e;
		if (r->nblocks == UINT32_MAX)
			return fail(ps, "more than %u hash_ids", UINT32_MAX);
		if (push(hashes, id))
			return -ENOMEM;
		r->nblocks++;
		ws(ps);
		if (*ps->p == ']') {
			ps->p++;
			return 0;
		}
		if (*ps->p != ',')
			return fail(ps, "\"hash_ids\": expected ',' or ']'");
		ps->p++;
		ws(ps);
		if (*ps->p == ']')
			return fail(ps,
				    "\"hash_ids\": ',' before ']' (JSON has "
				    "no trailing commas)");
	}
}

/* The keys a request is read from; any other is skipped. */
static const char *const known_keys[] = {
	"timestamp", "input_length", "output_length", "hash_ids",
	"session",   "ttl_ms",	     "priority",      "tenant",
};
enum {
	K_TIMESTAMP,
	K_INPUT,
	K_OUTPUT,
	K_HASH_IDS,
	K_SESSION,
	K_TTL,
	K_PRIORITY,
	K_TENANT,
	K_COUNT,
};

static int read_field(struct parser *ps, int k, struct pol_trace_req *r,
		      struct growbuf *hashes)
{
	const char *key = known_keys[k];
	uint64_t v = 0;
	int64_t sv;
	int e;

	switch (k) {
	case K_TIMESTAMP:
		return read_timestamp(ps, &r->timestamp_ms);
	case K_HASH_IDS:
		return read_hash_ids(ps, r, hashes);
	case K_SESSION:
		return read_uint(ps, key, UINT64_MAX, &r->session);
	case K_PRIORITY:
		e = read_int(ps, key, INT8_MIN, INT8_MAX, &sv, &v);
		r->priority = (int8_t)sv;
		return e;
	case K_TENANT:
		/* not the others' id (POL_TENANT_OTHERS) */
		e = read_uint(ps, key, UINT32_MAX - 1, &v);
		r->tenant = (uint32_t)v;
		return e;
	default:
		e = read_uint(ps, key, UINT32_MAX, &v);
		if (k == K_INPUT)
			r->input_length = (uint32_t)v;
		else if (k == K_OUTPUT)
			r->output_length = (uint32_t)v;
		else
			r->ttl_ms = (uint32_t)v;
		return e;
	}
}

/* One object; ps->p at '{'. */
static int parse_line(struct parser *ps, struct pol_trace_req *r,
		      struct growbuf *hashes)
{
	bool seen[K_COUNT] = { false };
	uint64_t want;
	char key[64];
	int e, k;

	memset(r, 0, sizeof(*r));
	r->first = hashes->n;
	r->line = (uint32_t)ps->line;
	if (*ps->p != '{')
		return fail(ps, "expected a JSON object");
	ps->p++;
	ws(ps);
	if (*ps->p == '}')
		ps->p++;
	else
		for (;;) {
			if ((e = read_key(ps, key, sizeof(key))))
				return e;
			ws(ps);
			if (*ps->p != ':')
				return fail(ps, "expected ':' after \"%s\"",
					    key);
			ps->p++;
			ws(ps);
			for (k = 0; k < K_COUNT; k++)
				if (!strcmp(key, known_keys[k]))
					break;
			if (k < K_COUNT && seen[k])
				/* which one would count is a guess */
				return fail(ps, "\"%s\" given twice", key);
			if (k < K_COUNT) {
				seen[k] = true;
				e = read_field(ps, k, r, hashes);
			} else {
				e = skip_value(ps, 1);
			}
			if (e)
				return e;
			ws(ps);
			if (*ps->p == '}') {
				ps->p++;
				break;
			}
			if (*ps->p != ',')
				return fail(ps, "expected ',' or '}'");
			ps->p++;
			ws(ps);
			if (*ps->p == '}')
				return fail(ps, "',' before '}' (JSON has no "
						"trailing commas)");
		}
	if (!seen[K_TIMESTAMP] || !seen[K_INPUT] || !seen[K_HASH_IDS])
		return fail(ps, "missing %s",
			    !seen[K_TIMESTAMP] ? "\"timestamp\"" :
			    !seen[K_INPUT]     ? "\"input_length\"" :
						 "\"hash_ids\"");
	/* in 64 bits: input_length + 511 wraps a uint32_t near 2^32 */
	want = ((uint64_t)r->input_length + POL_TRACE_BLOCK_TOKENS - 1) /
	       POL_TRACE_BLOCK_TOKENS;
	if (r->nblocks != want)
		return fail(ps,
			    "%u hash_ids for input_length %u (expected "
			    "ceil(input_length / %d) = %llu)",
			    r->nblocks, r->input_length, POL_TRACE_BLOCK_TOKENS,
			    (unsigned long long)want);
	return 0;
}

static int cmp_req(const void *a, const void *b)
{
	const struct pol_trace_req *x = a, *y = b;

	if (x->timestamp_ms != y->timestamp_ms)
		return x->timestamp_ms < y->timestamp_ms ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

int pol_trace_parse(const char *text, struct pol_trace *t, char *err,
		    size_t errlen)
{
	struct parser ps = {
		.p = text, .line = 1, .err = err, .errlen = errlen
	};
	struct growbuf hashes = { 0 };
	struct pol_trace_req *reqs = NULL;
	size_t n = 0, cap = 0;
	bool sorted = true;
	int e = 0;

	memset(t, 0, sizeof(*t));
	while (*ps.p) {
		ws(&ps);
		if (*ps.p == '\n') {
			ps.p++;
			ps.line++;
			continue;
		}
		if (!*ps.p)
			break;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 1024;
			struct pol_trace_req *nr =
				realloc(reqs, ncap * sizeof(*nr));

			if (!nr) {
				e = -ENOMEM;
				goto err_free;
			}
			reqs = nr;
			cap = ncap;
		}
		e = parse_line(&ps, &reqs[n], &hashes);
		if (e)
			goto err_free;
		if (n && reqs[n].timestamp_ms < reqs[n - 1].timestamp_ms)
			sorted = false;
		n++;
		ws(&ps);
		if (*ps.p && *ps.p != '\n') {
			e = fail(&ps, "trailing characters after the object");
			goto err_free;
		}
	}
	if (!n) {
		ps.line = 0;
		e = fail(&ps, "no requests in the trace");
		goto err_free;
	}
	if (!sorted)
		qsort(reqs, n, sizeof(*reqs), cmp_req);
	t->reqs = reqs;
	t->nreqs = n;
	t->hashes = hashes.v;
	t->nhashes = hashes.n;
	e = pol_trace_clock_check(t, err, errlen);
	if (e) {
		memset(t, 0, sizeof(*t));
		goto err_free;
	}
	return 0;

err_free:
	free(reqs);
	free(hashes.v);
	return e;
}

int pol_trace_clock_check(const struct pol_trace *t, char *err, size_t errlen)
{
	uint64_t t0 = t->nreqs ? t->reqs[0].timestamp_ms : 0;

	for (size_t r = 0; r < t->nreqs; r++) {
		const struct pol_trace_req *q = &t->reqs[r];
		uint64_t d = q->timestamp_ms - t0; /* sorted: no wrap */

		if (d < POL_TRACE_CLOCK_SPAN_MS &&
		    d + q->ttl_ms < POL_TRACE_CLOCK_SPAN_MS)
			continue;
		if (err && errlen)
			snprintf(err, errlen,
				 "line %u: \"timestamp\" %llu%s is 2^44 ms or "
				 "more after the first request's (%llu): "
				 "the replay's clock (ms << 20) cannot "
				 "hold it",
				 q->line, (unsigned long long)q->timestamp_ms,
				 d < POL_TRACE_CLOCK_SPAN_MS ? " + \"ttl_ms\"" :
							       "",
				 (unsigned long long)t0);
		return -EINVAL;
	}
	return 0;
}

bool pol_trace_has_ttl(const struct pol_trace *t,
		       const struct pol_trace_req **first)
{
	for (size_t r = 0; r < t->nreqs; r++)
		if (t->reqs[r].ttl_ms || t->reqs[r].priority) {
			if (first)
				*first = &t->reqs[r];
			return true;
		}
	return false;
}

int pol_trace_load(const char *path, struct pol_trace *t, char *err,
		   size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0, got;
	struct stat stb;
	int e;

	if (!f) {
		e = -errno;
		if (err)
			snprintf(err, errlen, "cannot open %s: %s", path,
				 strerror(-e));
		return e;
	}
	/* a directory opens for reading; its read fails with EISDIR, which
	 * ferror() left unsaid ("cannot read /tmp") */
	if (!fstat(fileno(f), &stb) && S_ISDIR(stb.st_mode)) {
		fclose(f);
		if (err)
			snprintf(err, errlen, "cannot read %s: %s", path,
				 strerror(EISDIR));
		return -EISDIR;
	}
	for (;;) {
		if (cap - len < 65536) {
			char *nb = realloc(buf, cap ? 2 * cap : 1 << 20);

			if (!nb) {
				free(buf);
				fclose(f);
				return -ENOMEM;
			}
			buf = nb;
			cap = cap ? 2 * cap : 1 << 20;
		}
		errno = 0;
		got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
		if (!got)
			break;
	}
	/* the read's own errno where it left one */
	e = ferror(f) ? (errno ? -errno : -EIO) : 0;
	fclose(f);
	if (!e) {
		buf[len] = '\0';
		if (memchr(buf, '\0', len)) {
			if (err)
				snprintf(err, errlen, "%s: binary data", path);
			e = -EINVAL;
		} else {
			e = pol_trace_parse(buf, t, err, errlen);
		}
	} else if (err) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(-e));
	}
	free(buf);
	return e;
}

void pol_trace_free(struct pol_trace *t)
{
	free(t->reqs);
	free(t->hashes);
	free(t->out_hashes);
	memset(t, 0, sizeof(*t));
}

int pol_trace_infer_outputs(struct pol_trace *t)
{
	struct pol_hmap m;
	struct growbuf out = { 0 };

	/* m: last full input block -> the request whose output follows it */
	if (pol_hmap_init(&m, t->nreqs))
		return -ENOMEM;
	/* Output block lists, filled in request order (stable offsets). */
	uint64_t **lists = calloc(t->nreqs, sizeof(*lists));
	if (!lists) {
		pol_hmap_fini(&m);
		return -ENOMEM;
	}
	for (size_t b = 0; b < t->nreqs; b++) {
		struct pol_trace_req *rb = &t->reqs[b];
		const uint64_t *hb = pol_trace_blocks(t, rb);

		/* Does b continue an earlier request's output? */
		for (uint32_t j = 0; j + 1 < rb->nblocks; j++) {
			uint32_t *slot;
			struct pol_trace_req *ra;
			uint32_t a, end, n;

			slot = pol_hmap_slot(&m, hb[j]);
			if (*slot == UINT32_MAX) {
				/* pol_hmap_slot claimed it: it stays empty */
				continue;
			}
			a = *slot;
			ra = &t->reqs[a];
			if (ra->nblocks < 2 || j != ra->nblocks - 2 ||
			    ra->nout) {
				continue;
			}
			end = (ra->input_length + ra->output_length) /
			      POL_TRACE_BLOCK_TOKENS;
			if (end > rb->nblocks)
				end = rb->nblocks;
			n = end > j + 1 ? end - (j + 1) : 0;
			if (n && hb[j + 1] != pol_trace_blocks(t, ra)[j + 1]) {
				ra->nout = n;
				lists[a] = (uint64_t *)(hb + j + 1);
			}
		}
		/* b's own output continues after its last full block. */
		if (rb->nblocks >= 2) {
			uint32_t *slot = pol_hmap_slot(&m, hb[rb->nblocks - 2]);
			if (*slot == UINT32_MAX)
				*slot = (uint32_t)b;
		}
	}
	for (size_t a = 0; a < t->nreqs; a++) {
		struct pol_trace_req *ra = &t->reqs[a];

		ra->out_first = out.n;
		for (uint32_t i = 0; i < ra->nout; i++)
			if (push(&out, lists[a][i])) {
				free(lists);
				pol_hmap_fini(&m);
				free(out.v);
				return -ENOMEM;
			}
	}
	free(lists);
	pol_hmap_fini(&m);
	free(t->out_hashes);
	t->out_hashes = out.v;
	t->nout_hashes = out.n;
	return 0;
}
