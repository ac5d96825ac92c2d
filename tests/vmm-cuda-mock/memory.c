/* SPDX-License-Identifier: MIT */
/*
 * The mock libcuda's memory objects and mappings (libcuda.c says what
 * the mock is): the granularity, address ranges reserved and freed,
 * allocations made on memfds, exported as fds and imported (the same
 * handle again for one this process has), mapped into ranges, unmapped,
 * and the access granted to them.  Split from libcuda.c.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mock.h"

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
