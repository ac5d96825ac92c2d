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
 *   export       fcntl(F_DUPFD_CLOEXEC) of a created page; -EOPNOTSUPP for
 *                an imported one (it has no fd left; nothing re-exports)
 *   page_fd      the memfd itself: a dup would share its open file anyway,
 *                so the pool sends this one and holds one fd per page, not
 *                two (-EOPNOTSUPP for an imported page)
 *   page_fd_readonly
 *                open("/proc/self/fd/N", O_RDONLY) of the memfd: a new
 *                open file description without write access, so neither
 *                a MAP_SHARED PROT_WRITE mapping of it nor an mprotect to
 *                write of such a mapping is allowed (EACCES).  A receiver
 *                could reopen it read-write through its own /proc/self/fd
 *                but for the memfd's mode, 0400 from page_create on: only
 *                kvmmd's uid (and root) may open it again, and that for
 *                reading.  The pool keeps it while the page is allocated
 *                (vmm/pool.c: "Readers")
 *   import       checks the fd is a sealed memfd of exactly one page, maps
 *                it once MAP_SHARED, PROT_NONE wherever the kernel likes
 *                (never inside a reservation: those are mapped already):
 *                the page's "anchor".  The fd is not kept, so a client
 *                holds no fd per page, as with cuda, where the handle is
 *                not an fd either; the anchor is one VMA instead
 *                (vm.max_map_count, 65530 by default, counts VMAs: an
 *                imported page costs 1 plus 1 per mapping, against 1 fd
 *                plus 1 per mapping before).  Where mremap cannot
 *                duplicate a mapping (valgrind), an import keeps a dup of
 *                the fd instead and is a created page from then on
 *   map          created page: mmap(MAP_FIXED|MAP_SHARED, PROT_NONE) of the
 *                memfd over the slot; imported page: mremap(anchor, 0,
 *                page size, MREMAP_MAYMOVE|MREMAP_FIXED, slot), which with
 *                an old size of 0 duplicates a shared mapping (mremap(2)),
 *                PROT_NONE like its anchor.  set_access (mprotect) opens
 *                it, as cuMemSetAccess does
 *   unmap        mmap(MAP_FIXED, PROT_NONE, anonymous) over the slot, so the
 *                address stays reserved and the page's reference goes
 *   release      close(memfd), or munmap(anchor); mappings keep the page
 *   ENOMEM       from mmap, mremap or mprotect is also what the kernel says
 *                at vm.max_map_count; callers get -ENOMEM either way, and
 *                the log line says which (map_count_log, failure path only)
 *   copies       created page: pread/pwrite on the memfd, no mapping
 *                needed; imported page: memcpy through the anchor, opened
 *                by mprotect for the copy and closed again, under the lock
 *                (rare: libkvmm never copies, kvmmd copies its own pages);
 *                page to page (page_copy): copy_file_range between the
 *                memfds, in host_map.c
 *
 * A page handle is generation << 32 | memfd number (0..INT_MAX) for a
 * created page, and HOST_ANCHOR_TAG | generation | anchor address / 4096
 * for an imported one: bit 63 keeps the two kinds apart, and each
 * generation (31 bits counted per creation, 18 per import) keeps a stale
 * handle from naming a later page that got the same memfd number, or a
 * later anchor the kernel put at the same address.  The handle set and the range bitmaps
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

#include "vmm/host_priv.h"
#include "vmm/track.h"
#include "vmm/vmm.h"

#define HOST_DEFAULT_PAGE_SIZE (64 * 1024)
#define HOST_MIN_PAGE_SIZE 4096
#define HOST_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

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
		host_map_err_log(-err, "reserve %zu bytes", size);
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
	vmm_handle_t handle;
	int fd, err;

	fd = memfd_create("kvmm-page", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: memfd_create: %s",
			strerror(errno));
		return err;
	}
	/* 0400: a process given a read-only fd of the page
	 * (page_fd_readonly) cannot reopen it writable through its
	 * /proc/self/fd unless it is the memfd's owner or root */
	if (ftruncate(fd, (off_t)b->page_size) ||
	    fcntl(fd, F_ADD_SEALS, HOST_SEALS) || fchmod(fd, S_IRUSR)) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: size/seal page: %s",
			strerror(errno));
		goto err_close;
	}
	pthread_mutex_lock(&h->lock);
	handle = (h->memfd_gen++ & HOST_MEMFD_GEN_MASK) << HOST_MEMFD_SHIFT |
		 (vmm_handle_t)fd;
	err = vmm_track_add_page(&h->track, handle);
	pthread_mutex_unlock(&h->lock);
	if (err)
		goto err_close;
	*page = handle;
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
	if (is_anchor(page) && munmap(anchor_addr(page), b->page_size)) {
		err = -errno;
		vmm_log(VMM_LOG_ERR, "vmm host: unmap anchor %p: %s",
			anchor_addr(page), strerror(errno));
		goto out;
	}
	vmm_track_remove_page(&h->track, page);
	if (!is_anchor(page))
		close(page_memfd(page));
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
	if (is_anchor(page)) {
		/* No fd is kept for an imported page. */
		err = -EOPNOTSUPP;
		goto out;
	}
	nfd = fcntl(page_memfd(page), F_DUPFD_CLOEXEC, 0);
	if (nfd < 0) {
		err = -errno;
		goto out;
	}
	*fd = nfd;
out:
	pthread_mutex_unlock(&h->lock);
	return err;
}

/* A created page's handle is its memfd: what an export would dup.  An
 * imported page has none. */
static int host_page_fd(struct vmm_backend *b, vmm_handle_t page, int *fd)
{
	struct host_backend *h = to_host(b);
	int err = 0;

	pthread_mutex_lock(&h->lock);
	if (!vmm_track_page_live(&h->track, page))
		err = -EBADF;
	else if (is_anchor(page))
		err = -EOPNOTSUPP;
	else
		*fd = page_memfd(page);
	pthread_mutex_unlock(&h->lock);
	return err;
}

/*
 * A new read-only open file description of the memfd behind fd, opened
 * through /proc/self/fd: 4-9 us, most of what handing a page to a reader
 * read-only used to cost, so the pool opens it once and keeps it while
 * the page is allocated (vmm_pool_page_fd_readonly()).  (An fd of that
 * directory kept for openat() saved 0.9 of 4.2 us an open and close here,
 * but it is one more fd held for good, which kvmmd's fd accounting and
 * its tests count.)
 */
static int reopen_readonly(int fd)
{
	char path[32];
	int nfd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, O_RDONLY | O_CLOEXEC);
	return nfd < 0 ? -errno : nfd;
}

static int host_page_fd_readonly(struct vmm_backend *b, vmm_handle_t page,
				 int *fd)
{
	struct host_backend *h = to_host(b);
	int err = 0, nfd;

	/* under the lock: a concurrent release must not close the memfd,
	 * and another page take its number, before it is reopened */
	pthread_mutex_lock(&h->lock);
	if (h->no_readonly_fd) {
		err = -EOPNOTSUPP;
	} else if (!vmm_track_page_live(&h->track, page)) {
		err = -EBADF;
	} else if (is_anchor(page)) {
		err = -EOPNOTSUPP;
	} else {
		nfd = reopen_readonly(page_memfd(page));
		if (nfd == -ENOENT) {
			/* no /proc: nothing to reopen through, for good (the
			 * memfd is ours and open: not the fd that is gone) */
			h->no_readonly_fd = true;
			vmm_log(VMM_LOG_WARN,
				"vmm host: cannot open /proc/self/fd/%d (%s): pages go read-write, also to processes that may only read them",
				page_memfd(page), strerror(-nfd));
			err = -EOPNOTSUPP;
		} else if (nfd < 0) {
			err = nfd;
		} else {
			*fd = nfd;
		}
	}
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

/*
 * Whether mremap() with an old size of 0 duplicates a shared mapping, which
 * an anchor's map needs.  Linux's does; valgrind's memcheck, which
 * emulates mremap, answers EINVAL, so a client under it failed its first
 * map.  Where it cannot, imports keep their fd (one fd per imported page,
 * as before anchors).  A probe that cannot even start says yes: then the
 * map itself reports what is wrong.
 */
static bool mremap_dup_works(void)
{
	size_t len = HOST_MIN_PAGE_SIZE;
	bool ok = true;
	void *a, *dup;
	int fd;

	fd = memfd_create("kvmm-mremap-probe", MFD_CLOEXEC);
	if (fd < 0)
		return true;
	if (ftruncate(fd, (off_t)len))
		goto out_close;
	a = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
	if (a == MAP_FAILED)
		goto out_close;
	dup = mremap(a, 0, len, MREMAP_MAYMOVE);
	if (dup == MAP_FAILED)
		ok = errno != EINVAL;
	else
		munmap(dup, len);
	munmap(a, len);
out_close:
	close(fd);
	return ok;
}

/* Import without an anchor: a dup of the fd, handled as a created page's
 * memfd from then on (mapped with mmap, copied with pread/pwrite). */
static int import_keep_fd(struct host_backend *h, int fd, vmm_handle_t *page)
{
	vmm_handle_t handle;
	int nfd, err;

	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (nfd < 0)
		return -errno;
	pthread_mutex_lock(&h->lock);
	handle = (h->memfd_gen++ & HOST_MEMFD_GEN_MASK) << HOST_MEMFD_SHIFT |
		 (vmm_handle_t)nfd;
	err = vmm_track_add_page(&h->track, handle);
	pthread_mutex_unlock(&h->lock);
	if (err) {
		close(nfd);
		return err;
	}
	*page = handle;
	return 0;
}

static int host_page_import(struct vmm_backend *b, int fd, vmm_handle_t *page)
{
	struct host_backend *h = to_host(b);
	vmm_handle_t handle;
	void *p;
	int err;

	err = host_check_page_fd(b, fd);
	if (err)
		return err;
	if (h->import_keeps_fd)
		return import_keep_fd(h, fd, page);
	p = mmap(NULL, b->page_size, PROT_NONE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		err = -errno;
		host_map_err_log(-err, "import fd %d (map its anchor)", fd);
		return err;
	}
	if ((uint64_t)(uintptr_t)p >>
	    (HOST_ANCHOR_SHIFT + HOST_ANCHOR_ADDR_BITS)) {
		vmm_log(VMM_LOG_ERR,
			"vmm host: anchor %p above 2^57 has no handle", p);
		munmap(p, b->page_size);
		return -EOVERFLOW;
	}
	pthread_mutex_lock(&h->lock);
	handle = HOST_ANCHOR_TAG |
		 (h->anchor_gen++ & HOST_ANCHOR_GEN_MASK)
			 << HOST_ANCHOR_ADDR_BITS |
		 (uintptr_t)p >> HOST_ANCHOR_SHIFT;
	err = vmm_track_add_page(&h->track, handle);
	pthread_mutex_unlock(&h->lock);
	if (err) {
		munmap(p, b->page_size);
		return err;
	}
	*page = handle;
	return 0;
}

static int host_usage(struct vmm_backend *b, struct vmm_backend_usage *u)
{
	struct host_backend *h = to_host(b);

	pthread_mutex_lock(&h->lock);
	vmm_track_usage(&h->track, u);
	pthread_mutex_unlock(&h->lock);
	return 0;
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
	.page_zero = host_page_zero,
	.page_fd_readonly = host_page_fd_readonly,
	.page_copy = host_page_copy,
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
	h->import_keeps_fd = !mremap_dup_works();
	if (h->import_keeps_fd)
		vmm_log(VMM_LOG_INFO,
			"vmm host: mremap cannot duplicate a mapping here (valgrind?): imported pages keep their fd");
	*out = &h->base;
	return 0;
}
