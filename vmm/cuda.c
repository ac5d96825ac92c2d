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
 *   copies       the page is mapped into a private scratch range,
 *                copied with cuMemcpyDtoH/HtoD, and unmapped again; the
 *                async variants copy from a caller's mapping on the
 *                backend's own non-blocking stream; page_copy maps both
 *                pages into the scratch range (two pages of VA) and runs
 *                cuMemcpyDtoD
 *
 * The backend's life (libcuda loaded, the device picked, the backend
 * opened and torn down) is in vmm/cuda_open.c; struct cuda_backend and
 * the entry points it calls through, in vmm/cuda_backend.h.  Each
 * operation pushes the device's primary context and pops it afterwards,
 * so the calling thread's own context (an inference engine's) is left as
 * it was.  Arguments are validated by vmm/track.c exactly as on
 * the host backend; driver errors go through vmm_cuda_result_to_errno().
 * Nothing here exits: every failure returns -errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#if HAVE_CUDA_H
#include "vmm/cuda_backend.h"

static struct cuda_backend *to_cuda(struct vmm_backend *b)
{
	return (struct cuda_backend *)b;
}

int cuda_ctx_enter(struct cuda_backend *c)
{
	return CUCHECK(c->api.p_cuCtxPushCurrent(c->ctx), "cuCtxPushCurrent");
}

void cuda_ctx_leave(struct cuda_backend *c)
{
	CUcontext popped;

	CUCHECK(c->api.p_cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
}

/* Lock + push the context; on failure nothing is held. */
static int enter(struct cuda_backend *c)
{
	int err;

	pthread_mutex_lock(&c->lock);
	err = cuda_ctx_enter(c);
	if (err)
		pthread_mutex_unlock(&c->lock);
	return err;
}

static void leave(struct cuda_backend *c)
{
	cuda_ctx_leave(c);
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

/*
 * Page src into page dst on the device (kvmmd's SEQ_UNSHARE): src mapped
 * read-only at the scratch range, dst read-write one page after it,
 * cuMemcpyDtoD (synchronous to the host, and ordered after the work the
 * backend queued before), both unmapped again.  Never run on a GPU yet:
 * only against the mock libcuda (tests/vmm-cuda-mock.sh).
 */
static int cuda_page_copy(struct vmm_backend *b, vmm_handle_t dst,
			  vmm_handle_t src)
{
	struct cuda_backend *c = to_cuda(b);
	CUdeviceptr to = c->scratch + b->page_size;
	int err, err2 = 0;
	bool src_mapped = false, dst_mapped = false;

	if (dst == src)
		return -EINVAL;
	err = enter(c);
	if (err)
		return err;
	err = vmm_track_check_copy(&c->track, dst, 0, b->page_size);
	if (!err)
		err = vmm_track_check_copy(&c->track, src, 0, b->page_size);
	if (!err)
		err = cuda_map_locked(c, c->scratch, src);
	src_mapped = !err;
	if (!err)
		err = cuda_map_locked(c, to, dst);
	dst_mapped = src_mapped && !err;
	if (!err)
		err = CUCHECK(c->api.p_cuMemSetAccess(c->scratch, b->page_size,
						      &c->access_ro, 1),
			      "cuMemSetAccess");
	if (!err)
		err = CUCHECK(c->api.p_cuMemSetAccess(to, b->page_size,
						      &c->access_rw, 1),
			      "cuMemSetAccess");
	if (!err)
		err = CUCHECK(c->api.p_cuMemcpyDtoD(to, c->scratch,
						    b->page_size),
			      "cuMemcpyDtoD");
	if (dst_mapped)
		err2 = CUCHECK(c->api.p_cuMemUnmap(to, b->page_size),
			       "cuMemUnmap");
	if (src_mapped) {
		int err3 =
			CUCHECK(c->api.p_cuMemUnmap(c->scratch, b->page_size),
				"cuMemUnmap");

		err2 = err2 ? err2 : err3;
	}
	leave(c);
	return err ? err : err2;
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
		err = cuda_ctx_enter(c);
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
	cuda_ctx_leave(c);
	return err;
}

static int cuda_host_register(struct vmm_backend *b, void *ptr, size_t len)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	if (!ptr || !len)
		return -EINVAL;
	err = cuda_ctx_enter(c);
	if (err)
		return err;
	err = CUCHECK(c->api.p_cuMemHostRegister(ptr, len,
						 CU_MEMHOSTREGISTER_PORTABLE),
		      "cuMemHostRegister");
	cuda_ctx_leave(c);
	return err;
}

static int cuda_host_unregister(struct vmm_backend *b, void *ptr)
{
	struct cuda_backend *c = to_cuda(b);
	int err;

	err = cuda_ctx_enter(c);
	if (err)
		return err;
	err = CUCHECK(c->api.p_cuMemHostUnregister(ptr), "cuMemHostUnregister");
	cuda_ctx_leave(c);
	return err;
}

static void cuda_destroy(struct vmm_backend *b)
{
	vmm_cuda_teardown(to_cuda(b));
}

const struct vmm_ops vmm_cuda_ops = {
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
	.page_copy = cuda_page_copy,
};

#endif /* HAVE_CUDA_H */
