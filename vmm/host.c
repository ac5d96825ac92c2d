/* SPDX-License-Identifier: MIT */
/*
 * Host backend: the same page/range/mapping model as CUDA VMM, built from
 * memfds and mmap so everything above vmm/ runs and is tested without a
 * GPU.
 *
 *   reserve      mmap(PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE)
 *   page_create  one memfd per page, sized, then sealed against shrink and
 *                grow: the fd is what a client gets, and a client that could
 *                ftruncate it would SIGBUS every other mapper
 *   export       fcntl(F_DUPFD_CLOEXEC); import checks the fd is a sealed
 *                memfd of exactly one page, then dups it
 *   page_fd      the memfd itself: a dup would share its open file anyway,
 *                so the pool sends this one and holds one fd per page, not
 *                two
 *   map          mmap(MAP_FIXED|MAP_SHARED, PROT_NONE) of the memfd over the
 *                slot; set_access (mprotect) opens it, as cuMemSetAccess does
 *   unmap        mmap(MAP_FIXED, PROT_NONE, anonymous) over the slot, so the
 *                address stays reserved and the page's reference goes
 *   copies       pread/pwrite on the memfd: no mapping needed
 *
 * A page handle is the memfd number.  The handle set and the range bitmaps
 * (vmm/track.c) reject stale handles, misaligned or out-of-range addresses
 * and double unmaps before any syscall.  A mutex makes the backend safe to
 * share between threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/track.h"
#include "vmm/vmm.h"

#define HOST_DEFAULT_PAGE_SIZE (64 * 1024)
#define HOST_MIN_PAGE_SIZE 4096
#define HOST_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

struct host_backend {
	struct vmm_backend base;
	pthread_mutex_t lock; /* protects track */
	struct vmm_track track;
};

static struct host_backend *to_host(struct vmm_backend *b)
{
	return (struct host_backend *)b;
}

static int host_granularity(struct vmm_backend *b, size_t *page_size)
{
	*page_size = b->page_size;
	return 0;
}

static int host_reserve(struct vmm_backend *b, size_t size, uint64_t *va)
{
	struct host_backend *h = to_host(b);
	void *p;
	int err;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_reserve(&h->track, size);
	if (err)
		goto out;
	/* Over-reserve by one page so the start can be aligned to the page
	 * size, like cuMemAddressReserve's alignment. */
	p = mmap(NULL, size + b->page_size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: reserve %zu bytes: %s", size,
			strerror(errno));
		goto out;
	}
	{
		uintptr_t start = (uintptr_t)p;
		uintptr_t al = (start + b->page_size - 1) / b->page_size *
			       b->page_size;

		if (al > start)
			munmap(p, al - start);
		if (al + size < start + size + b->page_size)
			munmap((void *)(al + size),
			       start + size + b->page_size - (al + size));
		p = (void *)al;
	}
	err = vmm_track_add_range(&h->track, (uintptr_t)p, size);
	if (err) {
		munmap(p, size);
		goto out;
	}
	*va = (uintptr_t)p;
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

static int host_free_range(struct vmm_backend *b, uint64_t va, size_t size)
{
	struct host_backend *h = to_host(b);
	int err;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_free_range(&h->track, va, size);
	if (err)
		goto out;
	if (munmap((void *)(uintptr_t)va, size)) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: munmap range: %s",
			strerror(errno));
		goto out;
	}
	vmm_track_remove_range(&h->track, va);
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

static int host_page_create(struct vmm_backend *b, vmm_handle_t *page)
{
	struct host_backend *h = to_host(b);
	int fd, err;

	fd = memfd_create("kvmm-page", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: memfd_create: %s",
			strerror(errno));
		return err;
	}
	if (ftruncate(fd, (off_t)b->page_size) ||
	    fcntl(fd, F_ADD_SEALS, HOST_SEALS)) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: size/seal page: %s",
			strerror(errno));
		goto err_close;
	}
	pthread_mutex_lock(&h->lock);
	err = vmm_track_add_page(&h->track, (vmm_handle_t)fd);
	pthread_mutex_unlock(&h->lock);
	if (err)
		goto err_close;
	*page = (vmm_handle_t)fd;
	return 0;

err_close:
	close(fd);
	return err;
}

static int host_page_release(struct vmm_backend *b, vmm_handle_t page)
{
	struct host_backend *h = to_host(b);
	int err = 0;

	pthread_mutex_lock(&h->lock);
	if (!vmm_track_page_live(&h->track, page)) {
		err = -EBADF;
		goto out;
	}
	vmm_track_remove_page(&h->track, page);
	close((int)page);
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

static int host_page_export(struct vmm_backend *b, vmm_handle_t page, int *fd)
{
	struct host_backend *h = to_host(b);
	int err = 0, nfd;

	pthread_mutex_lock(&h->lock);
	if (!vmm_track_page_live(&h->track, page)) {
		err = -EBADF;
		goto out;
	}
	nfd = fcntl((int)page, F_DUPFD_CLOEXEC, 0);
	if (nfd < 0) {
		err = -errno;
		goto out;
	}
	*fd = nfd;
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

/* The handle is the page's memfd: what an export would dup. */
static int host_page_fd(struct vmm_backend *b, vmm_handle_t page, int *fd)
{
	struct host_backend *h = to_host(b);
	int err = 0;

	pthread_mutex_lock(&h->lock);
	if (vmm_track_page_live(&h->track, page))
		*fd = (int)page;
	else
		err = -EBADF;
	pthread_mutex_unlock(&h->lock);
	return err;
}

/* Is fd one of our pages: a sealed memfd of exactly one page? */
static int host_check_page_fd(struct vmm_backend *b, int fd)
{
	struct stat st;
	int seals;

	if (fd < 0 || fstat(fd, &st))
		return -EBADF;
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size != b->page_size)
		return -EBADF;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
				 (F_SEAL_SHRINK | F_SEAL_GROW))
		return -EBADF;
	return 0;
}

static int host_page_import(struct vmm_backend *b, int fd, vmm_handle_t *page)
{
	struct host_backend *h = to_host(b);
	int nfd, err;

	err = host_check_page_fd(b, fd);
	if (err)
		return err;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (nfd < 0)
		return -errno;
	pthread_mutex_lock(&h->lock);
	err = vmm_track_add_page(&h->track, (vmm_handle_t)nfd);
	pthread_mutex_unlock(&h->lock);
	if (err) {
		close(nfd);
		return err;
	}
	*page = (vmm_handle_t)nfd;
	return 0;
}

static int host_map(struct vmm_backend *b, uint64_t va, vmm_handle_t page)
{
	struct host_backend *h = to_host(b);
	void *p;
	int err;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_map(&h->track, va);
	if (err)
		goto out;
	if (!vmm_track_page_live(&h->track, page)) {
		err = -EBADF;
		goto out;
	}
	p = mmap((void *)(uintptr_t)va, b->page_size, PROT_NONE,
		 MAP_SHARED | MAP_FIXED, (int)page, 0);
	if (p == MAP_FAILED) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: map page %d at %#llx: %s",
			(int)page, (unsigned long long)va, strerror(errno));
		goto out;
	}
	vmm_track_set_mapped(&h->track, va, true);
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

static int host_unmap(struct vmm_backend *b, uint64_t va)
{
	struct host_backend *h = to_host(b);
	void *p;
	int err;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_unmap(&h->track, va);
	if (err)
		goto out;
	p = mmap((void *)(uintptr_t)va, b->page_size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
		 0);
	if (p == MAP_FAILED) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: unmap at %#llx: %s",
			(unsigned long long)va, strerror(errno));
		goto out;
	}
	vmm_track_set_mapped(&h->track, va, false);
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

static int host_set_access(struct vmm_backend *b, uint64_t va, size_t size,
			   int prot)
{
	struct host_backend *h = to_host(b);
	int err, mprot = PROT_NONE;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_access(&h->track, va, size, prot);
	if (err)
		goto out;
	if (prot == VMM_PROT_READ)
		mprot = PROT_READ;
	else if (prot == VMM_PROT_RW)
		mprot = PROT_READ | PROT_WRITE;
	if (mprotect((void *)(uintptr_t)va, size, mprot)) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: mprotect %#llx+%zu: %s",
			(unsigned long long)va, size, strerror(errno));
	}
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

static int host_copy_to_host(struct vmm_backend *b, void *dst,
			     vmm_handle_t page, size_t offset, size_t len)
{
	struct host_backend *h = to_host(b);
	size_t done = 0;
	int err;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_copy(&h->track, page, offset, len);
	pthread_mutex_unlock(&h->lock);
	while (!err && done < len) {
		ssize_t r = pread((int)page, (char *)dst + done, len - done,
				  (off_t)(offset + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			err = r < 0 ? -errno : -EIO;
		else
			done += (size_t)r;
	}
	return err;
}

static int host_copy_from_host(struct vmm_backend *b, vmm_handle_t page,
			       size_t offset, const void *src, size_t len)
{
	struct host_backend *h = to_host(b);
	size_t done = 0;
	int err;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_copy(&h->track, page, offset, len);
	pthread_mutex_unlock(&h->lock);
	while (!err && done < len) {
		ssize_t r = pwrite((int)page, (const char *)src + done,
				   len - done, (off_t)(offset + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			err = r < 0 ? -errno : -EIO;
		else
			done += (size_t)r;
	}
	return err;
}

static int host_usage(struct vmm_backend *b, struct vmm_backend_usage *u)
{
	struct host_backend *h = to_host(b);

	pthread_mutex_lock(&h->lock);
	vmm_track_usage(&h->track, u);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

/* The async copies are plain memcpy here: the caller's mapping must allow
 * the access, exactly as a device copy would need it to. */
static int host_copy_va_to_host_async(struct vmm_backend *b, void *dst,
				      uint64_t va, size_t len)
{
	struct host_backend *h = to_host(b);
	int err = 0;

	if (len) {
		pthread_mutex_lock(&h->lock);
		err = vmm_track_check_access(
			&h->track, va / b->page_size * b->page_size,
			(va % b->page_size + len + b->page_size - 1) /
				b->page_size * b->page_size,
			VMM_PROT_READ);
		pthread_mutex_unlock(&h->lock);
	}
	if (!err)
		memcpy(dst, (const void *)(uintptr_t)va, len);
	return err;
}

static int host_copy_host_to_va_async(struct vmm_backend *b, uint64_t va,
				      const void *src, size_t len)
{
	struct host_backend *h = to_host(b);
	int err = 0;

	if (len) {
		pthread_mutex_lock(&h->lock);
		err = vmm_track_check_access(
			&h->track, va / b->page_size * b->page_size,
			(va % b->page_size + len + b->page_size - 1) /
				b->page_size * b->page_size,
			VMM_PROT_RW);
		pthread_mutex_unlock(&h->lock);
	}
	if (!err)
		memcpy((void *)(uintptr_t)va, src, len);
	return err;
}

static int host_synchronize(struct vmm_backend *b)
{
	return 0;
}

static int host_host_register(struct vmm_backend *b, void *ptr, size_t len)
{
	return ptr || !len ? 0 : -EINVAL;
}

static int host_host_unregister(struct vmm_backend *b, void *ptr)
{
	return 0;
}

static void host_destroy(struct vmm_backend *b)
{
	struct host_backend *h = to_host(b);
	struct vmm_backend_usage u;

	vmm_track_usage(&h->track, &u);
	if (u.pages || u.ranges || u.mappings)
		vmm_log(VMM_LOG_WARN,
			"vmm host: closing with %llu pages, %llu ranges, %llu mappings still held",
			(unsigned long long)u.pages,
			(unsigned long long)u.ranges,
			(unsigned long long)u.mappings);
	vmm_track_fini(&h->track);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static const struct vmm_ops host_ops = {
	.name = "host",
	.granularity = host_granularity,
	.reserve = host_reserve,
	.free_range = host_free_range,
	.page_create = host_page_create,
	.page_release = host_page_release,
	.page_export = host_page_export,
	.page_import = host_page_import,
	.map = host_map,
	.unmap = host_unmap,
	.set_access = host_set_access,
	.copy_to_host = host_copy_to_host,
	.copy_from_host = host_copy_from_host,
	.destroy = host_destroy,
	.page_fd = host_page_fd,
	.usage = host_usage,
	.copy_va_to_host_async = host_copy_va_to_host_async,
	.copy_host_to_va_async = host_copy_host_to_va_async,
	.synchronize = host_synchronize,
	.host_register = host_host_register,
	.host_unregister = host_host_unregister,
};

int vmm_host_open(const struct vmm_config *cfg, struct vmm_backend **out)
{
	size_t page_size = cfg && cfg->page_size ? cfg->page_size :
						   HOST_DEFAULT_PAGE_SIZE;
	struct host_backend *h;

	if (page_size % HOST_MIN_PAGE_SIZE) {
		vmm_log(VMM_LOG_ERR,
			"vmm host: page size %zu is not a multiple of 4 KiB",
			page_size);
		return -EINVAL;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->base.ops = &host_ops;
	h->base.kind = VMM_BACKEND_HOST;
	h->base.page_size = page_size;
	snprintf(h->base.device_name, sizeof(h->base.device_name), "host");
	h->base.priv = h;
	pthread_mutex_init(&h->lock, NULL);
	vmm_track_init(&h->track, page_size);
	*out = &h->base;
	return 0;
}
