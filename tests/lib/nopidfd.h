/* SPDX-License-Identifier: MIT */
/*
 * Start kvmmd with pidfd_open failing (tests/shims/nopidfd.so: ENOSYS, as
 * on a kernel before 5.3 or under a seccomp profile that blocks it), for
 * the tests of quarantine without pidfds.
 */
#ifndef KVMM_TESTS_NOPIDFD_H
#define KVMM_TESTS_NOPIDFD_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

/* td_start() with LD_PRELOAD=tests/shims/nopidfd.so for kvmmd alone.  Its
 * ASan runtime (make SANITIZE=1) would refuse a preloaded library listed
 * before it: the order check is turned off. */
static inline void td_start_nopidfd(struct td_daemon *d,
				    const char *const *args)
{
	const char *asan = getenv("ASAN_OPTIONS");
	char shim[256], opts[600], saved[512];
	int r;

	/* setenv() below may free what getenv() returned */
	if (asan)
		snprintf(saved, sizeof(saved), "%s", asan);

	td_build_path("tests/shims/nopidfd.so", shim, sizeof(shim));
	if (access(shim, R_OK))
		t_fail("%s not built", shim);
	snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0",
		 asan ? saved : "", asan ? ":" : "");
	setenv("LD_PRELOAD", shim, 1);
	setenv("ASAN_OPTIONS", opts, 1);
	r = td_start(d, args);
	unsetenv("LD_PRELOAD");
	if (asan)
		setenv("ASAN_OPTIONS", saved, 1);
	else
		unsetenv("ASAN_OPTIONS");
	if (r)
		t_fail("kvmmd did not start: %d", r);
}

#endif
