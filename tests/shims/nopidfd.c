// SPDX-License-Identifier: MIT
/*
 * LD_PRELOAD shim for kvmmd: pidfd_open fails with ENOSYS, as on a kernel
 * before 5.3 or under a seccomp profile that blocks it, so tests see what
 * the daemon does without pidfds (tests/daemon-quarantine-nopidfd.c).
 * kvmmd calls it through syscall(); every other number goes to libc's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	long a[6];
	va_list ap;

	if (nr == SYS_pidfd_open) {
		errno = ENOSYS;
		return -1;
	}
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
