/* SPDX-License-Identifier: MIT */
/*
 * Host backend, the ops that touch a page through an address: map, unmap
 * and set_access on a reserved range, the copies between a page and host
 * memory (pread/pwrite on a created page's memfd, memcpy through an
 * imported page's anchor) and page_zero.  vmm/host.c, which opens the
 * backend, reserves ranges and creates, imports and releases the pages
 * these work on, explains the model; the two were one file until it
 * passed 800 lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vmm/host_priv.h"
#include "vmm/track.h"
#include "vmm/vmm.h"

int host_map(struct vmm_backend *b, uint64_t va, vmm_handle_t page)
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
	if (is_anchor(page))
		/* A second mapping of the anchor's pages, PROT_NONE as it is;
		 * MREMAP_FIXED replaces the reserved slot as MAP_FIXED does. */
		p = mremap(anchor_addr(page), 0, b->page_size,
			   MREMAP_MAYMOVE | MREMAP_FIXED,
			   (void *)(uintptr_t)va);
	else
		p = mmap((void *)(uintptr_t)va, b->page_size, PROT_NONE,
			 MAP_SHARED | MAP_FIXED, page_memfd(page), 0);
	if (p == MAP_FAILED) {
		err = -errno;
		host_map_err_log(-err, "map page %#llx at %#llx",
				 (unsigned long long)page,
				 (unsigned long long)va);
		goto out;
	}
	vmm_track_set_mapped(&h->track, va, true);
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

int host_unmap(struct vmm_backend *b, uint64_t va)
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
		host_map_err_log(-err, "unmap at %#llx",
				 (unsigned long long)va);
		goto out;
	}
	vmm_track_set_mapped(&h->track, va, false);
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

int host_set_access(struct vmm_backend *b, uint64_t va, size_t size, int prot)
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
		host_map_err_log(-err, "mprotect %#llx+%zu",
				 (unsigned long long)va, size);
	}
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

/*
 * Copy through an imported page's anchor (lock held): open it, copy, close
 * it again, so that the anchor faults at any other time and a concurrent
 * release cannot unmap it under the memcpy.
 */
static int anchor_copy(struct vmm_backend *b, vmm_handle_t page, void *dst,
		       const void *src, size_t len, int prot)
{
	void *a = anchor_addr(page);
	int err = 0;

	if (!len)
		return 0;
	if (mprotect(a, b->page_size, prot)) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: open anchor %p: %s", a,
			strerror(errno));
		return err;
	}
	memcpy(dst, src, len);
	if (mprotect(a, b->page_size, PROT_NONE)) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: close anchor %p: %s", a,
			strerror(errno));
	}
	return err;
}

/*
 * Copy between a page and host memory: through the anchor for an imported
 * page, with pread/pwrite on the memfd for a created one.  Both under the
 * lock: a release must not unmap the anchor, or close the memfd and let
 * the next page created take its number, between the handle check and
 * the copy.  With write, buf is only read.
 */
static int page_rw(struct vmm_backend *b, vmm_handle_t page, size_t offset,
		   void *buf, size_t len, bool write)
{
	struct host_backend *h = to_host(b);
	char *at, *p = buf;
	size_t done = 0;
	int err;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_copy(&h->track, page, offset, len);
	if (!err && is_anchor(page)) {
		at = (char *)anchor_addr(page) + offset;
		err = write ? anchor_copy(b, page, at, buf, len,
					  PROT_READ | PROT_WRITE) :
			      anchor_copy(b, page, buf, at, len, PROT_READ);
		pthread_mutex_unlock(&h->lock);
		return err;
	}
	while (!err && done < len) {
		int fd = page_memfd(page);
		off_t off = (off_t)(offset + done);
		ssize_t r = write ? pwrite(fd, p + done, len - done, off) :
				    pread(fd, p + done, len - done, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			err = r < 0 ? -errno : -EIO;
		else
			done += (size_t)r;
	}
	pthread_mutex_unlock(&h->lock);
	return err;
}

int host_copy_to_host(struct vmm_backend *b, void *dst, vmm_handle_t page,
		      size_t offset, size_t len)
{
	return page_rw(b, page, offset, dst, len, false);
}

int host_copy_from_host(struct vmm_backend *b, vmm_handle_t page, size_t offset,
			const void *src, size_t len)
{
	return page_rw(b, page, offset, (void *)src, len, true);
}

/*
 * One created page's bytes into another, in the kernel (copy_file_range
 * between the two memfds: no bounce through this process); an imported
 * page, or a kernel that cannot (ENOSYS, EXDEV, EINVAL, EOPNOTSUPP before
 * any byte moved), is -EOPNOTSUPP and vmm_page_copy() bounces through
 * copy_to_host / copy_from_host.  Under the lock, as the other copies.
 */
int host_page_copy(struct vmm_backend *b, vmm_handle_t dst, vmm_handle_t src)
{
	struct host_backend *h = to_host(b);
	size_t done = 0;
	int err;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_copy(&h->track, dst, 0, b->page_size);
	if (!err)
		err = vmm_track_check_copy(&h->track, src, 0, b->page_size);
	if (!err && (dst == src || is_anchor(dst) || is_anchor(src)))
		err = dst == src ? -EINVAL : -EOPNOTSUPP;
	while (!err && done < b->page_size) {
		off64_t in = (off64_t)done, out = (off64_t)done;
		ssize_t r = copy_file_range(page_memfd(src), &in,
					    page_memfd(dst), &out,
					    b->page_size - done, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && !done &&
		    (errno == ENOSYS || errno == EXDEV || errno == EINVAL ||
		     errno == EOPNOTSUPP))
			err = -EOPNOTSUPP;
		else if (r <= 0)
			err = r < 0 ? -errno : -EIO;
		else
			done += (size_t)r;
	}
	pthread_mutex_unlock(&h->lock);
	return err;
}

/*
 * A created page gives its memory back to the kernel (a hole punched over
 * the whole memfd: later reads see zeros, and the next writer faults fresh
 * zeroed memory in), which costs no copy on the loop.  An imported page
 * has no fd here, and a filesystem may not punch holes: -EOPNOTSUPP, and
 * the pool writes the zeros through copy_from_host (pool.c scrub()).
 */
int host_page_zero(struct vmm_backend *b, vmm_handle_t page)
{
	struct host_backend *h = to_host(b);
	int err;

	/* under the lock, as a copy: a release must not close the memfd and
	 * let the next page created take its number meanwhile */
	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_copy(&h->track, page, 0, b->page_size);
	if (!err && is_anchor(page))
		err = -EOPNOTSUPP;
	else if (!err && fallocate(page_memfd(page),
				   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				   0, (off_t)b->page_size))
		err = -errno;
	pthread_mutex_unlock(&h->lock);
	return err;
}

/* Whether [va, va + len) lies in mapped pages that allow prot (the
 * whole pages it touches). */
static int check_va_span(struct host_backend *h, uint64_t va, size_t len,
			 int prot)
{
	int err;

	pthread_mutex_lock(&h->lock);
	err = vmm_track_check_span(&h->track, va, len, prot);
	pthread_mutex_unlock(&h->lock);
	return err;
}

/* The async copies are plain memcpy here: the caller's mapping must allow
 * the access, exactly as a device copy would need it to. */
int host_copy_va_to_host_async(struct vmm_backend *b, void *dst, uint64_t va,
			       size_t len)
{
	int err = check_va_span(to_host(b), va, len, VMM_PROT_READ);

	if (!err)
		memcpy(dst, (const void *)(uintptr_t)va, len);
	return err;
}

int host_copy_host_to_va_async(struct vmm_backend *b, uint64_t va,
			       const void *src, size_t len)
{
	int err = check_va_span(to_host(b), va, len, VMM_PROT_RW);

	if (!err)
		memcpy((void *)(uintptr_t)va, src, len);
	return err;
}
