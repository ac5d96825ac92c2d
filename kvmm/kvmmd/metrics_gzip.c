// SPDX-License-Identifier: MIT
/* gzip for the metrics endpoint (metrics_gzip.h). */
#include "kvmm/kvmmd/metrics_gzip.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if HAVE_ZLIB
#include <zlib.h>
#endif

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t';
}

/* The end of a value: NUL, or a CR ending its line. */
static bool at_end(const char *p)
{
	return !*p || (*p == '\r' && !p[1]);
}

/* A qvalue (RFC 9110 12.4.2) at p, up to the next ',' or ';': whether it
 * is above 0.  Anything that is not a qvalue counts as above 0, as if the
 * parameter were absent. */
static bool q_positive(const char *p)
{
	if (*p == '1')
		return true;
	if (*p != '0')
		return true;
	for (p++; *p == '.' || (*p >= '0' && *p <= '9'); p++)
		if (*p >= '1' && *p <= '9')
			return true;
	return false;
}

bool kd_accepts_gzip(const char *v)
{
	int gzip = -1, star = -1; /* -1 not named, 0 refused, 1 taken */

	while (!at_end(v)) {
		const char *tok;
		size_t n;
		bool q = true;

		while (is_space(*v) || *v == ',')
			v++;
		if (at_end(v))
			break;
		tok = v;
		while (!at_end(v) && *v != ',' && *v != ';' && !is_space(*v))
			v++;
		n = (size_t)(v - tok);
		/* parameters: only q matters */
		while (!at_end(v) && *v != ',') {
			if (*v == ';') {
				v++;
				while (is_space(*v))
					v++;
				if ((*v == 'q' || *v == 'Q') && v[1] == '=')
					q = q_positive(v + 2);
				continue;
			}
			v++;
		}
		if ((n == 4 && !strncasecmp(tok, "gzip", 4)) ||
		    (n == 6 && !strncasecmp(tok, "x-gzip", 6)))
			gzip = q;
		else if (n == 1 && *tok == '*')
			star = q;
	}
	return gzip >= 0 ? gzip == 1 : star == 1;
}

int kd_gzip(const void *data, size_t len, char **out, size_t *out_len)
{
#if HAVE_ZLIB
	z_stream z;
	size_t cap;
	char *buf;
	int r;

	if (len > UINT32_MAX)
		return -E2BIG; /* zlib's counts are 32 bits */
	memset(&z, 0, sizeof(z));
	/* 15 + 16: a gzip header and trailer around the deflate stream */
	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	cap = deflateBound(&z, (uLong)len);
	buf = malloc(cap);
	if (!buf) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)buf;
	z.avail_out = (uInt)cap;
	r = deflate(&z, Z_FINISH);
	deflateEnd(&z);
	if (r != Z_STREAM_END) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*out_len = cap - z.avail_out;
	return 0;
#else
	(void)data;
	(void)len;
	(void)out;
	(void)out_len;
	return -EOPNOTSUPP;
#endif
}
