/* SPDX-License-Identifier: MIT */
/*
 * CUDA emulation, device side: the keywords, vector types, intrinsics and
 * the launch entry the kernels use.  Each block runs as blockDim.x fibers
 * on one host thread (emu.cc); __syncthreads and warp shuffles are real
 * barriers between those fibers, so a kernel that would deadlock or race
 * on a barrier fails here too (a barrier not reached by every live thread
 * is reported and aborts).
 */
#ifndef KVMM_KERNELS_EMU_CUDA_RUNTIME_H
#define KVMM_KERNELS_EMU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <functional>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct uint3 {
	unsigned x, y, z;
};
struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c)
	{
	}
};
struct uint4 {
	unsigned x, y, z, w;
};
struct float4 {
	float x, y, z, w;
};
struct float2 {
	float x, y;
};
struct __half2 {
	uint16_t x, y;
};

static inline float4 make_float4(float a, float b, float c, float d)
{
	float4 v = { a, b, c, d };
	return v;
}

extern "C" float kern_f16_to_float(uint16_t h);
static inline float2 __half22float2(__half2 h)
{
	float2 v = { kern_f16_to_float(h.x), kern_f16_to_float(h.y) };
	return v;
}

static inline float __uint_as_float(unsigned u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

template <class T> static inline T min(T a, T b)
{
	return b < a ? b : a;
}
template <class T> static inline T max(T a, T b)
{
	return a < b ? b : a;
}

/* Per-fiber thread index; block index and sizes of the running launch. */
const uint3 &emu_thread_idx();
extern uint3 emu_block_idx;
extern dim3 emu_grid_dim, emu_block_dim;
#define threadIdx (emu_thread_idx())
#define blockIdx (emu_block_idx)
#define gridDim (emu_grid_dim)
#define blockDim (emu_block_dim)

void __syncthreads();
float emu_shfl(float v, int src_lane);
static inline float __shfl_xor_sync(unsigned, float v, int mask)
{
	return emu_shfl(v, (int)(threadIdx.x & 31) ^ mask);
}
static inline float __shfl_sync(unsigned, float v, int src)
{
	return emu_shfl(v, src);
}
/* The dynamic shared memory of the running block. */
unsigned char *emu_dynamic_smem();

/* Run fn as a grid of blocks; checks shared memory against the limit set
 * with cudaFuncSetAttribute for `kernel` (48 KiB by default). */
cudaError_t emu_launch(const void *kernel, dim3 grid, dim3 block, size_t smem,
		       std::function<void()> fn);
void emu_set_max_dynamic_smem(const void *kernel, int bytes);

template <class T>
static inline cudaError_t
cudaFuncSetAttribute(T *kernel, enum cudaFuncAttribute attr, int value)
{
	if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize)
		emu_set_max_dynamic_smem(reinterpret_cast<const void *>(kernel),
					 value);
	return cudaSuccess;
}
#endif

#endif
