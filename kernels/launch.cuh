/* SPDX-License-Identifier: MIT */
/*
 * launch_kernel(): the one way the CUDA files here launch a kernel, so
 * msa.cu and page_copy.cu cannot drift apart on how the emulator
 * (kernels/emu) is chosen or how the arguments are packed.  Included by
 * .cu files only, after <cuda_runtime.h> (or kernels/emu's, which defines
 * MSA_EMULATE).
 */
#ifndef KERNELS_LAUNCH_CUH
#define KERNELS_LAUNCH_CUH

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

} /* namespace */

#endif /* KERNELS_LAUNCH_CUH */
