/* SPDX-License-Identifier: MIT */
/*
 * launch_kernel(): the one way the CUDA files here launch a kernel, and
 * cuda_errno(): the one place CUDA runtime errors become errno values, so
 * msa.cu and page_copy.cu cannot drift apart on how the emulator
 * (kernels/emu) is chosen, how the arguments are packed, or which errno
 * a failure returns (until 7 December page_copy.cu had its own mapping,
 * which turned cudaErrorMemoryAllocation and an invalid handle or
 * function into -EIO where msa.cu said -ENOMEM and -EINVAL).  Included by
 * .cu files only, after <cuda_runtime.h> (or kernels/emu's, which defines
 * MSA_EMULATE).
 */
#ifndef KERNELS_LAUNCH_CUH
#define KERNELS_LAUNCH_CUH

#include <errno.h>

#include <cuda_runtime.h>

namespace
{

/*
 * Launch k(args...) with the argument types of k (no deduction from the
 * call site): cudaLaunchKernel on a GPU, the fiber emulator otherwise.
 * Not <<< >>>, which clang-format (Cpp03) would mangle.
 */
template <typename T> struct Same {
	typedef T type;
};

template <typename... P>
cudaError_t launch_kernel(void (*k)(P...), dim3 grid, dim3 block, size_t smem,
			  cudaStream_t st, typename Same<P>::type... a)
{
#ifdef MSA_EMULATE
	(void)st;
	return emu_launch(reinterpret_cast<const void *>(k), grid, block, smem,
			  [&]() { k(a...); });
#else
	void *args[] = { static_cast<void *>(&a)... };

	return cudaLaunchKernel(reinterpret_cast<const void *>(k), grid, block,
				args, smem, st);
#endif
}

/* A CUDA runtime error as a negative errno (0 for cudaSuccess). */
inline int cuda_errno(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return 0;
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorInvalidValue:
	case cudaErrorInvalidConfiguration:
	case cudaErrorInvalidDeviceFunction:
	case cudaErrorInvalidResourceHandle:
		return -EINVAL;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorNoKernelImageForDevice:
		return -ENODEV;
	default:
		return -EIO;
	}
}

} /* namespace */

#endif /* KERNELS_LAUNCH_CUH */
