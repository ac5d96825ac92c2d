/* SPDX-License-Identifier: MIT */
/*
 * CUDA emulation (see emu.cc): the subset of the CUDA runtime API the
 * kernels, the GPU tests and the benchmark use, with the real names, so
 * the same sources build against it (include path kernels/emu first)
 * and run on the CPU.  "Device" memory is host memory.  Not a CUDA
 * implementation: just enough to execute the .cu files faithfully.
 */
#ifndef KVMM_KERNELS_EMU_CUDA_RUNTIME_API_H
#define KVMM_KERNELS_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSA_EMULATE 1

typedef enum cudaError {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorInsufficientDriver = 35,
	cudaErrorInvalidDeviceFunction = 98,
	cudaErrorNoDevice = 100,
	cudaErrorNoKernelImageForDevice = 209,
	cudaErrorInvalidResourceHandle = 400,
	cudaErrorLaunchFailure = 719,
} cudaError_t;

typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
	cudaDevAttrMultiProcessorCount = 16,
};

enum cudaFuncAttribute {
	cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

struct cudaDeviceProp {
	char name[256];
	size_t totalGlobalMem;
	int major, minor;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int dev);
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
				   int dev);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
		       enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
			    enum cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaEventCreate(cudaEvent_t *ev);
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st);
cudaError_t cudaEventSynchronize(cudaEvent_t ev);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaEventDestroy(cudaEvent_t ev);

/* Emulator controls: SM count reported (default 132). */
void emu_set_sm_count(int sms);

#ifdef __cplusplus
}
#endif

#endif
