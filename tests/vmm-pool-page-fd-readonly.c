/* SPDX-License-Identifier: MIT */
/*
 * A pool page for a process that may only read it
 * (vmm_pool_page_fd_readonly(), vmm_ops.page_fd_readonly):
 *
 *   - host backend: a new fd each call, O_RDONLY, close-on-exec, not the
 *     pool's own fd, and none kept by the backend; mmap(PROT_WRITE, MAP_SHARED) of it fails with
 *     EACCES, a PROT_READ mapping reads the page's bytes and cannot be
 *     mprotect'ed writable (EACCES); pwrite and a punched hole are EBADF;
 *     the memfd's mode is 0400 (not reopened writable by another uid
 *     through /proc/self/fd); a second host backend imports it (the
 *     import's checks pass) and maps it for reading, while set_access to
 *     write is -EACCES; the pool's own fd stays read-write (the writer's);
 *     the domain is recorded as vmm_pool_page_fd() records it (a page
 *     read by another domain is renewed before it is reused); an injected
 *     failure (-EMFILE) counts in the pool's failures and leaks nothing;
 *     an unknown page or a reserved domain is -EINVAL;
 *   - cuda backend (KVMM_FAULT_BACKEND=cuda, the mock libcuda of
 *     tests/vmm-cuda-mock.sh): the backend cannot make one (no op), the
 *     pool says -EOPNOTSUPP and counts no failure, and kvmmd passes the
 *     pool's fd there.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define CAP 4
#define PAGE (64 * 1024)

static struct vmm_pool_stats stats(struct vmm_pool *pool)
{
	struct vmm_pool_stats st;

	vmm_pool_get_stats(pool, &st);
	return st;
}

static void check_cuda(struct vmm_backend *b, struct vmm_pool *pool,
		       uint32_t id)
{
	int fd = -1;

	t_assert(b->ops->page_fd_readonly != NULL); /* the fault wrapper's */
	t_assert_eq(vmm_pool_page_fd_readonly(pool, id, 1, &fd), -EOPNOTSUPP);
	t_assert_eq(fd, -1);
	t_assert_eq(stats(pool).failures, 0);
	/* the pool's fd is what kvmmd passes instead */
	t_assert(vmm_pool_page_fd(pool, id, 1) >= 0);
	printf("cuda: page_fd_readonly -EOPNOTSUPP, the pool's fd instead\n");
}

/* Another host backend (a client) imports fd and maps it: readable,
 * never writable. */
static void check_import(int fd)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_HOST, .page_size = PAGE };
	struct vmm_backend *c;
	vmm_handle_t page;
	uint64_t va;

	t_ok(vmm_backend_open(&cfg, &c));
	t_ok(c->ops->page_import(c, fd, &page));
	t_ok(c->ops->reserve(c, PAGE, &va));
	t_ok(vmm_map_page(c, va, page, VMM_PROT_READ));
	t_assert_eq(((volatile unsigned char *)(uintptr_t)va)[77], 0x5a);
	t_assert_eq(c->ops->set_access(c, va, PAGE, VMM_PROT_RW), -EACCES);
	t_ok(c->ops->unmap(c, va));
	t_ok(c->ops->page_release(c, page));
	t_ok(c->ops->free_range(c, va, PAGE));
	vmm_backend_close(c);
}

static void check_host(struct vmm_backend *b, struct vmm_pool *pool,
		       uint32_t id)
{
	int pool_fd = vmm_pool_page_fd(pool, id, 1);
	int fds_start = vt_count_fds(), fds_before;
	unsigned char buf[PAGE];
	struct stat st;
	void *m;
	int fd = -1, fd2 = -1;

	memset(buf, 0x5a, sizeof(buf));
	t_ok(b->ops->copy_from_host(b, vmm_pool_page_handle(pool, id), 0, buf,
				    sizeof(buf)));

	/* the backend keeps no fd for it, per page or in all */
	t_ok(vmm_pool_page_fd_readonly(pool, id, 1, &fd));
	close(fd);
	fds_before = vt_count_fds();
	t_assert_eq(fds_before, fds_start);
	t_ok(vmm_pool_page_fd_readonly(pool, id, 1, &fd));
	t_assert(fd >= 0 && fd != pool_fd);
	t_assert_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	t_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	/* a new description each time, the caller's to close */
	t_ok(vmm_pool_page_fd_readonly(pool, id, 1, &fd2));
	t_assert(fd2 != fd);
	close(fd2);
	/* the writer's fd stays read-write */
	t_assert_eq(fcntl(pool_fd, F_GETFL) & O_ACCMODE, O_RDWR);

	errno = 0;
	t_assert(mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) ==
		 MAP_FAILED);
	t_assert_eq(errno, EACCES);
	m = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	t_assert(m != MAP_FAILED);
	t_assert_eq(((unsigned char *)m)[PAGE - 1], 0x5a);
	errno = 0;
	t_assert_eq(mprotect(m, PAGE, PROT_READ | PROT_WRITE), -1);
	t_assert_eq(errno, EACCES);
	munmap(m, PAGE);
	errno = 0;
	t_assert_eq(pwrite(fd, buf, 1, 0), -1);
	t_assert_eq(errno, EBADF);
	errno = 0;
	t_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
			      PAGE),
		    -1);
	t_assert_eq(errno, EBADF);
	t_ok(fstat(fd, &st));
	t_assert_eq(st.st_mode & 07777, 0400);
	check_import(fd);
	close(fd);

	/* read by domain 2 as well: renewed before it is handed out again */
	t_ok(vmm_pool_page_fd_readonly(pool, id, 2, &fd));
	close(fd);
	t_ok(vmm_pool_free(pool, id));
	{
		uint32_t again;

		t_ok(vmm_pool_alloc_for(pool, 1, 1, &again));
		t_assert_eq(again, id);
		t_assert_eq(stats(pool).renewed, 1);
	}

	/* a failure to open one: counted, nothing leaked */
	vmm_fault_arm(b, VMM_OP_PAGE_FD_READONLY, 1, -EMFILE);
	fd = -1;
	t_assert_eq(vmm_pool_page_fd_readonly(pool, id, 1, &fd), -EMFILE);
	t_assert_eq(fd, -1);
	t_assert_eq(stats(pool).failures, 1);
	t_assert_eq(vt_count_fds(), fds_before);
	printf("host: O_RDONLY fd, PROT_WRITE and mprotect EACCES, mode 0400\n");
}

int main(void)
{
	struct vmm_backend *b = vt_open_fault(PAGE);
	struct vmm_pool *pool;
	uint32_t id;
	int fd;

	t_ok(vmm_pool_create(b, CAP, &pool));
	t_ok(vmm_pool_alloc_for(pool, 1, 1, &id));
	t_assert_eq(vmm_pool_page_fd_readonly(pool, CAP + 1, 1, &fd), -EINVAL);
	t_assert_eq(vmm_pool_page_fd_readonly(pool, id, UINT64_MAX - 1, &fd),
		    -EINVAL);
	if (b->kind == VMM_BACKEND_CUDA)
		check_cuda(b, pool, id);
	else
		check_host(b, pool, id);
	t_ok(vmm_pool_free(pool, id));
	vmm_pool_destroy(pool);
	vmm_backend_close(b);
	return 0;
}
