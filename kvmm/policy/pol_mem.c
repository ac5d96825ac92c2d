/* SPDX-License-Identifier: MIT */
/* Huge-page hints for big policy arrays (see pol_mem.h). */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvmm/policy/pol_mem.h"

/* Below this an array fits in a few pages of TLB reach anyway. */
#define POL_MEM_HUGE_MIN (4u << 20)

void pol_mem_advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t end = ((uintptr_t)p + bytes) & ~(page - 1);

	if (!p || bytes < POL_MEM_HUGE_MIN || end <= start)
		return;
	/* Failure (no THP, a heap-allocated range) only loses the hint. */
	(void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#endif
}
