/* SPDX-License-Identifier: MIT */
/*
 * Test knobs of kvmmd's environment that hold work back: a delay in
 * milliseconds, read once where the work is set up.  Never set in
 * production; each one set is logged as a warning.
 */
#ifndef KVMM_KVMMD_TEST_KNOB_H
#define KVMM_KVMMD_TEST_KNOB_H

#include <stdint.h>

/* NAME=MS from the environment in microseconds (0: unset, or not above
 * 0); when set, one warning "WHO: NAME=MS: WHAT delayed (tests only)". */
uint32_t kd_test_delay_us(const char *name, const char *who, const char *what);

#endif
