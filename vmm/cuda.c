/* SPDX-License-Identifier: MIT */
/*
 * cuda backend: CUDA Driver API virtual memory management.
 *
 *   reserve      cuMemAddressReserve, aligned to the page size
 *   page_create  cuMemCreate, pinned device memory on the chosen GPU with
 *                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR as its shareable
 *                handle type, so one page = one fd a client can import
 *   export       cuMemExportToShareableHandle (fd made O_CLOEXEC)
 *   import       cuMemImportFromShareableHandle (the fd stays the caller's)
 *   map / unmap  cuMemMap / cuMemUnmap of one page
 *   set_access   cuMemSetAccess for this device
 *   copies       the page is mapped into a private one-page scratch range,
 *                copied with cuMemcpyDtoH/HtoD, and unmapped again; the
 *                async variants copy from a caller's mapping on the
 *                backend's own non-blocking stream
 *
 * libcuda is loaded with dlopen (cfg->libcuda_path or "libcuda.so.1") and
 * every entry point comes from cuGetProcAddress, so nothing links against
 * libcuda and a machine without a driver just fails vmm_cuda_open with
 * -ENODEV.  Each operation pushes the device's primary context and pops it
 * afterwards, so the calling thread's own context (an inference engine's)
 * is left as it was.  Arguments are validated by vmm/track.c exactly as on
 * the host backend; driver errors go through vmm_cuda_result_to_errno().
 * Nothing here exits: every failure returns -errno.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "vmm/cuda_priv.h"
#include "vmm/track.h"
#include "vmm/vmm.h"

#if HAVE_CUDA_H
#include <cuda.h>

/* The driver ABI version we ask cuGetProcAddress for: 12.0 gives the _v2
 * entry points that cuda.h's macros name. */
#define KVMM_CUDA_API_VERSION 12000

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
	CUdeviceptr scratch; /* one page of VA for the copy helpers */
};

/* The loaded cuGetErrorName for cuda_err.c's logging. */
static __typeof__(&cuGetErrorName) error_name_pfn;

static int error_name_wrapper(int result, const char **name)
{
	return error_name_pfn ? (int)error_name_pfn((CUresult)result, name) :
				-1;
}

static struct cuda_backend *to_cuda(struct vmm_backend *b)
{
	return (struct cuda_backend *)b;
}

/* One driver call's result as 0 / -errno, named in the log. */
#define CUCHECK(res, name) vmm_cuda_result_to_errno((int)(res), name)

static int ctx_enter(struct cuda_backend *c)
{
	return CUCHECK(c->api.p_cuCtxPushCurrent(c->ctx), "cuCtxPushCurrent");
}

static void ctx_leave(struct cuda_backend *c)
{
	CUcontext popped;

	CUCHECK(c->api.p_cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
}

/* Lock + push the context; on failure nothing is held. */
static int enter(struct cuda_backend *c)
{
	int err;

	pthread_mutex_lock(&c->lock);
	err = ctx_enter(c);
	if (err)
		pthread_mutex_unlock(&c->lock);
	return err;
}

static void leave(struct cuda_backend *c)
{
	ctx_leave(c);
	pthread_mutex_unlock(&c->lock);
}

static int cuda_granularity(struct vmm_backend *b, size_t *page_size)
{
	*page_size = b->page_size;
	return 0;
}

static int cuda_reserve(struct vmm_backend *b, size_t size, uint64_t *va)
{
	struct cuda_backend *c = to_cuda(b);
	CUdeviceptr p;
	int err;

	err = enter(c);
	if (err)
		return err;
	err = vmm_track_check_reserve(&c->track, size);
	if (err)
		goto out;
	err = CUCHECK(c->api.p_cuMemAddressReserve(&p, size, b->page_size, 0,
						   0),
		      "cuMemAddressReserve");
	if (err)
		goto out;
	err = vmm_track_add_range(&c->track, p, size);
	if (err) {
		CUCHECK(c->api.p_cuMemAddressFree(p, size), "cuMemAddressFree");
		goto out;
	}
	*va = p;
out:
	leave(c);
	return err;
}

static int cuda_free_range(struct vmm_backend *b, uint64_t va, size_t size)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = enter(c);
	if (err)
		return err;
	err = vmm_track_check_free_range(&c->track, va, size);
	if (!err)
		err = CUCHECK(c->api.p_cuMemAddressFree(va, size),
			      "cuMemAddressFree");
	if (!err)
		vmm_track_remove_range(&c->track, va);
	leave(c);
	return err;
}

static int cuda_page_create(struct vmm_backend *b, vmm_handle_t *page)
{
	struct cuda_backend *c = to_cuda(b);
	CUmemGenericAllocationHandle h;
	int err;

	err = enter(c);
	if (err)
		return err;
	err = CUCHECK(c->api.p_cuMemCreate(&h, b->page_size, &c->prop, 0),
		      "cuMemCreate");
	if (err)
		goto out;
	err = vmm_track_add_page(&c->track, h);
	if (err) {
		CUCHECK(c->api.p_cuMemRelease(h), "cuMemRelease");
		goto out;
	}
	*page = h;
out:
	leave(c);
	return err;
}

static int cuda_page_release(struct vmm_backend *b, vmm_handle_t page)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = enter(c);
	if (err)
		return err;
	if (!vmm_track_page_live(&c->track, page)) {
		err = -EBADF;
		goto out;
	}
	/* One import of several of the same allocation (see
	 * cuda_page_import): the others keep it. */
	if (vmm_track_page_refs(&c->track, page) > 1) {
		vmm_track_page_put(&c->track, page);
		goto out;
	}
	err = CUCHECK(c->api.p_cuMemRelease(page), "cuMemRelease");
	if (!err)
		vmm_track_remove_page(&c->track, page);
out:
	leave(c);
	return err;
}

static int cuda_page_export(struct vmm_backend *b, vmm_handle_t page, int *fd)
{
	struct cuda_backend *c = to_cuda(b);
	int err, nfd = -1;

	err = enter(c);
	if (err)
		return err;
	if (!vmm_track_page_live(&c->track, page)) {
		err = -EBADF;
		goto out;
	}
	err = CUCHECK(c->api.p_cuMemExportToShareableHandle(
			      &nfd, page,
			      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		      "cuMemExportToShareableHandle");
	if (err)
		goto out;
	/* The driver does not promise O_CLOEXEC; kvmm's rule is every fd. */
	if (fcntl(nfd, F_SETFD, FD_CLOEXEC)) {
		err = -errno;
		close(nfd);
		goto out;
	}
	*fd = nfd;
out:
	leave(c);
	return err;
}

static int cuda_page_import(struct vmm_backend *b, int fd, vmm_handle_t *page)
{
	struct cuda_backend *c = to_cuda(b);
	CUmemGenericAllocationHandle h;
	int err;

	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return -EBADF;
	err = enter(c);
	if (err)
		return err;
	err = CUCHECK(c->api.p_cuMemImportFromShareableHandle(
			      &h, (void *)(uintptr_t)fd,
			      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		      "cuMemImportFromShareableHandle");
	/* Not one of ours (another process's device memory or not a CUDA
	 * fd at all) reads as a bad fd, as on the host backend. */
	if (err == -EINVAL)
		err = -EBADF;
	if (err)
		goto out;
	err = vmm_track_add_page(&c->track, h);
	if (err == -EEXIST) {
		/*
		 * The driver hands back the same handle when this process
		 * already has the allocation.  Each import is a reference of
		 * its own, as on the host backend (two handles there): the
		 * handle stays live until page_release was called once per
		 * import, and only the last reaches the driver, which keeps
		 * one reference for it (the extra one goes back now).
		 */
		err = vmm_track_page_get(&c->track, h);
		CUCHECK(c->api.p_cuMemRelease(h), "cuMemRelease");
		if (err)
			goto out;
	} else if (err) {
		CUCHECK(c->api.p_cuMemRelease(h), "cuMemRelease");
		goto out;
	}
	*page = h;
	err = 0;
out:
	leave(c);
	return err;
}

static int cuda_map_locked(struct cuda_backend *c, uint64_t va,
			   vmm_handle_t page)
{
	return CUCHECK(c->api.p_cuMemMap(va, c->base.page_size, 0, page, 0),
		       "cuMemMap");
}

static int cuda_map(struct vmm_backend *b, uint64_t va, vmm_handle_t page)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = enter(c);
	if (err)
		return err;
	err = vmm_track_check_map(&c->track, va);
	if (!err && !vmm_track_page_live(&c->track, page))
		err = -EBADF;
	if (!err)
		err = cuda_map_locked(c, va, page);
	if (!err)
		vmm_track_set_mapped(&c->track, va, true);
	leave(c);
	return err;
}

static int cuda_unmap(struct vmm_backend *b, uint64_t va)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = enter(c);
	if (err)
		return err;
	err = vmm_track_check_unmap(&c->track, va);
	if (!err)
		err = CUCHECK(c->api.p_cuMemUnmap(va, b->page_size),
			      "cuMemUnmap");
	if (!err)
		vmm_track_set_mapped(&c->track, va, false);
	leave(c);
	return err;
}

static const CUmemAccessDesc *access_desc(struct cuda_backend *c, int prot)
{
	if (prot == VMM_PROT_RW)
		return &c->access_rw;
	if (prot == VMM_PROT_READ)
		return &c->access_ro;
	return &c->access_none;
}

static int cuda_set_access(struct vmm_backend *b, uint64_t va, size_t size,
			   int prot)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = enter(c);
	if (err)
		return err;
	err = vmm_track_check_access(&c->track, va, size, prot);
	if (!err)
		err = CUCHECK(c->api.p_cuMemSetAccess(va, size,
						      access_desc(c, prot), 1),
			      "cuMemSetAccess");
	leave(c);
	return err;
}

/* Map page at the scratch range, run one copy, unmap; under the lock. */
static int cuda_scratch_copy(struct cuda_backend *c, vmm_handle_t page,
			     size_t offset, void *dst, const void *src,
			     size_t len)
{
	int err, err2;

	err = vmm_track_check_copy(&c->track, page, offset, len);
	if (err || len == 0)
		return err;
	err = cuda_map_locked(c, c->scratch, page);
	if (err)
		return err;
	err = CUCHECK(c->api.p_cuMemSetAccess(c->scratch, c->base.page_size,
					      &c->access_rw, 1),
		      "cuMemSetAccess");
	if (err)
		goto err_unmap;
	if (dst)
		err = CUCHECK(c->api.p_cuMemcpyDtoH(dst, c->scratch + offset,
						    len),
			      "cuMemcpyDtoH");
	else
		err = CUCHECK(c->api.p_cuMemcpyHtoD(c->scratch + offset, src,
						    len),
			      "cuMemcpyHtoD");
err_unmap:
	err2 = CUCHECK(c->api.p_cuMemUnmap(c->scratch, c->base.page_size),
		       "cuMemUnmap");
	return err ? err : err2;
}

static int cuda_copy_to_host(struct vmm_backend *b, void *dst,
			     vmm_handle_t page, size_t offset, size_t len)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = enter(c);
	if (err)
		return err;
	err = cuda_scratch_copy(c, page, offset, dst, NULL, len);
	leave(c);
	return err;
}

static int cuda_copy_from_host(struct vmm_backend *b, vmm_handle_t page,
			       size_t offset, const void *src, size_t len)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = enter(c);
	if (err)
		return err;
	err = cuda_scratch_copy(c, page, offset, NULL, src, len);
	leave(c);
	return err;
}

/* Zero a page through the scratch range (synchronous: the page is handed
 * out as soon as this returns). */
static int cuda_page_zero(struct vmm_backend *b, vmm_handle_t page)
{
	struct cuda_backend *c = to_cuda(b);
	int err, err2;

	err = enter(c);
	if (err)
		return err;
	err = vmm_track_check_copy(&c->track, page, 0, b->page_size);
	if (err)
		goto out;
	err = cuda_map_locked(c, c->scratch, page);
	if (err)
		goto out;
	err = CUCHECK(c->api.p_cuMemSetAccess(c->scratch, b->page_size,
					      &c->access_rw, 1),
		      "cuMemSetAccess");
	/* a memset of device memory is asynchronous to the host: on the
	 * backend's stream, waited for before the page is unmapped and
	 * handed out (and ordered after the copies queued there) */
	if (!err)
		err = CUCHECK(c->api.p_cuMemsetD8Async(c->scratch, 0,
						       b->page_size, c->stream),
			      "cuMemsetD8Async");
	if (!err)
		err = CUCHECK(c->api.p_cuStreamSynchronize(c->stream),
			      "cuStreamSynchronize");
	err2 = CUCHECK(c->api.p_cuMemUnmap(c->scratch, b->page_size),
		       "cuMemUnmap");
	if (!err)
		err = err2;
out:
	leave(c);
	return err;
}

static int cuda_usage(struct vmm_backend *b, struct vmm_backend_usage *u)
{
	struct cuda_backend *c = to_cuda(b);

	pthread_mutex_lock(&c->lock);
	vmm_track_usage(&c->track, u);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static int cuda_copy_va_to_host_async(struct vmm_backend *b, void *dst,
				      uint64_t va, size_t len)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = enter(c);
	if (err)
		return err;
	err = vmm_track_check_span(&c->track, va, len, VMM_PROT_READ);
	if (!err && len)
		err = CUCHECK(c->api.p_cuMemcpyDtoHAsync(dst, va, len,
							 c->stream),
			      "cuMemcpyDtoHAsync");
	leave(c);
	return err;
}

static int cuda_copy_host_to_va_async(struct vmm_backend *b, uint64_t va,
				      const void *src, size_t len)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = enter(c);
	if (err)
		return err;
	err = vmm_track_check_span(&c->track, va, len, VMM_PROT_RW);
	if (!err && len)
		err = CUCHECK(c->api.p_cuMemcpyHtoDAsync(va, src, len,
							 c->stream),
			      "cuMemcpyHtoDAsync");
	leave(c);
	return err;
}

/* Tries at entering the context before synchronize gives up waiting. */
#define CUDA_SYNC_ENTER_TRIES 5

static int cuda_synchronize(struct vmm_backend *b)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	/*
	 * Not under the lock: a long wait must not block other calls.
	 * Returning without waiting would let the caller reuse memory that
	 * queued copies may still write (a host slot, a pool page), so a
	 * context that cannot be entered is tried again; if it never can,
	 * -EINPROGRESS says the copies may still be in flight.
	 */
	for (int i = 0;; i++) {
		err = ctx_enter(c);
		if (!err)
			break;
		if (i + 1 == CUDA_SYNC_ENTER_TRIES) {
			vmm_log(VMM_LOG_ERR,
				"vmm cuda: synchronize: cannot enter the context (%s) after %d tries: copies may still be in flight",
				strerror(-err), i + 1);
			return -EINPROGRESS;
		}
		usleep(1000u << i);
	}
	err = CUCHECK(c->api.p_cuStreamSynchronize(c->stream),
		      "cuStreamSynchronize");
	ctx_leave(c);
	return err;
}

static int cuda_host_register(struct vmm_backend *b, void *ptr, size_t len)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	if (!ptr || !len)
		return -EINVAL;
	err = ctx_enter(c);
	if (err)
		return err;
	err = CUCHECK(c->api.p_cuMemHostRegister(ptr, len,
						 CU_MEMHOSTREGISTER_PORTABLE),
		      "cuMemHostRegister");
	ctx_leave(c);
	return err;
}

static int cuda_host_unregister(struct vmm_backend *b, void *ptr)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = ctx_enter(c);
	if (err)
		return err;
	err = CUCHECK(c->api.p_cuMemHostUnregister(ptr), "cuMemHostUnregister");
	ctx_leave(c);
	return err;
}

/* Undo whatever vmm_cuda_open got as far as; fields not set are zero. */
static void cuda_teardown(struct cuda_backend *c)
{
	struct vmm_backend_usage u;

	if (c->ctx && !ctx_enter(c)) {
		if (c->scratch)
			CUCHECK(c->api.p_cuMemAddressFree(c->scratch,
							  c->base.page_size),
				"cuMemAddressFree");
		if (c->stream)
			CUCHECK(c->api.p_cuStreamDestroy(c->stream),
				"cuStreamDestroy");
		ctx_leave(c);
	}
	if (c->ctx)
		CUCHECK(c->api.p_cuDevicePrimaryCtxRelease(c->dev),
			"cuDevicePrimaryCtxRelease");
	vmm_track_usage(&c->track, &u);
	if (u.pages || u.ranges || u.mappings)
		vmm_log(VMM_LOG_WARN,
			"vmm cuda: closing with %llu pages, %llu ranges, %llu mappings still held",
			(unsigned long long)u.pages,
			(unsigned long long)u.ranges,
			(unsigned long long)u.mappings);
	vmm_track_fini(&c->track);
	pthread_mutex_destroy(&c->lock);
	/* libcuda stays loaded: unloading a driver library under threads it
	 * started is not safe, and the process reuses it on the next open. */
	free(c);
}

static void cuda_destroy(struct vmm_backend *b)
{
	cuda_teardown(to_cuda(b));
}

static const struct vmm_ops cuda_ops = {
	.name = "cuda",
	.granularity = cuda_granularity,
	.reserve = cuda_reserve,
	.free_range = cuda_free_range,
	.page_create = cuda_page_create,
	.page_release = cuda_page_release,
	.page_export = cuda_page_export,
	.page_import = cuda_page_import,
	.map = cuda_map,
	.unmap = cuda_unmap,
	.set_access = cuda_set_access,
	.copy_to_host = cuda_copy_to_host,
	.copy_from_host = cuda_copy_from_host,
	.destroy = cuda_destroy,
	.usage = cuda_usage,
	.copy_va_to_host_async = cuda_copy_va_to_host_async,
	.copy_host_to_va_async = cuda_copy_host_to_va_async,
	.synchronize = cuda_synchronize,
	.host_register = cuda_host_register,
	.host_unregister = cuda_host_unregister,
	.page_zero = cuda_page_zero,
};

typedef CUresult (*get_proc_v2_fn)(const char *, void **, int, cuuint64_t,
				   CUdriverProcAddressQueryResult *);
typedef CUresult (*get_proc_v1_fn)(const char *, void **, int, cuuint64_t);

static int load_api(struct cuda_api *api, const char *path, char *why,
		    size_t why_len)
{
	get_proc_v2_fn get_v2;
	get_proc_v1_fn get_v1 = NULL;
	void *sym;

	dlerror();
	api->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!api->dl) {
		snprintf(why, why_len, "cannot load %s: %s", path, dlerror());
		return -ENODEV;
	}
	sym = dlsym(api->dl, "cuGetProcAddress_v2");
	memcpy(&get_v2, &sym, sizeof(sym));
	if (!get_v2) {
		sym = dlsym(api->dl, "cuGetProcAddress");
		memcpy(&get_v1, &sym, sizeof(sym));
	}
	if (!get_v2 && !get_v1) {
		snprintf(
			why, why_len,
			"%s has no cuGetProcAddress (driver older than CUDA 11.3)",
			path);
		goto err_close;
	}
#define LOOKUP(name)                                                           \
	{                                                                      \
		void *fn = NULL;                                               \
		CUdriverProcAddressQueryResult st =                            \
			CU_GET_PROC_ADDRESS_SUCCESS;                           \
		CUresult r =                                                   \
			get_v2 ? get_v2(#name, &fn, KVMM_CUDA_API_VERSION,     \
					CU_GET_PROC_ADDRESS_DEFAULT, &st) :    \
				 get_v1(#name, &fn, KVMM_CUDA_API_VERSION,     \
					CU_GET_PROC_ADDRESS_DEFAULT);          \
		if (r != CUDA_SUCCESS || !fn ||                                \
		    st != CU_GET_PROC_ADDRESS_SUCCESS) {                       \
			r = r ? r : CUDA_ERROR_NOT_FOUND;                      \
			vmm_cuda_result_to_errno_level(                        \
				(int)r, "cuGetProcAddress(" #name ")",         \
				VMM_LOG_DEBUG);                                \
			snprintf(why, why_len,                                 \
				 "%s: cuGetProcAddress(%s): CUresult %d (%s)", \
				 path, #name, (int)r,                          \
				 vmm_cuda_result_name((int)r));                \
			goto err_close;                                        \
		}                                                              \
		memcpy(&api->p_##name, &fn, sizeof(fn));                       \
	}
	CUDA_FUNCS(LOOKUP)
#undef LOOKUP
	return 0;

err_close:
	dlclose(api->dl);
	memset(api, 0, sizeof(*api));
	return -ENODEV;
}

static void format_uuid(const CUuuid *u, char *buf, size_t len)
{
	const unsigned char *b = (const unsigned char *)u->bytes;

	snprintf(
		buf, len,
		"GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* The device cfg names, by UUID ("GPU-..." or without the prefix) or by
 * ordinal. */
static int pick_device(struct cuda_backend *c, const struct vmm_config *cfg,
		       char *uuid, size_t uuid_len, char *why, size_t why_len)
{
	const char *want = cfg->gpu_uuid;
	int count = 0, err;

	CUresult r = c->api.p_cuDeviceGetCount(&count);

	err = vmm_cuda_result_to_errno_level((int)r, "cuDeviceGetCount",
					     VMM_LOG_DEBUG);
	if (err || count <= 0) {
		snprintf(why, why_len, "no CUDA device (CUresult %d, %s)",
			 (int)r, vmm_cuda_result_name((int)r));
		return -ENODEV;
	}
	if (!strncasecmp(want, "GPU-", 4))
		want += 4;
	for (int i = 0; i < count; i++) {
		CUdevice dev;
		CUuuid u;

		if (!want[0] && i != cfg->cuda_device)
			continue;
		if (CUCHECK(c->api.p_cuDeviceGet(&dev, i), "cuDeviceGet") ||
		    CUCHECK(c->api.p_cuDeviceGetUuid(&u, dev),
			    "cuDeviceGetUuid"))
			continue;
		format_uuid(&u, uuid, uuid_len);
		if (want[0] && strcasecmp(uuid + 4, want))
			continue;
		c->dev = dev;
		memcpy(c->base.gpu_uuid, u.bytes, sizeof(c->base.gpu_uuid));
		return 0;
	}
	if (want[0])
		snprintf(why, why_len, "no device with UUID %s among %d",
			 cfg->gpu_uuid, count);
	else
		snprintf(why, why_len,
			 "device ordinal %d out of range (%d devices)",
			 cfg->cuda_device, count);
	return -ENODEV;
}

int vmm_cuda_open_why(const struct vmm_config *cfg, struct vmm_backend **out,
		      char *why, size_t why_len)
{
	struct vmm_config def = { .kind = VMM_BACKEND_CUDA };
	const char *path;
	struct cuda_backend *c;
	char name[72] = "", uuid[48] = "";
	size_t gran = 0;
	bool bad_size = false;
	int err;

	if (!out)
		return -EINVAL;
	if (!cfg)
		cfg = &def;
	path = cfg->libcuda_path ? cfg->libcuda_path : "libcuda.so.1";
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	err = load_api(&c->api, path, why, why_len);
	if (err)
		goto err_free;
	error_name_pfn = c->api.p_cuGetErrorName;
	vmm_cuda_error_name = error_name_wrapper;

	{
		CUresult r = c->api.p_cuInit(0);

		if (vmm_cuda_result_to_errno_level((int)r, "cuInit",
						   VMM_LOG_DEBUG)) {
			snprintf(why, why_len, "cuInit in %s: CUresult %d (%s)",
				 path, (int)r, vmm_cuda_result_name((int)r));
			err = -ENODEV;
			goto err_free;
		}
	}
	err = pick_device(c, cfg, uuid, sizeof(uuid), why, why_len);
	if (err)
		goto err_free;
	CUCHECK(c->api.p_cuDeviceGetName(name, sizeof(name), c->dev),
		"cuDeviceGetName");
	/* only where the host tier's slab goes depends on it: a failure
	 * leaves it empty (the CPU's node) */
	if (vmm_cuda_result_to_errno_level((int)c->api.p_cuDeviceGetPCIBusId(
						   c->base.pci_bus_id,
						   sizeof(c->base.pci_bus_id),
						   c->dev),
					   "cuDeviceGetPCIBusId", VMM_LOG_WARN))
		c->base.pci_bus_id[0] = '\0';
	err = CUCHECK(c->api.p_cuDevicePrimaryCtxRetain(&c->ctx, c->dev),
		      "cuDevicePrimaryCtxRetain");
	if (err)
		goto err_free;

	c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	c->prop.location.id = c->dev;
	c->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	c->access_rw.location = c->prop.location;
	c->access_rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	c->access_ro.location = c->prop.location;
	c->access_ro.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
	c->access_none.location = c->prop.location;
	c->access_none.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;

	err = ctx_enter(c);
	if (err)
		goto err_teardown;
	err = CUCHECK(c->api.p_cuMemGetAllocationGranularity(
			      &gran, &c->prop,
			      CU_MEM_ALLOC_GRANULARITY_MINIMUM),
		      "cuMemGetAllocationGranularity");
	if (!err && (gran == 0 || (cfg->page_size && cfg->page_size % gran))) {
		snprintf(
			why, why_len,
			"page size %zu is not a multiple of the granularity %zu",
			cfg->page_size, gran);
		err = -EINVAL;
		bad_size = true;
	} else if (!err && (cfg->page_size & (cfg->page_size - 1))) {
		/* Every reservation is aligned to the page size (the
		 * tracking checks addresses against it), and
		 * cuMemAddressReserve takes only a power of two. */
		snprintf(
			why, why_len,
			"page size %zu is not a power of two (the GPU aligns reservations to powers of two only)",
			cfg->page_size);
		err = -EINVAL;
		bad_size = true;
	}
	if (bad_size) {
		vmm_log(VMM_LOG_ERR, "vmm cuda: %s", why);
		ctx_leave(c);
		goto err_teardown_why;
	}
	if (!err) {
		c->base.page_size = cfg->page_size ? cfg->page_size : gran;
		err = CUCHECK(c->api.p_cuStreamCreate(&c->stream,
						      CU_STREAM_NON_BLOCKING),
			      "cuStreamCreate");
	}
	if (!err)
		err = CUCHECK(c->api.p_cuMemAddressReserve(
				      &c->scratch, c->base.page_size,
				      c->base.page_size, 0, 0),
			      "cuMemAddressReserve");
	ctx_leave(c);
	if (err)
		goto err_teardown;

	c->base.ops = &cuda_ops;
	c->base.kind = VMM_BACKEND_CUDA;
	c->base.priv = c;
	snprintf(c->base.device_name, sizeof(c->base.device_name), "%s %s",
		 name, uuid);
	vmm_track_init(&c->track, c->base.page_size);
	{
		int drv = 0;

		c->api.p_cuDriverGetVersion(&drv);
		vmm_log(VMM_LOG_INFO,
			"vmm cuda: %s, driver API %d.%d, page %zu bytes",
			c->base.device_name, drv / 1000, drv % 1000 / 10,
			c->base.page_size);
	}
	*out = &c->base;
	return 0;

err_teardown:
	snprintf(why, why_len, "device setup failed: %s", strerror(-err));
err_teardown_why:
	cuda_teardown(c);
	return err;
err_free:
	pthread_mutex_destroy(&c->lock);
	free(c);
	return err;
}

#else /* !HAVE_CUDA_H */

int vmm_cuda_open_why(const struct vmm_config *cfg, struct vmm_backend **out,
		      char *why, size_t why_len)
{
	snprintf(why, why_len, "built without cuda.h");
	return -ENOTSUP;
}

#endif

int vmm_cuda_open(const struct vmm_config *cfg, struct vmm_backend **out)
{
	char why[256] = "";
	int err = vmm_cuda_open_why(cfg, out, why, sizeof(why));

	if (err)
		vmm_log(VMM_LOG_INFO, "vmm cuda: unavailable: %s", why);
	return err;
}
