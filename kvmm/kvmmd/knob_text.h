/* SPDX-License-Identifier: MIT */
/*
 * The text of test knobs, for the two tables that check them: kvmmd's
 * KVMMD_TEST_* (kvmm/kvmmd/test_knob.c, at start) and libkvmm's
 * KVMM_TEST_* (kvmm/lib/test_knob.c, at each connect).  One grammar for a
 * number and one measure of a misspelt name, so that a value one of them
 * takes the other takes too and both suggest the same way.  Built into
 * kvmmd and into libkvmm, as salt.c is.
 */
#ifndef KVMM_KVMMD_KNOB_TEXT_H
#define KVMM_KVMMD_KNOB_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * v is digits alone (no sign, blank, suffix, nor empty), a number from
 * min to max: true, and the number in *out.  max < 2^60, so that the
 * check against it comes before the number could overflow.
 */
bool knob_number(const char *v, uint64_t min, uint64_t max, uint64_t *out);

/* The Levenshtein distance of a (alen bytes) and b, both under 64 bytes;
 * 64 when either is longer (no likely name). */
unsigned int knob_name_distance(const char *a, size_t alen, const char *b);

#endif
