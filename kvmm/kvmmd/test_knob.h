/* SPDX-License-Identifier: MIT */
/*
 * kvmmd's test knobs: KVMMD_TEST_* variables of its environment that hold
 * work back (a delay in milliseconds) or make it fail on purpose, for the
 * tests alone (and KVMMD_SLOW_CMD_US, a diagnostic).  Each is read where
 * its work is set up; all of them are checked once at start, against one
 * table (test_knob.c, Documentation/build.md "Test knobs"), so that a
 * bad value or a misspelt name stops the start instead of leaving a test
 * without the delay or fault it relies on.  Never set in production;
 * each one set is logged as a warning.
 */
#ifndef KVMM_KVMMD_TEST_KNOB_H
#define KVMM_KVMMD_TEST_KNOB_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every KVMMD_TEST_* variable of the environment is a knob of the table
 * with a value its grammar takes, and so is KVMMD_SLOW_CMD_US if set: 0,
 * or -EINVAL after one ERR line for each that is not ("NAME=VALUE:
 * expected ...", or an unknown name with the knob it likely meant).
 * kd_daemon_start() calls it first, before anything is set up.
 */
int kd_test_knobs_check(void);

/*
 * The value of NAME, a number knob of the table, in *out: 0, -ENOENT when
 * unset (or empty, for a knob whose empty value is unset), -EINVAL when
 * not a value the table takes (which the start's check has refused
 * already) or not such a knob.  The one parse and the one range of each
 * number knob: every reader of one calls it.
 */
int kd_test_knob_number(const char *name, uint64_t *out);

/* NAME=MS from the environment in microseconds (0: unset, or 0); when
 * set, one warning "WHO: NAME=MS: WHAT delayed (tests only)". */
uint32_t kd_test_delay_us(const char *name, const char *who, const char *what);

/*
 * The checks of the knobs whose grammar lives beside their reader, so
 * that the check and the reader parse the same way: 0 when v is good,
 * else -EINVAL with "expected ..." in why (len bytes).
 */
/* KVMMD_TEST_CACHE_OPEN_FAIL=ERRNO:N (cache_open.c) */
int kc_open_fail_check(const char *v, char *why, size_t len);
/* KVMMD_TEST_FDS_FAULT=cmd|id|flags|hangup (session_reply.c) */
int kd_fds_fault_check(const char *v, char *why, size_t len);

#endif
