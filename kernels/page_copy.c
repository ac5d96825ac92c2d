/* SPDX-License-Identifier: MIT */
/*
 * Page gather / scatter on the CPU.  A block spans one page in each of the
 * 2L (layer, K|V) ranges; gathering those pages into one contiguous
 * staging buffer lets a single DMA (or write) move the whole block, and
 * scattering undoes it.  `bytes` may be less than a page (copy-on-diverge
 * of a partial tail).  The GPU versions (page_copy.cu) have the same
 * shapes.
 */
#include <errno.h>
#include <string.h>

#include "kernels/msa.h"

int kern_page_gather_cpu(void *staging, const void *const *pages, uint32_t n,
			 size_t bytes)
{
	if (!n || !bytes)
		return 0;
	if (!staging || !pages)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!pages[i])
			return -EINVAL;
		memcpy((char *)staging + (size_t)i * bytes, pages[i], bytes);
	}
	return 0;
}

int kern_page_scatter_cpu(void *const *pages, const void *staging, uint32_t n,
			  size_t bytes)
{
	if (!n || !bytes)
		return 0;
	if (!staging || !pages)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!pages[i])
			return -EINVAL;
		memcpy(pages[i], (const char *)staging + (size_t)i * bytes,
		       bytes);
	}
	return 0;
}
