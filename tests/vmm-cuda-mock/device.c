/* SPDX-License-Identifier: MIT */
/*
 * The mock libcuda's driver, devices and contexts (libcuda.c says what
 * the mock is): cuInit and its driver thread, the devices
 * KVMM_MOCK_DEVICES and KVMM_MOCK_VISIBLE make, the primary context and
 * the pushes and pops of it, and kvmm_mock_fail_ctx_push, the tests'
 * knob to fail the next pushes.  Split from libcuda.c.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mock.h"

static char dummy_ctx;

int device_count(void)
{
	const char *s = getenv("KVMM_MOCK_VISIBLE");
	int n = 0;

	if (s) {
		for (; *s; s++)
			n += *s == ',';
		return n + 1;
	}
	s = getenv("KVMM_MOCK_DEVICES");
	return s ? atoi(s) : 1;
}

/* The device behind this process's ordinal (KVMM_MOCK_VISIBLE). */
int physical(int ordinal)
{
	const char *s = getenv("KVMM_MOCK_VISIBLE");

	for (int i = 0; s && *s; i++) {
		if (i == ordinal)
			return atoi(s);
		s = strchr(s, ',');
		s = s ? s + 1 : NULL;
	}
	return ordinal;
}

MOCK(cuGetErrorName);
CUresult mock_cuGetErrorName(CUresult error, const char **pStr)
{
	switch (error) {
	case CUDA_SUCCESS:
		*pStr = "CUDA_SUCCESS";
		break;
	case CUDA_ERROR_INVALID_VALUE:
		*pStr = "CUDA_ERROR_INVALID_VALUE";
		break;
	case CUDA_ERROR_INVALID_CONTEXT:
		*pStr = "CUDA_ERROR_INVALID_CONTEXT";
		break;
	case CUDA_ERROR_NOT_MAPPED:
		*pStr = "CUDA_ERROR_NOT_MAPPED";
		break;
	default:
		*pStr = "CUDA_ERROR_MOCK_OTHER";
		break;
	}
	return CUDA_SUCCESS;
}

MOCK(cuInit);
/* The real driver starts threads of its own in cuInit that live as long
 * as the process, with the signal mask the caller had then; so does the
 * mock, so that a process-directed signal the caller blocks only later
 * lands there and kills it as it would on a GPU ... */
static void *driver_thread(void *arg)
{
	for (;;)
		pause();
	return arg;
}

/* ... and keeps its device files (/dev/nvidiactl, /dev/nvidia0, ...) open
 * until the process ends, whatever is released: so does the mock, so
 * that fd-leak checks learn to count from after the first cuInit. */
static void start_driver_thread(void)
{
	pthread_t th;

	if (open("/dev/null", O_RDONLY | O_CLOEXEC) < 0)
		abort();

	if (pthread_create(&th, NULL, driver_thread, NULL) == 0)
		pthread_detach(th);
}

CUresult mock_cuInit(unsigned int flags)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&once, start_driver_thread);
	initialized = true;
	return CUDA_SUCCESS;
}

MOCK(cuDriverGetVersion);
CUresult mock_cuDriverGetVersion(int *v)
{
	*v = 12040;
	return CUDA_SUCCESS;
}

MOCK(cuDeviceGetCount);
CUresult mock_cuDeviceGetCount(int *count)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	*count = device_count();
	return CUDA_SUCCESS;
}

MOCK(cuDeviceGet);
CUresult mock_cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (ordinal < 0 || ordinal >= device_count())
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

MOCK(cuDeviceGetName);
CUresult mock_cuDeviceGetName(char *name, int len, CUdevice dev)
{
	snprintf(name, (size_t)len, "Mock GPU %d", physical(dev));
	return CUDA_SUCCESS;
}

MOCK(cuDeviceGetUuid);
CUresult mock_cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	dev = physical(dev);
	for (int i = 0; i < 16; i++)
		uuid->bytes[i] = (char)(0x10 * dev + i);
	return CUDA_SUCCESS;
}

/* Device d sits at FFFF:F0+d:1F.7 (no real machine has that domain), in
 * the 13-byte form the driver gives. */
MOCK(cuDeviceGetPCIBusId);
CUresult mock_cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)
{
	if (len < 13)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(id, (size_t)len, "FFFF:%02X:1F.7", 0xf0 + physical(dev));
	return CUDA_SUCCESS;
}

MOCK(cuDevicePrimaryCtxRetain);
CUresult mock_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	pthread_mutex_lock(&lock);
	ctx_refs++;
	pthread_mutex_unlock(&lock);
	*ctx = (CUcontext)&dummy_ctx;
	return CUDA_SUCCESS;
}

MOCK(cuDevicePrimaryCtxRelease);
CUresult mock_cuDevicePrimaryCtxRelease(CUdevice dev)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&lock);
	if (ctx_refs > 0)
		ctx_refs--;
	else
		r = CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_unlock(&lock);
	return r;
}

/* Pushes still to fail (kvmm_mock_fail_ctx_push). */
static int push_failures;

/* For tests, found with dlsym: the next n cuCtxPushCurrent calls fail. */
__attribute__((visibility("default"))) void kvmm_mock_fail_ctx_push(int n)
{
	__atomic_store_n(&push_failures, n, __ATOMIC_SEQ_CST);
}

MOCK(cuCtxPushCurrent);
CUresult mock_cuCtxPushCurrent(CUcontext ctx)
{
	int left = __atomic_load_n(&push_failures, __ATOMIC_SEQ_CST);

	while (left > 0 && !__atomic_compare_exchange_n(
				   &push_failures, &left, left - 1, false,
				   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	if (left > 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (stall_pushes > 0) {
		stall_pushes--;
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (ctx != (CUcontext)&dummy_ctx || !ctx_refs)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx_depth++;
	return CUDA_SUCCESS;
}

MOCK(cuCtxPopCurrent);
CUresult mock_cuCtxPopCurrent(CUcontext *ctx)
{
	if (ctx_depth <= 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx_depth--;
	if (ctx)
		*ctx = (CUcontext)&dummy_ctx;
	return CUDA_SUCCESS;
}
