/* SPDX-License-Identifier: MIT */
/*
 * What the files of the mock libcuda share (see libcuda.c's comment for
 * what the mock is and does): the state behind the calls, the checks
 * every call makes, and each mock_cu* function, which cuGetProcAddress_v2
 * (libcuda.c) hands out.  All of it is hidden: the library exports
 * cuGetProcAddress_v2 and the tests' kvmm_mock_* knobs only, as it did
 * when it was one file.
 */
#ifndef KVMM_TESTS_VMM_CUDA_MOCK_H
#define KVMM_TESTS_VMM_CUDA_MOCK_H

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#pragma GCC visibility push(hidden)

#define GRAN (2u << 20)
#define MAX_OBJS 4096

struct alloc {
	int fd;
	int dev; /* the device (not the ordinal) it lives on, -1 unknown */
	dev_t st_dev; /* the memfd's identity: a second import of it */
	ino_t st_ino; /* gets this allocation's handle again */
	int refs; /* handles */
	int maps; /* mappings */
};

struct mapping {
	CUdeviceptr va;
	size_t size;
	struct alloc *a;
};

struct range {
	CUdeviceptr va;
	size_t size;
};

/* libcuda.c: the lock over everything below but the __thread ones, and
 * the counts the exit checks for leaks */
extern pthread_mutex_t lock;
extern struct mapping maps[MAX_OBJS];
extern struct alloc *allocs[MAX_OBJS]; /* live ones, to look handles up */
extern struct range ranges[MAX_OBJS];
extern int nr_allocs, nr_streams, nr_registered, ctx_refs;
extern bool initialized;
extern __thread int ctx_depth;

/* stream.c: the memset and the copies to the device a stream holds back
 * until it is synchronized (cuMemUnmap refuses to unmap under them) */
struct memset_queued {
	bool pending;
	CUdeviceptr dst;
	unsigned char v;
	size_t n;
};
extern struct memset_queued memset_q;
/* this thread's pushes still to fail (KVMM_MOCK_STALL_HTOD) */
extern __thread int stall_pushes;
bool htod_pending(CUdeviceptr ptr, size_t size);

/* A call that broke a rule cuda.h documents: the process fails at exit
 * (libcuda.c). */
CUresult __attribute__((format(printf, 1, 2))) misuse(const char *fmt, ...);
/* CUDA_SUCCESS when cuInit ran and this thread has a context current. */
CUresult need_ctx(void);
/* device.c: how many devices this process sees, and the device behind
 * an ordinal (KVMM_MOCK_VISIBLE) */
int device_count(void);
int physical(int ordinal);

#define MOCK(name) __typeof__(name) mock_##name

/* device.c: the driver, its devices and contexts */
MOCK(cuGetErrorName);
MOCK(cuInit);
MOCK(cuDriverGetVersion);
MOCK(cuDeviceGetCount);
MOCK(cuDeviceGet);
MOCK(cuDeviceGetName);
MOCK(cuDeviceGetUuid);
MOCK(cuDeviceGetPCIBusId);
MOCK(cuDevicePrimaryCtxRetain);
MOCK(cuDevicePrimaryCtxRelease);
MOCK(cuCtxPushCurrent);
MOCK(cuCtxPopCurrent);
/* memory.c: allocations, reservations, mappings and access */
MOCK(cuMemGetAllocationGranularity);
MOCK(cuMemAddressReserve);
MOCK(cuMemAddressFree);
MOCK(cuMemCreate);
MOCK(cuMemRelease);
MOCK(cuMemExportToShareableHandle);
MOCK(cuMemImportFromShareableHandle);
MOCK(cuMemMap);
MOCK(cuMemUnmap);
MOCK(cuMemSetAccess);
/* stream.c: copies, memsets, streams and host registrations */
MOCK(cuMemcpyDtoH);
MOCK(cuMemcpyHtoD);
MOCK(cuMemcpyDtoD);
MOCK(cuMemcpyDtoHAsync);
MOCK(cuMemcpyHtoDAsync);
MOCK(cuMemsetD8Async);
MOCK(cuStreamCreate);
MOCK(cuStreamDestroy);
MOCK(cuStreamSynchronize);
MOCK(cuMemHostRegister);
MOCK(cuMemHostUnregister);

#pragma GCC visibility pop

#endif
