/* SPDX-License-Identifier: MIT */
/*
 * The size rule of libkvmm's option structs (kvmm.h), as openat2() and
 * perf_event_attr have it, so one soname serves callers built against
 * older and newer kvmm.h:
 *
 *   - size below the struct's first published size (KVMM_*_SIZE_VER0):
 *     -EINVAL, no caller ever had a struct that small;
 *   - size between that and what this library knows: an older caller;
 *     only its bytes are read or written, the fields it lacks count as 0;
 *   - size above what this library knows: a newer caller; accepted when
 *     every byte past what the library knows is 0 (it asked for nothing
 *     this library cannot do), -E2BIG otherwise (and above
 *     KC_OPTS_SIZE_MAX, a size no struct will reach: garbage, not a
 *     caller's struct).
 *
 * kc_opts_size() checks and returns how many bytes to copy in and out:
 * the callers work on a zeroed local copy of the struct and copy back at
 * most those bytes, so an older caller's memory past its struct is never
 * touched.
 */
#ifndef KVMM_LIB_OPTS_H
#define KVMM_LIB_OPTS_H

#include <errno.h>
#include <stddef.h>

#include "kvmm/lib/wire.h"

#define KC_OPTS_SIZE_MAX 4096

/* 0 or -errno; *use gets min(size, known). */
static inline int kc_opts_size(const void *opts, size_t size, size_t first,
			       size_t known, size_t *use)
{
	if (size < first)
		return -EINVAL;
	if (size > KC_OPTS_SIZE_MAX)
		return -E2BIG;
	if (size > known &&
	    !kw_all_zero((const char *)opts + known, size - known))
		return -E2BIG;
	*use = size < known ? size : known;
	return 0;
}

#endif
