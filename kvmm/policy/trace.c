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
		if (*ps->p == '\\' && ps->p[1])
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
	while (*ps->p && *ps->p != '"' && *ps->p != '\n')
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

static int read_number(struct parser *ps, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(ps->p, &end);
	if (end == ps->p || errno)
		return fail(ps, "expected a number");
	ps->p = end;
	return 0;
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
	double d;

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
		return read_number(ps, &d);
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

static int integral(struct parser *ps, const char *key, double d, double max,
		    double min)
{
	if (d != (double)(long long)d || d < min || d > max)
		return fail(ps, "'%s' must be an integer in [%.0f, %.0f]", key,
			    min, max);
	return 0;
}

/* One object; ps->p at '{'. */
static int parse_line(struct parser *ps, struct pol_trace_req *r,
		      struct growbuf *hashes)
{
	bool have_ts = false, have_in = false, have_out = false,
	     have_ids = false;
	char key[64];
	double d;
	int e;

	memset(r, 0, sizeof(*r));
	r->first = hashes->n;
	r->line = (uint32_t)ps->line;
	if (*ps->p != '{')
		return fail(ps, "expected a JSON object");
	ps->p++;
	for (;;) {
		ws(ps);
		if (*ps->p == '}' && !have_ts && !have_ids)
			break;
		if ((e = read_key(ps, key, sizeof(key))))
			return e;
		ws(ps);
		if (*ps->p++ != ':')
			return fail(ps, "expected ':' after \"%s\"", key);
		ws(ps);
		if (!strcmp(key, "hash_ids")) {
			if (*ps->p != '[')
				return fail(ps, "hash_ids must be an array");
			ps->p++;
			ws(ps);
			while (*ps->p != ']') {
				if ((e = read_number(ps, &d)) ||
				    (e = integral(ps, "hash_ids", d, 1.8e19,
						  0)))
					return e;
				if (push(hashes, (uint64_t)d))
					return -ENOMEM;
				r->nblocks++;
				ws(ps);
				if (*ps->p == ',') {
					ps->p++;
					ws(ps);
				} else if (*ps->p != ']') {
					return fail(ps, "bad hash_ids array");
				}
			}
			ps->p++;
			have_ids = true;
		} else if (!strcmp(key, "timestamp") ||
			   !strcmp(key, "input_length") ||
			   !strcmp(key, "output_length") ||
			   !strcmp(key, "session") || !strcmp(key, "ttl_ms") ||
			   !strcmp(key, "priority") || !strcmp(key, "tenant")) {
			if ((e = read_number(ps, &d)))
				return e;
			if (!strcmp(key, "timestamp")) {
				if (d < 0 || d > 1.8e19)
					return fail(ps, "bad timestamp");
				r->timestamp_ms = (uint64_t)d;
				have_ts = true;
			} else if (!strcmp(key, "priority")) {
				if ((e = integral(ps, key, d, 127, -128)))
					return e;
				r->priority = (int8_t)d;
			} else if (!strcmp(key, "session")) {
				if ((e = integral(ps, key, d, 1.8e19, 0)))
					return e;
				r->session = (uint64_t)d;
			} else if (!strcmp(key, "tenant")) {
				/* not the others' id (POL_TENANT_OTHERS) */
				if ((e = integral(ps, key, d, 4294967294.0, 0)))
					return e;
				r->tenant = (uint32_t)d;
			} else {
				if ((e = integral(ps, key, d, 4294967295.0, 0)))
					return e;
				if (!strcmp(key, "input_length"))
					r->input_length = (uint32_t)d,
					have_in = true;
				else if (!strcmp(key, "output_length"))
					r->output_length = (uint32_t)d,
					have_out = true;
				else
					r->ttl_ms = (uint32_t)d;
			}
		} else if ((e = skip_value(ps, 1))) {
			return e;
		}
		ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == '}')
			break;
		return fail(ps, "expected ',' or '}'");
	}
	ps->p++;
	if (!have_ts || !have_in || !have_ids)
		return fail(ps, "missing %s",
			    !have_ts ? "\"timestamp\"" :
			    !have_in ? "\"input_length\"" :
				       "\"hash_ids\"");
	(void)have_out;
	if (r->nblocks != (r->input_length + POL_TRACE_BLOCK_TOKENS - 1) /
				  POL_TRACE_BLOCK_TOKENS)
		return fail(ps,
			    "%u hash_ids for input_length %u (expected "
			    "ceil(input_length / %d) = %u)",
			    r->nblocks, r->input_length, POL_TRACE_BLOCK_TOKENS,
			    (r->input_length + POL_TRACE_BLOCK_TOKENS - 1) /
				    POL_TRACE_BLOCK_TOKENS);
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
	return 0;

err_free:
	free(reqs);
	free(hashes.v);
	return e;
}

int pol_trace_load(const char *path, struct pol_trace *t, char *err,
		   size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0, got;
	int e;

	if (!f) {
		e = -errno;
		if (err)
			snprintf(err, errlen, "cannot open %s: %s", path,
				 strerror(-e));
		return e;
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
		got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
		if (!got)
			break;
	}
	e = ferror(f) ? -EIO : 0;
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
		snprintf(err, errlen, "cannot read %s", path);
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
