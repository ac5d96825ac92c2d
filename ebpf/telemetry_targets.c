// SPDX-License-Identifier: MIT
/*
 * BPF telemetry's default attach targets: the places libkvmm.so.1 may be
 * installed, and kvmmd itself.  LIBDIR comes first, compiled in from the
 * Makefile's install_paths.h (rebuilt when PREFIX or LIBDIR change), so an
 * install under any PREFIX traces its clients; the directory of the running
 * binary covers a build tree, /usr/local/lib and /usr/lib a library some
 * other package installed.  Pure path logic, no BPF: tested on its own
 * (tests/ebpf-default-targets.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/telemetry_targets.h"

#define TEL_LIB_NAME "libkvmm.so.1"

/* Append @real to @paths unless it is there already. */
static int add_unique(char paths[][PATH_MAX], int nr, const char *real)
{
	int j;

	for (j = 0; j < nr && strcmp(paths[j], real); j++)
		;
	if (j == nr)
		snprintf(paths[nr++], PATH_MAX, "%s", real);
	return nr;
}

int tel_default_targets(const char *libdir, const char *exe,
			char paths[][PATH_MAX], int max, char *tried,
			size_t tried_len)
{
	char cand[4][PATH_MAX + 16], *slash;
	size_t off = 0;
	int nr = 0, nc = 0, i;

	if (tried_len)
		tried[0] = 0;
	if (max < 1)
		return 0;
	if (libdir && *libdir)
		snprintf(cand[nc++], sizeof(cand[0]), "%s/" TEL_LIB_NAME,
			 libdir);
	snprintf(cand[nc], sizeof(cand[0]), "%s", exe);
	slash = strrchr(cand[nc], '/');
	if (slash) {
		strcpy(slash + 1, TEL_LIB_NAME);
		nc++;
	}
	snprintf(cand[nc++], sizeof(cand[0]), "/usr/local/lib/" TEL_LIB_NAME);
	snprintf(cand[nc++], sizeof(cand[0]), "/usr/lib/" TEL_LIB_NAME);

	for (i = 0; i < nc; i++) {
		char real[PATH_MAX];
		int n, j;

		/* LIBDIR is often /usr/local/lib: say it once */
		for (j = 0; j < i && strcmp(cand[j], cand[i]); j++)
			;
		if (j < i)
			continue;
		if (off < tried_len) {
			n = snprintf(tried + off, tried_len - off, "%s%s",
				     i ? ", " : "", cand[i]);
			off += n > 0 ? (size_t)n : 0;
		}
		if (nr < max - 1 && realpath(cand[i], real))
			nr = add_unique(paths, nr, real);
	}
	snprintf(paths[nr++], PATH_MAX, "%s", exe);
	return nr;
}
