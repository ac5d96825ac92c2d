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

#include "kvmm/kvmm.h"
#include "kvmm/lib/wire.h"

#define KC_OPTS_SIZE_MAX 4096

/*
 * No public struct with a size field may end in padding: a field a newer
 * kvmm.h appends would land in it with sizeof unchanged, so this library
 * would take the newer caller's struct as its own and never look at the
 * field (kvmm_hash_layout did: two layouts, one seed).  Padding that
 * could carry meaning is named, as a reserved field that must be 0.
 */
#define KC_NO_TAIL_PADDING(type, last)                                   \
	_Static_assert(sizeof(struct type) ==                            \
			       offsetof(struct type, last) +             \
				       sizeof(((struct type *)0)->last), \
		       #type " ends in padding: name it (reserved)")

KC_NO_TAIL_PADDING(kvmm_connect_opts, spin_us);
KC_NO_TAIL_PADDING(kvmm_region_opts, salt);
KC_NO_TAIL_PADDING(kvmm_hash_layout, reserved);
KC_NO_TAIL_PADDING(kvmm_prefix_opts, recompute);
KC_NO_TAIL_PADDING(kvmm_pin_opts, expires_ns);
KC_NO_TAIL_PADDING(kvmm_stats, blocks_unshared);
KC_NO_TAIL_PADDING(kvmm_daemon_info, gpu_uuid);

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
