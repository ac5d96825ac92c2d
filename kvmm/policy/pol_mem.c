/* SPDX-License-Identifier: MIT */
/* Mapped arrays with huge-page advice for the policy (see pol_mem.h). */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvmm/policy/pol_mem.h"

/* Below this an array fits in a few pages of TLB reach anyway. */
#define POL_MEM_HUGE_MIN (4u << 20)

static size_t whole_pages(size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (bytes + page - 1) & ~(page - 1);
}

static void advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
	/* Failure (no THP in this kernel) only loses the hint. */
	if (bytes >= POL_MEM_HUGE_MIN)
		(void)madvise(p, whole_pages(bytes), MADV_HUGEPAGE);
#endif
}

void *pol_mem_map(size_t bytes)
{
	void *p = mmap(NULL, whole_pages(bytes), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	advise_huge(p, bytes);
	return p;
}

void *pol_mem_remap(void *p, size_t old_bytes, size_t bytes)
{
	void *n;

	if (!p)
		return pol_mem_map(bytes);
	n = mremap(p, whole_pages(old_bytes), whole_pages(bytes),
		   MREMAP_MAYMOVE);
	if (n == MAP_FAILED)
		return NULL;
	advise_huge(n, bytes);
	return n;
}

void pol_mem_unmap(void *p, size_t bytes)
{
	if (p)
		munmap(p, whole_pages(bytes));
}
