/* SPDX-License-Identifier: MIT */
/*
 * Waiting for a fact with a deadline of time: a test that needs "X has
 * happened in kvmmd" polls what shows X (a status counter, a log line)
 * until it holds, instead of sleeping a guess of how long X takes, which
 * a loaded machine outlasts (the test fails, or passes without testing
 * X).  A header of its own, not test.h's: its <unistd.h> would clash with
 * tests that name a function as libc does (revoke()).
 */
#ifndef KVMM_TESTS_WAIT_H
#define KVMM_TESTS_WAIT_H

#include <time.h>
#include <unistd.h>

#include "tests/lib/test.h"

/* Milliseconds on the monotonic clock. */
static inline unsigned long long t_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Run step (a statement: read a status, a log), then test cond, every
 * 10 ms until cond holds; once ms milliseconds of the clock have passed
 * and the try after them failed too, fail with "not within MS ms: " and
 * fmt's printf-style message (what never happened, the values last
 * seen).  A deadline of time, not of tries: on a loaded machine each try
 * takes longer than its 10 ms sleep, and a count of tries says nothing
 * of how long was waited.  Give ms a margin for that load (10-30 s): a
 * fact that comes ends the wait at once anyway.
 */
#define t_wait_until(ms, step, cond, fmt, ...)                             \
	do {                                                               \
		unsigned long long _end = t_now_ms() + (ms);               \
		for (;;) {                                                 \
			step;                                              \
			if (cond)                                          \
				break;                                     \
			if (t_now_ms() > _end)                             \
				t_fail("not within %u ms: " fmt,           \
				       (unsigned int)(ms), ##__VA_ARGS__); \
			usleep(10000);                                     \
		}                                                          \
	} while (0)

#endif
