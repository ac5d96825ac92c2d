/* SPDX-License-Identifier: MIT */
/*
 * A stand-in libcuda for machines without a GPU: the CUDA Driver API VMM
 * calls vmm/cuda.c uses, implemented with memfds and mmap, strict about
 * what the real driver is strict about (a current context for memory
 * calls, the POSIX fd handle type, granularity-aligned sizes, exact
 * reservations, unmapping before freeing a range, power-of-two
 * alignments), and checking at exit that every allocation, reservation,
 * mapping, stream, registration and context reference was given back and
 * no call broke a documented rule (exit status 3 and a message if not).
 *
 * Built by tests/vmm-cuda-mock.sh into $KVMM_BUILD/vmm-cuda-mock/ and
 * loaded through KVMM_LIBCUDA, so the cuda backend's own code runs end to
 * end in CI.  It proves the backend's bookkeeping and call sequence, not
 * the real driver's behaviour: the GPU check (bench/gpu-check.sh) does
 * that.  Every prototype is checked against cuda.h at compile time.
 *
 * KVMM_MOCK_DEVICES=N sets the device count (default 1).
 * KVMM_MOCK_VISIBLE=a,b,... shows this process only those devices, as
 * CUDA_VISIBLE_DEVICES does: ordinal i is device a, b, ... (a device's
 * name, UUID and PCI address are its own whatever its ordinal).  Memory
 * remembers its device across processes (the memfd's name), and
 * cuMemSetAccess refuses to grant a device other than the memory's own
 * (no peer access here): the owning GPU would get no access.  Importing
 * an allocation the process has already gives its handle again with one
 * more reference, and releasing a handle with no reference left is a
 * misuse (it may be another allocation's by then).
 * KVMM_MOCK_STALL_HTOD=N[,N...] holds every cuMemcpyHtoDAsync back until
 * its stream is synchronized, and makes the thread that queues the Nth
 * one unable to enter the context for its next STALL_PUSHES
 * cuCtxPushCurrent calls: its wait gives up (vmm/cuda.c's synchronize:
 * -EINPROGRESS) and the copy lands at the next cuStreamSynchronize of
 * any thread, late, as a real GPU's may.
 *
 * The mock is four files, by what they mock: device.c the driver, its
 * devices and contexts (and the kvmm_mock_fail_ctx_push knob), memory.c
 * allocations, reservations, mappings and access, stream.c copies,
 * memsets, streams and host registrations (and the KVMM_MOCK_STALL_HTOD
 * queue); this file the state they share (mock.h), the one exported
 * entry point and the checks at exit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mock.h"

/* The state the files share (mock.h). */
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
struct mapping maps[MAX_OBJS];
struct alloc *allocs[MAX_OBJS]; /* live ones, to look handles up */
struct range ranges[MAX_OBJS];
int nr_allocs, nr_streams, nr_registered, ctx_refs;
bool initialized;
__thread int ctx_depth;

/* Calls that break a rule cuda.h documents; any fails the process at
 * exit, after the driver's own answer went back to the caller. */
static int nr_misuse;

CUresult misuse(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mock libcuda: misuse: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	pthread_mutex_lock(&lock);
	nr_misuse++;
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult need_ctx(void)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	return ctx_depth > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

#define ENTRY(name) { #name, (void *)mock_##name },
static const struct {
	const char *name;
	void *fn;
} table[] = {
	ENTRY(cuGetErrorName) ENTRY(cuInit) ENTRY(cuDriverGetVersion) ENTRY(cuDeviceGetCount) ENTRY(
		cuDeviceGet) ENTRY(cuDeviceGetName) ENTRY(cuDeviceGetUuid) ENTRY(cuDeviceGetPCIBusId)
		ENTRY(cuDevicePrimaryCtxRetain) ENTRY(cuDevicePrimaryCtxRelease) ENTRY(
			cuCtxPushCurrent) ENTRY(cuCtxPopCurrent) ENTRY(cuMemGetAllocationGranularity)
			ENTRY(cuMemAddressReserve) ENTRY(cuMemAddressFree) ENTRY(
				cuMemCreate) ENTRY(cuMemRelease) ENTRY(cuMemExportToShareableHandle)
				ENTRY(cuMemImportFromShareableHandle) ENTRY(
					cuMemMap) ENTRY(cuMemUnmap) ENTRY(cuMemSetAccess)
					ENTRY(cuMemcpyDtoH) ENTRY(cuMemcpyHtoD) ENTRY(
						cuMemcpyDtoHAsync) ENTRY(cuMemcpyHtoDAsync)
						ENTRY(cuStreamCreate) ENTRY(
							cuStreamDestroy) ENTRY(cuStreamSynchronize)
							ENTRY(cuMemHostRegister) ENTRY(
								cuMemHostUnregister)
								ENTRY(cuMemsetD8Async)
									ENTRY(cuMemcpyDtoD)
};

/* The only exported entry point of the API (kvmm_mock_* are the tests'),
 * as the backend finds everything else through it. */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
			     cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (!strcmp(table[i].name, symbol)) {
			*pfn = table[i].fn;
			if (status)
				*status = CU_GET_PROC_ADDRESS_SUCCESS;
			return CUDA_SUCCESS;
		}
	}
	*pfn = NULL;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}

/* Everything given back?  Fail the process loudly if not. */
__attribute__((destructor)) static void check_leaks(void)
{
	int nr_ranges = 0, nr_maps = 0;

	for (int i = 0; i < MAX_OBJS; i++) {
		nr_ranges += ranges[i].va != 0;
		nr_maps += maps[i].a != NULL;
	}
	if (nr_misuse) {
		fprintf(stderr,
			"mock libcuda: %d calls broke a documented rule\n",
			nr_misuse);
		_exit(3);
	}
	if (nr_allocs || nr_ranges || nr_maps || nr_streams || nr_registered ||
	    ctx_refs || ctx_depth) {
		fprintf(stderr,
			"mock libcuda: leaked %d allocations, %d ranges, %d mappings, %d streams, %d registrations, %d context refs, context depth %d\n",
			nr_allocs, nr_ranges, nr_maps, nr_streams,
			nr_registered, ctx_refs, ctx_depth);
		_exit(3);
	}
}
