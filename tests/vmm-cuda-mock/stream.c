/* SPDX-License-Identifier: MIT */
/*
 * The mock libcuda's copies, memsets, streams and host registrations
 * (libcuda.c says what the mock is): the one stream, the memset it holds
 * back until synchronized, the copies to the device KVMM_MOCK_STALL_HTOD
 * holds back with it (and the context pushes it fails), and the count of
 * host registrations.  Split from libcuda.c.
 */
#include <stdlib.h>
#include <string.h>

#include "mock.h"

static char dummy_stream;

/*
 * A memset of device memory is asynchronous to the host (CUDA's "API
 * synchronization behavior"): the mock holds it back until the stream is
 * synchronized, and unmapping its range before that is a misuse, as is
 * a caller that never waits (the bytes would not be there yet).
 */
struct memset_queued memset_q;

static void memset_run(void)
{
	if (memset_q.pending)
		memset((void *)memset_q.dst, memset_q.v, memset_q.n);
	memset_q.pending = false;
}

/*
 * Copies to the device queued on the stream (KVMM_MOCK_STALL_HTOD): run
 * in order when it is synchronized, or before a later operation on it
 * (a memset, a copy back), as a stream runs its work in order.
 */
#define STALL_PUSHES 5 /* vmm/cuda.c's CUDA_SYNC_ENTER_TRIES */
#define HTOD_QUEUE 64

static struct {
	CUdeviceptr dst;
	const void *src;
	size_t n;
} htod_q[HTOD_QUEUE];
static int htod_queued;
__thread int stall_pushes; /* this thread's pushes still to fail */

static void htod_run(void)
{
	for (int i = 0; i < htod_queued; i++)
		memcpy((void *)htod_q[i].dst, htod_q[i].src, htod_q[i].n);
	htod_queued = 0;
}

/* Whether [ptr, ptr + size) has a queued copy into it. */
bool htod_pending(CUdeviceptr ptr, size_t size)
{
	for (int i = 0; i < htod_queued; i++)
		if (htod_q[i].dst < ptr + size &&
		    ptr < htod_q[i].dst + htod_q[i].n)
			return true;
	return false;
}

MOCK(cuMemcpyDtoH);
CUresult mock_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
	CUresult r = need_ctx();

	if (!r)
		memcpy(dst, (const void *)src, n);
	return r;
}

MOCK(cuMemcpyHtoD);
CUresult mock_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
	CUresult r = need_ctx();

	if (!r)
		memcpy((void *)dst, src, n);
	return r;
}

MOCK(cuMemcpyDtoD);
CUresult mock_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	CUresult r = need_ctx();

	if (!r)
		memcpy((void *)dst, (const void *)src, n);
	return r;
}

MOCK(cuMemcpyDtoHAsync);
CUresult mock_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n,
				CUstream s)
{
	if (s != (CUstream)&dummy_stream)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	htod_run(); /* the stream's earlier copies first */
	pthread_mutex_unlock(&lock);
	return mock_cuMemcpyDtoH(dst, src, n);
}

/* Whether the nr-th cuMemcpyHtoDAsync is one KVMM_MOCK_STALL_HTOD names
 * (N[,N...]). */
static bool stall_at(const char *v, long nr)
{
	while (v && *v) {
		char *end;

		if (strtol(v, &end, 10) == nr)
			return true;
		v = *end == ',' ? end + 1 : NULL;
	}
	return false;
}

MOCK(cuMemcpyHtoDAsync);
CUresult mock_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n,
				CUstream s)
{
	const char *stall = getenv("KVMM_MOCK_STALL_HTOD");
	static long nr_htod;
	CUresult r;

	if (s != (CUstream)&dummy_stream)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!stall)
		return mock_cuMemcpyHtoD(dst, src, n);
	r = need_ctx();
	if (r)
		return r;
	pthread_mutex_lock(&lock);
	memset_run(); /* the stream's earlier memset first */
	if (htod_queued == HTOD_QUEUE)
		htod_run(); /* the oldest are done by now */
	htod_q[htod_queued].dst = dst;
	htod_q[htod_queued].src = src;
	htod_q[htod_queued++].n = n;
	if (stall_at(stall, ++nr_htod))
		stall_pushes = STALL_PUSHES;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

MOCK(cuMemsetD8Async);
CUresult mock_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n,
			      CUstream s)
{
	CUresult r = need_ctx();

	if (!r && s != (CUstream)&dummy_stream)
		r = CUDA_ERROR_INVALID_HANDLE;
	if (r)
		return r;
	pthread_mutex_lock(&lock);
	htod_run(); /* the stream's earlier copies first */
	memset_run(); /* one queued at a time: the older one is done */
	memset_q.pending = true;
	memset_q.dst = dst;
	memset_q.v = v;
	memset_q.n = n;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

MOCK(cuStreamCreate);
CUresult mock_cuStreamCreate(CUstream *s, unsigned int flags)
{
	CUresult r = need_ctx();

	if (r)
		return r;
	pthread_mutex_lock(&lock);
	nr_streams++;
	pthread_mutex_unlock(&lock);
	*s = (CUstream)&dummy_stream;
	return CUDA_SUCCESS;
}

MOCK(cuStreamDestroy);
CUresult mock_cuStreamDestroy(CUstream s)
{
	if (s != (CUstream)&dummy_stream || !nr_streams)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	nr_streams--;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

MOCK(cuStreamSynchronize);
CUresult mock_cuStreamSynchronize(CUstream s)
{
	CUresult r = need_ctx();

	if (r)
		return r;
	if (s != (CUstream)&dummy_stream)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	htod_run(); /* queued before any memset (see above) */
	memset_run();
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

MOCK(cuMemHostRegister);
CUresult mock_cuMemHostRegister(void *p, size_t n, unsigned int flags)
{
	CUresult r = need_ctx();

	if (r)
		return r;
	if (!p || !n)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	nr_registered++;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

MOCK(cuMemHostUnregister);
CUresult mock_cuMemHostUnregister(void *p)
{
	CUresult r = need_ctx();

	if (r)
		return r;
	if (!nr_registered)
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	pthread_mutex_lock(&lock);
	nr_registered--;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}
