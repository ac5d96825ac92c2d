/* SPDX-License-Identifier: MIT */
/* Mapped arrays with huge-page advice for the policy (see pol_mem.h). */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvmm/policy/pol_mem.h"

/* Below this an array fits in a few pages of TLB reach anyway. */
#define POL_MEM_HUGE_MIN (4u << 20)
#define POL_MEM_HUGE_PAGE ((size_t)2 << 20)

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

/*
 * A free range of `bytes` starting on a huge-page boundary: a huge page
 * needs its 2 MiB of virtual addresses aligned, and mremap() moving
 * pages to an address with another offset in 2 MiB splits every huge
 * page into 4 KiB ones (the growth of the entry array did, which left
 * most of it on small pages).  NULL if none.
 */
static void *aligned_range(size_t bytes)
{
	char *p = mmap(NULL, bytes + POL_MEM_HUGE_PAGE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char *a;

	if (p == MAP_FAILED)
		return NULL;
	a = (char *)(((uintptr_t)p + POL_MEM_HUGE_PAGE - 1) &
		     ~(uintptr_t)(POL_MEM_HUGE_PAGE - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + bytes, (size_t)(p + POL_MEM_HUGE_PAGE - a));
	return a;
}

void *pol_mem_map(size_t bytes)
{
	size_t len = whole_pages(bytes);
	void *a = len >= POL_MEM_HUGE_MIN ? aligned_range(len) : NULL;
	void *p = mmap(a, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (a ? MAP_FIXED : 0), -1,
		       0);

	if (p == MAP_FAILED) {
		if (a)
			munmap(a, len);
		return NULL;
	}
	advise_huge(p, bytes);
	return p;
}

void *pol_mem_remap(void *p, size_t old_bytes, size_t bytes)
{
	size_t old_len = whole_pages(old_bytes), len = whole_pages(bytes);
	void *n, *a;

	if (!p)
		return pol_mem_map(bytes);
	/* in place, or moved to an aligned range, or anywhere */
	n = mremap(p, old_len, len, 0);
	if (n == MAP_FAILED && len >= POL_MEM_HUGE_MIN &&
	    (a = aligned_range(len))) {
		n = mremap(p, old_len, len, MREMAP_MAYMOVE | MREMAP_FIXED, a);
		if (n == MAP_FAILED)
			munmap(a, len);
	}
	if (n == MAP_FAILED)
		n = mremap(p, old_len, len, MREMAP_MAYMOVE);
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
