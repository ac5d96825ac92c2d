/* SPDX-License-Identifier: MIT */
/*
 * Every host backend call rejects bad arguments with the errno the table
 * in vmm/vmm.h promises, before touching the address space: misaligned
 * addresses, sizes that are not whole pages, addresses outside any
 * reservation, double map/unmap, stale page handles and fds that are not
 * pages.
 */
#include <sys/mman.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

int main(void)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_HOST,
				  .page_size = 16384 };
	struct vmm_backend_usage u;
	struct vmm_backend *b;
	vmm_handle_t page, stale;
	size_t ps;
	uint64_t va, other;
	char buf[64];
	int fd;

	/* Page size must be a multiple of 4 KiB. */
	cfg.page_size = 6000;
	t_assert_eq(vmm_backend_open(&cfg, &b), -EINVAL);
	cfg.page_size = 16384;
	t_ok(vmm_backend_open(&cfg, &b));
	t_ok(b->ops->granularity(b, &ps));
	t_assert_eq(ps, 16384);

	/* reserve: size 0 or not whole pages. */
	t_assert_eq(b->ops->reserve(b, 0, &va), -EINVAL);
	t_assert_eq(b->ops->reserve(b, ps + 4096, &va), -EINVAL);
	t_ok(b->ops->reserve(b, 4 * ps, &va));
	t_assert_eq(va % ps, 0);
	t_ok(b->ops->page_create(b, &page));

	/* map: misaligned, outside any reservation, stale handle, twice. */
	t_assert_eq(b->ops->map(b, va + 4096, page), -EINVAL);
	t_assert_eq(b->ops->map(b, va + 4 * ps, page), -EFAULT);
	t_assert_eq(b->ops->map(b, va - ps, page), -EFAULT);
	t_assert_eq(b->ops->map(b, va, page + 1000), -EBADF);
	t_ok(b->ops->map(b, va + ps, page));
	t_assert_eq(b->ops->map(b, va + ps, page), -EBUSY);

	/* set_access: bad prot, misaligned, unmapped pages, past the end. */
	t_assert_eq(b->ops->set_access(b, va + ps, ps, 2), -EINVAL);
	t_assert_eq(b->ops->set_access(b, va + ps, ps / 2, VMM_PROT_RW),
		    -EINVAL);
	t_assert_eq(b->ops->set_access(b, va, 2 * ps, VMM_PROT_RW), -ENOENT);
	t_assert_eq(b->ops->set_access(b, va + ps, 4 * ps, VMM_PROT_RW),
		    -EFAULT);
	t_ok(b->ops->set_access(b, va + ps, ps, VMM_PROT_RW));

	/* Async copies take byte spans: one that runs past the reservation
	 * is -EFAULT, also when its length is so large that rounding it up
	 * to whole pages wraps around to a single page. */
	t_ok(b->ops->copy_va_to_host_async(b, buf, va + ps + 100, 8));
	t_assert_eq(b->ops->copy_va_to_host_async(b, buf, va + ps + 100, ps),
		    -ENOENT);
	t_assert_eq(b->ops->copy_va_to_host_async(b, buf, va + ps + 100,
						  (size_t)0 - 50),
		    -EFAULT);
	t_assert_eq(b->ops->copy_host_to_va_async(b, va + ps + 100, buf,
						  SIZE_MAX),
		    -EFAULT);

	/* free_range: not exactly one reservation, or pages still mapped. */
	t_assert_eq(b->ops->free_range(b, va, 2 * ps), -EINVAL);
	t_assert_eq(b->ops->free_range(b, va + 4096, 4 * ps), -EINVAL);
	t_assert_eq(b->ops->free_range(b, va, 4 * ps), -EBUSY);

	/* unmap: misaligned, outside, never mapped, twice. */
	t_assert_eq(b->ops->unmap(b, va + ps + 4096), -EINVAL);
	t_assert_eq(b->ops->unmap(b, va + 8 * ps), -EFAULT);
	t_assert_eq(b->ops->unmap(b, va), -ENOENT);
	t_ok(b->ops->unmap(b, va + ps));
	t_assert_eq(b->ops->unmap(b, va + ps), -ENOENT);

	/* Copies: offset/len outside the page, stale handle. */
	t_assert_eq(b->ops->copy_to_host(b, buf, page, ps - 8, 16), -EINVAL);
	t_assert_eq(b->ops->copy_from_host(b, page, ps + 1, buf, 0), -EINVAL);
	t_ok(b->ops->copy_from_host(b, page, ps - 8, "12345678", 8));
	t_ok(b->ops->copy_to_host(b, buf, page, ps - 8, 8));
	t_assert(memcmp(buf, "12345678", 8) == 0);

	/* Import: fds that are not pages of this backend. */
	t_assert_eq(b->ops->page_import(b, -1, &stale), -EBADF);
	t_assert_eq(b->ops->page_import(b, 0 /* stdin */, &stale), -EBADF);
	fd = memfd_create("not-a-page", MFD_CLOEXEC);
	t_assert(fd >= 0);
	t_ok(ftruncate(fd, (off_t)ps));
	t_assert_eq(b->ops->page_import(b, fd, &stale), -EBADF); /* unsealed */
	close(fd);

	/* A released handle is stale everywhere. */
	stale = page;
	t_ok(b->ops->page_release(b, page));
	t_assert_eq(b->ops->page_release(b, stale), -EBADF);
	t_assert_eq(b->ops->page_export(b, stale, &fd), -EBADF);
	t_assert_eq(b->ops->map(b, va, stale), -EBADF);
	t_assert_eq(b->ops->copy_to_host(b, buf, stale, 0, 1), -EBADF);

	/* ... also once the next page created got its memfd number: the
	 * stale handle neither reaches nor releases the new page. */
	t_ok(b->ops->page_create(b, &page));
	t_assert(page != stale);
	t_ok(b->ops->copy_from_host(b, page, 0, "new page", 8));
	t_assert_eq(b->ops->copy_from_host(b, stale, 0, "stale!!!", 8), -EBADF);
	t_assert_eq(b->ops->page_release(b, stale), -EBADF);
	t_assert_eq(b->ops->page_fd(b, stale, &fd), -EBADF);
	t_assert_eq(b->ops->map(b, va, stale), -EBADF);
	t_ok(b->ops->copy_to_host(b, buf, page, 0, 8));
	t_assert(memcmp(buf, "new page", 8) == 0);
	t_ok(b->ops->page_release(b, page));

	/* A second reservation does not alias the first. */
	t_ok(b->ops->reserve(b, ps, &other));
	t_assert(other + ps <= va || other >= va + 4 * ps);
	t_ok(b->ops->free_range(b, other, ps));
	t_assert_eq(b->ops->free_range(b, other, ps), -EFAULT);

	t_ok(b->ops->free_range(b, va, 4 * ps));
	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, 0);
	t_assert_eq(u.ranges, 0);
	t_assert_eq(u.mappings, 0);
	vmm_backend_close(b);
	return 0;
}
