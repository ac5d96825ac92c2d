// SPDX-License-Identifier: MIT
/*
 * The value syntaxes kvmmd's options share with kvmmctl's commands and
 * with the admin protocol: sizes with K/M/G/T suffixes, log level names,
 * a name out of a table, tenant limits.  Every error prints one line
 * naming the option and what was wrong.  Split from options.c (which
 * applies each option) and options_check.c (the checks across options
 * once all are read).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/options.h"
#include "kvmm/policy/policy.h"

int kd_parse_size(const char *what, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned int shift = 0;
	bool range;

	/* a digit first: strtoull skips blanks and takes a sign, so " -1"
	 * was 2^64 - 1 */
	if (!s || !isdigit((unsigned char)*s))
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	/* digits past 2^64 - 1 are a size too large, not "not a size" */
	range = errno == ERANGE;
	if ((errno && !range) || end == s)
		goto bad;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	}
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		goto bad;
	if (range || (shift && v > (~0ull >> shift)))
		goto too_large;
	*out = v << shift;
	return 0;
too_large:
	fprintf(stderr, "%s: '%s' is too large (at most %llu bytes)\n", what, s,
		~0ull);
	return -ERANGE;
bad:
	fprintf(stderr,
		"%s: '%s' is not a size (a number with an optional K, M, G or T suffix)\n",
		what, s ? s : "");
	return -EINVAL;
}

int kd_parse_tenant_limit(const char *what, const char *spec,
			  uint64_t blocks[3])
{
	if (!pol_tenant_limit_parse(spec, blocks))
		return 0;
	fprintf(stderr,
		"%s'%s' is not gpu:N, host:N, nvme:N or some of them (comma-separated, in any order, each tier at most once, N blocks > 0), nor none\n",
		what, spec);
	return -EINVAL;
}

int kd_parse_log_level(const char *s)
{
	static const char *const names[] = { "err", "warn", "info", "debug" };

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i]))
			return i;
	if (!strcmp(s, "error"))
		return VMM_LOG_ERR;
	if (!strcmp(s, "warning"))
		return VMM_LOG_WARN;
	if (s[0] >= '0' && s[0] <= '3' && !s[1])
		return s[0] - '0';
	return -EINVAL;
}

int kd_parse_name(const char *option, const char *const *names, size_t n,
		  const char *val, uint32_t *out)
{
	for (size_t i = 0; i < n; i++) {
		if (val && !strcmp(val, names[i])) {
			*out = (uint32_t)i;
			return 0;
		}
	}
	fprintf(stderr, "kvmmd: %s: '%s' is not ", option, val ? val : "");
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "%s%s", names[i],
			i + 2 < n ? ", " :
			i + 1 < n ? " or " :
				    "\n");
	return -EINVAL;
}
