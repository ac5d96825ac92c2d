/* SPDX-License-Identifier: MIT */
/*
 * The trace reader (kvmm/policy/trace.c) on hostile and malformed lines:
 * each is refused with the line it is on and the reason, never crashes,
 * and never accepts a value it would have to change.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/trace.h"
#include "tests/lib/test.h"

/* text must be refused with -EINVAL and an error containing want. */
static void refused(int at, const char *text, const char *want)
{
	struct pol_trace t;
	char err[256] = "";
	int e = pol_trace_parse(text, &t, err, sizeof(err));

	if (e != -EINVAL)
		t_fail("line %d of the test: %d, expected -EINVAL, for %.80s",
		       at, e, text);
	if (!strstr(err, want))
		t_fail("line %d of the test: '%s', expected '%s'", at, err,
		       want);
}
#define refused(...) refused(__LINE__, __VA_ARGS__)

/* A line that opens n arrays in an unknown key. */
static char *nested(size_t n)
{
	const char *head = "{\"timestamp\": 1, \"input_length\": 512, "
			   "\"hash_ids\": [1], \"meta\": ";
	size_t h = strlen(head);
	char *s = malloc(h + 2 * n + 3);

	if (!s)
		t_fail("out of memory");
	memcpy(s, head, h);
	memset(s + h, '[', n);
	memset(s + h + n, ']', n);
	strcpy(s + h + 2 * n, "}\n");
	return s;
}

int main(void)
{
	struct pol_trace t;
	char err[256];
	char *s;

	/* Unknown keys: any JSON value, but not nested past 64 levels (the
	 * skip recursed per '[': 300000 of them overflowed the stack). */
	s = nested(63);
	t_ok(pol_trace_parse(s, &t, err, sizeof(err)));
	t_assert_eq(t.nreqs, 1);
	pol_trace_free(&t);
	free(s);
	s = nested(64);
	refused(s, "line 1: nested deeper than 64");
	free(s);
	s = nested(300000);
	refused(s, "line 1: nested deeper than 64");
	free(s);
	return 0;
}
