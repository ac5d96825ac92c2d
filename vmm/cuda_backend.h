/* SPDX-License-Identifier: MIT */
/*
 * The cuda backend's state and the driver entry points it calls through,
 * shared by vmm/cuda.c (the operations) and vmm/cuda_open.c (loading
 * libcuda, opening and tearing down).  Needs cuda.h: include it only
 * under HAVE_CUDA_H.
 */
#ifndef KVMM_VMM_CUDA_BACKEND_H
#define KVMM_VMM_CUDA_BACKEND_H

#include <pthread.h>

#include <cuda.h>

#include "vmm/cuda_priv.h"
#include "vmm/track.h"
#include "vmm/vmm.h"

/*
 * Every entry point used.  X(name): the member is p_name, typed from the
 * prototype cuda.h declares for name (its macros pick the _v2 symbol), and
 * looked up by its base name.
 */
#define CUDA_FUNCS(X)                     \
	X(cuGetErrorName)                 \
	X(cuInit)                         \
	X(cuDriverGetVersion)             \
	X(cuDeviceGetCount)               \
	X(cuDeviceGet)                    \
	X(cuDeviceGetName)                \
	X(cuDeviceGetUuid)                \
	X(cuDeviceGetPCIBusId)            \
	X(cuDevicePrimaryCtxRetain)       \
	X(cuDevicePrimaryCtxRelease)      \
	X(cuCtxPushCurrent)               \
	X(cuCtxPopCurrent)                \
	X(cuMemGetAllocationGranularity)  \
	X(cuMemAddressReserve)            \
	X(cuMemAddressFree)               \
	X(cuMemCreate)                    \
	X(cuMemRelease)                   \
	X(cuMemExportToShareableHandle)   \
	X(cuMemImportFromShareableHandle) \
	X(cuMemMap)                       \
	X(cuMemUnmap)                     \
	X(cuMemSetAccess)                 \
	X(cuMemcpyDtoH)                   \
	X(cuMemcpyHtoD)                   \
	X(cuMemcpyDtoD)                   \
	X(cuMemcpyDtoHAsync)              \
	X(cuMemcpyHtoDAsync)              \
	X(cuMemsetD8Async)                \
	X(cuStreamCreate)                 \
	X(cuStreamDestroy)                \
	X(cuStreamSynchronize)            \
	X(cuMemHostRegister)              \
	X(cuMemHostUnregister)

struct cuda_api {
	void *dl;
#define MEMBER(name) __typeof__(&name) p_##name;
	CUDA_FUNCS(MEMBER)
#undef MEMBER
};

struct cuda_backend {
	struct vmm_backend base;
	struct cuda_api api;
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	CUmemAllocationProp prop;
	CUmemAccessDesc access_rw, access_ro, access_none;
	pthread_mutex_t lock; /* protects track and the scratch range */
	struct vmm_track track;
	/* two pages of VA for the copy helpers: a page copied to or from
	 * the host at the first; page_copy maps its source there and its
	 * destination at the second */
	CUdeviceptr scratch;
};

/* One driver call's result as 0 / -errno, named in the log. */
#define CUCHECK(res, name) vmm_cuda_result_to_errno((int)(res), name)

/* vmm/cuda.c */
extern const struct vmm_ops vmm_cuda_ops;
int cuda_ctx_enter(struct cuda_backend *c);
void cuda_ctx_leave(struct cuda_backend *c);

/* vmm/cuda_open.c: undo whatever vmm_cuda_open got as far as */
void vmm_cuda_teardown(struct cuda_backend *c);

#endif
