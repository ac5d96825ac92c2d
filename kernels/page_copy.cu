/* SPDX-License-Identifier: MIT */
/*
 * Page gather / scatter on the GPU (API in msa.h).  The page pointers are
 * passed by value in the kernel parameters, up to KCOPY_BATCH per launch,
 * so the caller needs no device-side pointer table; more pages take
 * several launches on the same stream.  Each block copies a strided share
 * of one page (grid.y = page), 16 bytes per thread per step when every
 * address and the length are 16-byte aligned, byte by byte otherwise.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>

#include "kernels/launch.cuh"
#include "kernels/msa.h"

namespace
{

constexpr uint32_t KCOPY_BATCH = 256; /* 2 KiB of pointers per launch */
constexpr int KCOPY_THREADS = 256;

struct PageList {
	char *p[KCOPY_BATCH];
};

/* to_pages: scatter (staging -> pages) if true, gather otherwise. */
template <bool VEC>
__global__ void __launch_bounds__(KCOPY_THREADS)
	page_copy_kernel(PageList pages, char *staging, size_t bytes,
			 bool to_pages)
{
	char *page = pages.p[blockIdx.y];
	char *stage = staging + (size_t)blockIdx.y * bytes;
	char *dst = to_pages ? page : stage;
	const char *src = to_pages ? stage : page;
	size_t step = (size_t)gridDim.x * KCOPY_THREADS;
	size_t i = (size_t)blockIdx.x * KCOPY_THREADS + threadIdx.x;

	if (VEC) {
		for (; i < bytes / 16; i += step)
			reinterpret_cast<uint4 *>(dst)[i] =
				reinterpret_cast<const uint4 *>(src)[i];
	} else {
		for (; i < bytes; i += step)
			dst[i] = src[i];
	}
}

int page_copy(char *const *pages, char *staging, uint32_t n, size_t bytes,
	      bool to_pages, cudaStream_t st)
{
	bool vec = bytes % 16 == 0 && (uintptr_t)staging % 16 == 0;
	size_t units;
	uint32_t blocks;

	if (!n || !bytes)
		return 0;
	if (!pages || !staging)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!pages[i])
			return -EINVAL;
		vec = vec && (uintptr_t)pages[i] % 16 == 0;
	}
	units = vec ? bytes / 16 : bytes;
	blocks = (uint32_t)((units + KCOPY_THREADS - 1) / KCOPY_THREADS);
	if (blocks > 1024)
		blocks = 1024;
	for (uint32_t first = 0; first < n; first += KCOPY_BATCH) {
		uint32_t m = n - first < KCOPY_BATCH ? n - first : KCOPY_BATCH;
		PageList list;
		dim3 grid(blocks, m);
		char *stage = staging + (size_t)first * bytes;

		for (uint32_t i = 0; i < m; i++)
			list.p[i] = pages[first + i];
		int err = cuda_errno(
			vec ? launch_kernel(page_copy_kernel<true>, grid,
					    dim3(KCOPY_THREADS), 0, st, list,
					    stage, bytes, to_pages) :
			      launch_kernel(page_copy_kernel<false>, grid,
					    dim3(KCOPY_THREADS), 0, st, list,
					    stage, bytes, to_pages));

		if (err)
			return err;
	}
	return 0;
}

} /* namespace */

extern "C" int kern_page_gather_launch(void *staging, const void *const *pages,
				       uint32_t n, size_t bytes, void *stream)
{
	/* The kernel only reads through the page pointers when gathering. */
	return page_copy(const_cast<char *const *>(
				 reinterpret_cast<const char *const *>(pages)),
			 static_cast<char *>(staging), n, bytes, false,
			 static_cast<cudaStream_t>(stream));
}

extern "C" int kern_page_scatter_launch(void *const *pages, const void *staging,
					uint32_t n, size_t bytes, void *stream)
{
	/* The kernel only reads staging when scattering. */
	return page_copy(reinterpret_cast<char *const *>(pages),
			 static_cast<char *>(const_cast<void *>(staging)), n,
			 bytes, true, static_cast<cudaStream_t>(stream));
}
