/* SPDX-License-Identifier: MIT */
/*
 * One answer, for every test that needs the NVMe tier, to "can this
 * machine do O_DIRECT io_uring I/O where the tier file goes?"  A test
 * skips (77) only when it cannot, and with one message naming the step
 * that failed, the errno and the path; any other failure stays a failure.
 *
 * The errno set lives in t_nvme_unsupported() and is the same for the
 * tier tests (which open the tier in-process) and for the daemon tests
 * (which hand a path to kvmmd and probe it first).
 */
#ifndef KVMM_TESTS_NVME_PROBE_H
#define KVMM_TESTS_NVME_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include "tests/lib/test.h"

/*
 * Create path with O_DIRECT, write and read back one aligned 4 KiB block,
 * unlink it, then set up an io_uring.  0, or -errno with *step set to what
 * failed ("O_DIRECT open", "O_DIRECT write", "io_uring_setup", ...).
 */
int t_nvme_probe(const char *path, const char **step);

/* Whether err (-errno) says the environment cannot do O_DIRECT io_uring
 * I/O, as opposed to a bug or a full disk. */
bool t_nvme_unsupported(int err);

/*
 * Put an NVMe tier file at path (a daemon test): skip when the probe fails
 * with an errno from the set, fail on any other probe error.
 */
void t_nvme_require(const char *path);

/*
 * After tier_nvme_open(path) returned r: skip when r is from the set and
 * a probe next to path fails with one too (so an -EINVAL that is the
 * tier's, or the test's, is not mistaken for the file system's).  Returns
 * otherwise; the caller then asserts on r as before.
 */
void t_nvme_skip_if_unsupported(int r, const char *path);

/*
 * The probe of path: true when the NVMe tier can work there, false (after
 * printing why) when the environment cannot; fails the test on any other
 * error.  For a test that leaves its NVMe part out rather than skipping.
 */
bool t_nvme_usable(const char *path);

#endif
