// SPDX-License-Identifier: MIT
/*
 * LD_PRELOAD shim: mremap() with an old size of 0 (duplicate a shared
 * mapping) fails with EINVAL, as under valgrind's memcheck, which
 * emulates mremap without that case; every other mremap goes to libc's
 * (tests/vmm-host-import-nomremap.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/mman.h>

void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...)
{
	static void *(*real)(void *, size_t, size_t, int, ...);
	void *new_addr = NULL;
	va_list ap;

	if (!old_size) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (!real)
		real = (void *(*)(void *, size_t, size_t, int,
				  ...))dlsym(RTLD_NEXT, "mremap");
	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
		return real(old, old_size, new_size, flags, new_addr);
	}
	return real(old, old_size, new_size, flags);
}
