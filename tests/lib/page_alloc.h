/* SPDX-License-Identifier: MIT */
/*
 * Page-aligned buffers for the tests' O_DIRECT I/O (an NVMe tier's
 * payloads, a file's superblock), instead of t_ok(posix_memalign(...))
 * in each test: the check for NULL here is explicit, so the static
 * analyzers (make analyze-tests) see that the buffer is set on every
 * path that goes on, where they followed the failed posix_memalign()
 * past t_fail() and reported the NULL use that follows.
 */
#ifndef KVMM_TESTS_PAGE_ALLOC_H
#define KVMM_TESTS_PAGE_ALLOC_H

#include <stdlib.h>
#include <string.h>

#include "tests/lib/test.h"

#define T_PAGE_ALIGN 4096

/* size bytes aligned to 4 KiB; fails the test (where it was called)
 * when they cannot be had. */
#define t_page_alloc(size) t_page_alloc_at(__FILE__, __LINE__, (size))

static inline void *t_page_alloc_at(const char *file, int line, size_t size)
{
	void *p = NULL;
	int err = posix_memalign(&p, T_PAGE_ALIGN, size);

	if (err || !p) {
		fprintf(stderr, "%s:%d: posix_memalign(%d, %zu): %s\n", file,
			line, T_PAGE_ALIGN, size, strerror(err ? err : ENOMEM));
		exit(T_FAIL);
	}
	return p;
}

#endif
