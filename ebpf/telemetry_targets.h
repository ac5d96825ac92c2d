/* SPDX-License-Identifier: MIT */
/*
 * Where BPF telemetry looks for libkvmm's probes when kvmmd names no
 * --telemetry-attach target (telemetry_targets.c).
 */
#ifndef KVMM_EBPF_TELEMETRY_TARGETS_H
#define KVMM_EBPF_TELEMETRY_TARGETS_H

#include <limits.h>
#include <stddef.h>

/*
 * The default attach targets: libkvmm.so.1 in @libdir (make install's
 * LIBDIR), next to @exe (a build tree), in /usr/local/lib and /usr/lib,
 * each that exists once (by real path), then @exe itself.  At most @max
 * paths; the count is returned.  @tried gets every library path looked at,
 * ", " separated, for the warning when none was there.
 */
int tel_default_targets(const char *libdir, const char *exe,
			char paths[][PATH_MAX], int max, char *tried,
			size_t tried_len);

#endif
