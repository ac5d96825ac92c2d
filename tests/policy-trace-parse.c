/* SPDX-License-Identifier: MIT */
/*
 * The trace reader (kvmm/policy/trace.c) on hostile and malformed lines:
 * each is refused with the line it is on and the reason, never crashes,
 * and never accepts a value it would have to change.
 */
#include <errno.h>
#include <stdint.h>
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

	/* ids are read exactly: 2^53 + 1 and 2^53 were one id through a
	 * double, and the whole uint64_t range is an id */
	t_ok(pol_trace_parse(
		"{\"timestamp\": 1, \"input_length\": 1536, \"hash_ids\": "
		"[9007199254740993, 9007199254740992, 18446744073709551615]"
		", \"session\": 18446744073709551614, \"tenant\": 4294967294}\n",
		&t, err, sizeof(err)));
	t_assert_eq(t.nhashes, 3);
	t_assert(t.hashes[0] == 9007199254740993ull);
	t_assert(t.hashes[1] == 9007199254740992ull);
	t_assert(t.hashes[2] == UINT64_MAX);
	t_assert(t.reqs[0].session == UINT64_MAX - 1);
	t_assert(t.reqs[0].tenant == UINT32_MAX - 1);
	pol_trace_free(&t);
	/* 512.0 and 1e3 are integers where a double is exact, not past */
	t_ok(pol_trace_parse("{\"timestamp\": 2.75, \"input_length\": 512.0, "
			     "\"hash_ids\": [1e3], \"priority\": -128}\n",
			     &t, err, sizeof(err)));
	t_assert(t.reqs[0].timestamp_ms == 2 && t.hashes[0] == 1000);
	t_assert_eq(t.reqs[0].input_length, 512);
	t_assert_eq(t.reqs[0].priority, -128);
	pol_trace_free(&t);
	refused("{\"timestamp\": 1, \"input_length\": 512, \"hash_ids\": "
		"[1e17]}\n",
		"\"hash_ids\": 1e17 is past 2^53");
	refused("{\"timestamp\": 1, \"input_length\": 512, \"hash_ids\": "
		"[18446744073709551616]}\n",
		"\"hash_ids\" must be an integer in [0, 18446744073709551615]"
		", not 18446744073709551616");
	refused("{\"timestamp\": 1, \"input_length\": 512, \"hash_ids\": "
		"[-1]}\n",
		"\"hash_ids\" must be an integer in [0, ");
	refused("{\"timestamp\": 1, \"input_length\": 512, \"hash_ids\": "
		"[1.5]}\n",
		"not 1.5");
	refused("{\"timestamp\": 1, \"input_length\": 512, \"hash_ids\": "
		"[1], \"tenant\": 4294967295}\n",
		"\"tenant\" must be an integer in [0, 4294967294]");
	refused("{\"timestamp\": 1, \"input_length\": 512, \"hash_ids\": "
		"[1], \"priority\": 128}\n",
		"\"priority\" must be an integer in [-128, 127]");

	/* timestamps: finite, >= 0 (nan became 2^63) */
	refused("{\"timestamp\": nan, \"input_length\": 512, "
		"\"hash_ids\": [1]}\n",
		"line 1: \"timestamp\": expected a JSON number, not 'nan'");
	refused("{\"timestamp\": -1, \"input_length\": 512, "
		"\"hash_ids\": [1]}\n",
		"\"timestamp\" must be milliseconds in [0, 2^64), not -1");
	refused("{\"timestamp\": 1e20, \"input_length\": 512, "
		"\"hash_ids\": [1]}\n",
		"\"timestamp\" must be milliseconds in [0, 2^64), not 1e20");
	refused("{\"timestamp\": 1e999, \"input_length\": 512, "
		"\"hash_ids\": [1]}\n",
		"not 1e999");

	/* strict JSON: no hex, '+', leading zeros or trailing commas */
	refused("{\"timestamp\": 0x10, \"input_length\": 512, "
		"\"hash_ids\": [1]}\n",
		"\"timestamp\": expected a JSON number, not '0x10'");
	refused("{\"timestamp\": 1, \"input_length\": +512, "
		"\"hash_ids\": [1]}\n",
		"\"input_length\": expected a JSON number, not '+512'");
	refused("{\"timestamp\": 1, \"input_length\": 0512, "
		"\"hash_ids\": [1]}\n",
		"not '0512'");
	refused("{\"timestamp\": 1, \"input_length\": 512, "
		"\"hash_ids\": [1,]}\n",
		"\"hash_ids\": ',' before ']'");
	refused("{\"timestamp\": 1, \"input_length\": 512, "
		"\"hash_ids\": [1], \"x\": [1,]}\n",
		"',' before ']'");
	refused("{\"timestamp\": 1, \"input_length\": 512, "
		"\"hash_ids\": [1],}\n",
		"',' before '}'");
	refused("{\"timestamp\": 1, \"input_length\": 512, "
		"\"hash_ids\": [1], \"x\": inf}\n",
		"expected a JSON number, not 'inf'");
	refused("{\"timestamp\": 1, \"input_length\": 512, "
		"\"hash_ids\": [1], \"hash_ids\": [2]}\n",
		"\"hash_ids\" given twice");
	/* an object ends on its line: strtod skipped the newline, so the
	 * next line's error was reported on the wrong line */
	refused("{\"timestamp\":\n 5, \"input_length\": 512, "
		"\"hash_ids\": [1]}\n",
		"line 1: \"timestamp\": expected a JSON number, not the end "
		"of the line");
	refused("{\"timestamp\": 1, \"input_length\": 512, "
		"\"hash_ids\": [1]}\n\n{\"timestamp\": 2, \"x\": }\n",
		"line 3: expected a JSON number, not '}'");
	refused("{\"timestamp\": 1, \"input_length\": 512, "
		"\"hash_ids\": [1], \"x\": \"a\\\n\"}\n",
		"line 1: unterminated string");

	/* input_length near 2^32: (input_length + 511) wrapped a uint32_t,
	 * so 0 hash_ids passed for 4294967295 tokens */
	refused("{\"timestamp\": 1, \"input_length\": 4294967295, "
		"\"hash_ids\": []}\n",
		"0 hash_ids for input_length 4294967295 (expected "
		"ceil(input_length / 512) = 8388608)");
	return 0;
}
