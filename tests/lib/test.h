/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the test binaries: value assertions that report where
 * they failed, and the pass/fail/skip exit codes the runner expects
 * (0 / 1 / 77).
 */
#ifndef KVMM_TESTS_TEST_H
#define KVMM_TESTS_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#define T_PASS 0
#define T_FAIL 1
#define T_SKIP 77

/* Print a reason and exit with the skip code; the runner shows the reason. */
#define t_skip(...)                           \
	do {                                  \
		printf("skip: " __VA_ARGS__); \
		printf("\n");                 \
		exit(T_SKIP);                 \
	} while (0)

#define t_fail(...)                                             \
	do {                                                    \
		fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                   \
		fprintf(stderr, "\n");                          \
		exit(T_FAIL);                                   \
	} while (0)

#define t_assert(cond)                                         \
	do {                                                   \
		if (!(cond))                                   \
			t_fail("assertion failed: %s", #cond); \
	} while (0)

/* Compare two integers and print both values on mismatch. */
#define t_assert_eq(a, b)                                                     \
	do {                                                                  \
		long long _a = (long long)(a), _b = (long long)(b);           \
		if (_a != _b)                                                 \
			t_fail("%s == %lld, expected %s == %lld", #a, _a, #b, \
			       _b);                                           \
	} while (0)

/* A call that must return 0; prints the -errno otherwise.  -1 is both a
 * libc failure (errno says why) and -EPERM: both are said, so a failed
 * connect() is not reported as "Operation not permitted" alone. */
#define t_ok(call)                                                          \
	do {                                                                \
		errno = 0;                                                  \
		long long _r = (long long)(call);                           \
		int _e = errno;                                             \
		if (_r == -1)                                               \
			t_fail("%s returned -1 (errno: %s; as -errno: %s)", \
			       #call, _e ? strerror(_e) : "0",              \
			       strerror(EPERM));                            \
		if (_r != 0)                                                \
			t_fail("%s returned %lld (%s)", #call, _r,          \
			       _r < 0 ? strerror((int)-_r) : "");           \
	} while (0)

/* Fail unless text (a command's output, say) holds what; the failure
 * shows the text. */
static inline void t_assert_has(const char *text, const char *what)
{
	if (!strstr(text, what))
		t_fail("no '%s' in:\n%s", what, text);
}

/* Fail if text holds what; the failure shows the text. */
static inline void t_assert_lacks(const char *text, const char *what)
{
	if (strstr(text, what))
		t_fail("'%s' in:\n%s", what, text);
}

/* How often needle occurs in hay (a daemon's log, say). */
static inline int t_count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* AnonHugePages of the whole process, in bytes (-1: unknown). */
static inline long long t_anon_huge_bytes(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

#endif
