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
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct mapping maps[MAX_OBJS];
static struct alloc *allocs[MAX_OBJS]; /* live ones, to look handles up */
static struct range ranges[MAX_OBJS];
static int nr_allocs, nr_streams, nr_registered, ctx_refs;
static bool initialized;
static __thread int ctx_depth;
static char dummy_ctx, dummy_stream;

#define MOCK(name) static __typeof__(name) mock_##name

/* Calls that break a rule cuda.h documents; any fails the process at
 * exit, after the driver's own answer went back to the caller. */
static int nr_misuse;

static CUresult __attribute__((format(printf, 1, 2)))
misuse(const char *fmt, ...)
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

/*
 * A memset of device memory is asynchronous to the host (CUDA's "API
 * synchronization behavior"): the mock holds it back until the stream is
 * synchronized, and unmapping its range before that is a misuse, as is
 * a caller that never waits (the bytes would not be there yet).
 */
static struct {
	bool pending;
	CUdeviceptr dst;
	unsigned char v;
	size_t n;
} memset_q;

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
static __thread int stall_pushes; /* this thread's pushes still to fail */

static void htod_run(void)
{
	for (int i = 0; i < htod_queued; i++)
		memcpy((void *)htod_q[i].dst, htod_q[i].src, htod_q[i].n);
	htod_queued = 0;
}

/* Whether [ptr, ptr + size) has a queued copy into it. */
static bool htod_pending(CUdeviceptr ptr, size_t size)
{
	for (int i = 0; i < htod_queued; i++)
		if (htod_q[i].dst < ptr + size &&
		    ptr < htod_q[i].dst + htod_q[i].n)
			return true;
	return false;
}

static CUresult need_ctx(void)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	return ctx_depth > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static int device_count(void)
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
static int physical(int ordinal)
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

MOCK(cuMemGetAllocationGranularity);
CUresult mock_cuMemGetAllocationGranularity(size_t *g,
					    const CUmemAllocationProp *prop,
					    CUmemAllocationGranularity_flags o)
{
	if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	*g = GRAN;
	return CUDA_SUCCESS;
}

MOCK(cuMemAddressReserve);
CUresult mock_cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
				  size_t alignment, CUdeviceptr addr,
				  unsigned long long flags)
{
	CUresult r = need_ctx();
	uintptr_t p, al;
	void *m;

	if (r)
		return r;
	if (!size || size % GRAN || (alignment && alignment % GRAN) || addr ||
	    flags)
		return CUDA_ERROR_INVALID_VALUE;
	/* cuda.h: "the alignment must be a power of two or zero".  Refused
	 * as the driver would, and remembered: the caller should never have
	 * asked, so the process fails at exit. */
	if (alignment & (alignment - 1))
		return misuse(
			"cuMemAddressReserve: alignment %zu is not a power of two",
			alignment);
	/* The start aligned as asked, as the driver does (at least to the
	 * granularity). */
	if (alignment < GRAN)
		alignment = GRAN;
	m = mmap(NULL, size + alignment, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p = (uintptr_t)m;
	al = (p + alignment - 1) / alignment * alignment;
	if (al > p)
		munmap(m, al - p);
	munmap((void *)(al + size), p + size + alignment - (al + size));
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OBJS; i++) {
		if (!ranges[i].va) {
			ranges[i].va = al;
			ranges[i].size = size;
			pthread_mutex_unlock(&lock);
			*ptr = al;
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&lock);
	munmap((void *)al, size);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

MOCK(cuMemAddressFree);
CUresult mock_cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult r = need_ctx();

	if (r)
		return r;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OBJS; i++) {
		if (ranges[i].va != ptr)
			continue;
		if (ranges[i].size != size)
			break;
		for (int j = 0; j < MAX_OBJS; j++)
			if (maps[j].a && maps[j].va >= ptr &&
			    maps[j].va < ptr + size) {
				pthread_mutex_unlock(&lock);
				return CUDA_ERROR_INVALID_VALUE;
			}
		munmap((void *)ptr, size);
		ranges[i].va = 0;
		pthread_mutex_unlock(&lock);
		return CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult new_alloc(int fd, int dev, CUmemGenericAllocationHandle *h)
{
	struct alloc *a = calloc(1, sizeof(*a));
	struct stat st;

	if (!a || fstat(fd, &st)) {
		free(a);
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->fd = fd;
	a->dev = dev;
	a->st_dev = st.st_dev;
	a->st_ino = st.st_ino;
	a->refs = 1;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OBJS; i++) {
		if (!allocs[i]) {
			allocs[i] = a;
			nr_allocs++;
			pthread_mutex_unlock(&lock);
			*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&lock);
	close(fd);
	free(a);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The live allocation behind h, or NULL; under lock. */
static struct alloc *find_alloc(CUmemGenericAllocationHandle h)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (allocs[i] &&
		    (CUmemGenericAllocationHandle)(uintptr_t)allocs[i] == h)
			return allocs[i];
	return NULL;
}

/* Under lock. */
static void maybe_free(struct alloc *a)
{
	if (a->refs || a->maps)
		return;
	for (int i = 0; i < MAX_OBJS; i++)
		if (allocs[i] == a)
			allocs[i] = NULL;
	close(a->fd);
	free(a);
	nr_allocs--;
}

MOCK(cuMemCreate);
CUresult mock_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
			  const CUmemAllocationProp *prop,
			  unsigned long long flags)
{
	CUresult r = need_ctx();
	char name[32];
	int fd, dev;

	if (r)
		return r;
	if (!size || size % GRAN || flags ||
	    prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    prop->location.id >= device_count() ||
	    prop->requestedHandleTypes !=
		    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	/* the name travels with the fd: an importer learns the device */
	dev = physical(prop->location.id);
	snprintf(name, sizeof(name), "mock-cuda-dev%d", dev);
	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (ftruncate(fd, (off_t)size)) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return new_alloc(fd, dev, h);
}

MOCK(cuMemRelease);
CUresult mock_cuMemRelease(CUmemGenericAllocationHandle h)
{
	struct alloc *a;

	pthread_mutex_lock(&lock);
	a = find_alloc(h);
	if (!a || a->refs <= 0) {
		pthread_mutex_unlock(&lock);
		/* the allocation may be gone and its handle another's */
		return misuse(
			"cuMemRelease of a handle with no reference left");
	}
	a->refs--;
	maybe_free(a);
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

MOCK(cuMemExportToShareableHandle);
CUresult mock_cuMemExportToShareableHandle(void *out,
					   CUmemGenericAllocationHandle h,
					   CUmemAllocationHandleType type,
					   unsigned long long flags)
{
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	int fd;

	if (!a || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || flags)
		return CUDA_ERROR_INVALID_VALUE;
	fd = dup(a->fd); /* no O_CLOEXEC, like the real driver */
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)out = fd;
	return CUDA_SUCCESS;
}

MOCK(cuMemImportFromShareableHandle);
CUresult mock_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h,
					     void *os,
					     CUmemAllocationHandleType type)
{
	int fd = (int)(uintptr_t)os, nfd, dev = -1;
	char path[64], link[128] = "";
	struct stat st;

	if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !st.st_size ||
	    st.st_size % GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	/* This process has the allocation already: the same handle, one
	 * more reference (each import is released once). */
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OBJS; i++) {
		struct alloc *a = allocs[i];

		if (a && a->st_dev == st.st_dev && a->st_ino == st.st_ino) {
			a->refs++;
			pthread_mutex_unlock(&lock);
			*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&lock);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (readlink(path, link, sizeof(link) - 1) > 0)
		sscanf(link, "/memfd:mock-cuda-dev%d", &dev);
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (nfd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	return new_alloc(nfd, dev, h);
}

MOCK(cuMemMap);
CUresult mock_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
		       CUmemGenericAllocationHandle h, unsigned long long flags)
{
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	CUresult r = need_ctx();
	struct stat st;
	bool in_range = false;

	if (r)
		return r;
	if (!a || a->refs <= 0 || offset || flags || ptr % GRAN ||
	    fstat(a->fd, &st) || (size_t)st.st_size != size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OBJS; i++)
		if (ranges[i].va && ptr >= ranges[i].va &&
		    ptr + size <= ranges[i].va + ranges[i].size)
			in_range = true;
	for (int i = 0; i < MAX_OBJS && in_range; i++)
		if (maps[i].a && maps[i].va == ptr) {
			pthread_mutex_unlock(&lock);
			return CUDA_ERROR_ALREADY_MAPPED;
		}
	for (int i = 0; i < MAX_OBJS && in_range; i++) {
		if (maps[i].a)
			continue;
		if (mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED,
			 a->fd, 0) == MAP_FAILED)
			break;
		maps[i].va = ptr;
		maps[i].size = size;
		maps[i].a = a;
		a->maps++;
		pthread_mutex_unlock(&lock);
		return CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_INVALID_VALUE;
}

MOCK(cuMemUnmap);
CUresult mock_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUresult r = need_ctx();

	if (r)
		return r;
	pthread_mutex_lock(&lock);
	if (memset_q.pending && memset_q.dst < ptr + size &&
	    ptr < memset_q.dst + memset_q.n) {
		pthread_mutex_unlock(&lock);
		return misuse(
			"cuMemUnmap of 0x%llx while a cuMemsetD8Async into it was not waited for",
			(unsigned long long)ptr);
	}
	if (htod_pending(ptr, size)) {
		pthread_mutex_unlock(&lock);
		return misuse(
			"cuMemUnmap of 0x%llx while a cuMemcpyHtoDAsync into it was not waited for",
			(unsigned long long)ptr);
	}
	for (int i = 0; i < MAX_OBJS; i++) {
		if (!maps[i].a || maps[i].va != ptr)
			continue;
		mmap((void *)ptr, size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
		     -1, 0);
		maps[i].a->maps--;
		maybe_free(maps[i].a);
		maps[i].a = NULL;
		pthread_mutex_unlock(&lock);
		return CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_NOT_MAPPED;
}

MOCK(cuMemSetAccess);
CUresult mock_cuMemSetAccess(CUdeviceptr ptr, size_t size,
			     const CUmemAccessDesc *desc, size_t count)
{
	CUresult r = need_ctx();
	int prot;

	if (r)
		return r;
	if (count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	for (CUdeviceptr p = ptr; p < ptr + size; p += GRAN) {
		struct alloc *a = NULL;

		for (int i = 0; i < MAX_OBJS && !a; i++)
			if (maps[i].a && p >= maps[i].va &&
			    p - maps[i].va < maps[i].size)
				a = maps[i].a;
		if (!a) {
			pthread_mutex_unlock(&lock);
			return CUDA_ERROR_INVALID_VALUE;
		}
		/* no peer access in the mock: only the memory's own GPU */
		if (a->dev >= 0 && a->dev != physical(desc->location.id)) {
			pthread_mutex_unlock(&lock);
			fprintf(stderr,
				"mock libcuda: cuMemSetAccess grants device %d (ordinal %d) on memory of device %d\n",
				physical(desc->location.id), desc->location.id,
				a->dev);
			return CUDA_ERROR_INVALID_DEVICE;
		}
	}
	pthread_mutex_unlock(&lock);
	prot = desc->flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ?
		       PROT_READ | PROT_WRITE :
	       desc->flags == CU_MEM_ACCESS_FLAGS_PROT_READ ? PROT_READ :
							      PROT_NONE;
	return mprotect((void *)ptr, size, prot) ? CUDA_ERROR_INVALID_VALUE :
						   CUDA_SUCCESS;
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
