/* SPDX-License-Identifier: MIT */
/*
 * A pool page for a process that may only read it
 * (vmm_pool_page_fd_readonly(), vmm_ops.page_fd_readonly):
 *
 *   - host backend: an O_RDONLY, close-on-exec fd, not the pool's own,
 *     opened at the page's first call and kept while the page is
 *     allocated (the same fd again, one fd more in the process, not one a
 *     call; ro_fds and ro_fd_opens say so), closed when the page is freed
 *     (the process's fds back to where they were) and when the pool is
 *     destroyed with the page still allocated; mmap(PROT_WRITE,
 *     MAP_SHARED) of it fails with EACCES, a PROT_READ mapping reads the
 *     page's bytes and cannot be mprotect'ed writable (EACCES); pwrite
 *     and a punched hole are EBADF; the memfd's mode is 0400 (not
 *     reopened writable by another uid through /proc/self/fd); a second
 *     host backend imports it (the import's checks pass) and maps it for
 *     reading, while set_access to write is -EACCES; still read-only on
 *     the second call; the pool's own fd stays read-write (the writer's);
 *     the domain is recorded as vmm_pool_page_fd() records it (a page
 *     read by another domain is renewed before it is reused, and starts
 *     without a read-only fd); an injected failure (-EMFILE) counts in
 *     the pool's failures and leaks nothing; short of fds (-EMFILE), the
 *     kept fds of batches already sent (vmm_pool_readonly_sent()) are
 *     closed and the open or page creation succeeds, while one of the
 *     current batch stays; a free page, an unknown page or a reserved
 *     domain is -EINVAL;
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

/* The page's read-only fd is still the kept one and still read-only. */
static void check_readonly(int fd, int pool_fd)
{
	struct stat st;

	t_assert(fd >= 0 && fd != pool_fd);
	t_assert_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	t_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	t_ok(fstat(fd, &st));
	t_assert_eq(st.st_mode & 07777, 0400);
	errno = 0;
	t_assert(mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) ==
		 MAP_FAILED);
	t_assert_eq(errno, EACCES);
}

/* Short of fds: kept fds of batches sent are closed for a new one or a
 * new page, those of the batch being built are not. */
static void check_shortage(struct vmm_backend *b, struct vmm_pool *pool,
			   uint32_t id)
{
	struct vmm_pool_stats st0 = stats(pool);
	uint32_t other, third;
	int fd, fd_other, fds;

	t_ok(vmm_pool_page_fd_readonly(pool, id, 1, &fd));
	vmm_pool_readonly_sent(pool);
	t_assert_eq(stats(pool).ro_fds, 1);
	fds = vt_count_fds();

	/* id's fd was sent: closed so that other's can be opened */
	t_ok(vmm_pool_alloc_for(pool, 1, 1, &other));
	vmm_fault_arm(b, VMM_OP_PAGE_FD_READONLY, 1, -EMFILE);
	t_ok(vmm_pool_page_fd_readonly(pool, other, 1, &fd_other));
	t_assert_eq(stats(pool).ro_fd_drops, st0.ro_fd_drops + 1);
	t_assert_eq(stats(pool).ro_fds, 1);
	t_assert_eq(vt_count_fds(), fds + 1); /* other's page, not id's fd */

	/* other's is in the batch being built: kept; id's cannot open */
	vmm_fault_arm(b, VMM_OP_PAGE_FD_READONLY, 1, -EMFILE);
	t_assert_eq(vmm_pool_page_fd_readonly(pool, id, 1, &fd), -EMFILE);
	t_assert_eq(fcntl(fd_other, F_GETFL) & O_ACCMODE, O_RDONLY);
	t_assert_eq(stats(pool).ro_fds, 1);
	vmm_pool_readonly_sent(pool);
	/* reopened at the next call */
	t_ok(vmm_pool_page_fd_readonly(pool, id, 1, &fd));
	check_readonly(fd, vmm_pool_page_fd(pool, id, 1));
	t_assert_eq(stats(pool).ro_fds, 2);
	vmm_pool_readonly_sent(pool);

	/* a new page's creation short of fds: the kept ones go, it is made */
	vmm_fault_arm(b, VMM_OP_PAGE_CREATE, 1, -EMFILE);
	t_ok(vmm_pool_alloc_for(pool, 1, 1, &third));
	t_assert_eq(stats(pool).ro_fds, 0);
	t_assert_eq(stats(pool).ro_fd_drops, st0.ro_fd_drops + 3);
	/* +2 pages, -1 read-only fd */
	t_assert_eq(vt_count_fds(), fds + 1);
	t_ok(vmm_pool_free(pool, third));
	t_ok(vmm_pool_free(pool, other));
}

static void check_host(struct vmm_backend *b, struct vmm_pool *pool,
		       uint32_t id)
{
	int pool_fd = vmm_pool_page_fd(pool, id, 1);
	int fds_start = vt_count_fds(), fds_kept;
	unsigned char buf[PAGE];
	void *m;
	int fd = -1, fd2 = -1;

	memset(buf, 0x5a, sizeof(buf));
	t_ok(b->ops->copy_from_host(b, vmm_pool_page_handle(pool, id), 0, buf,
				    sizeof(buf)));

	/* opened once, kept: one fd more in the process, whatever the calls */
	t_assert_eq(stats(pool).ro_fds, 0);
	t_ok(vmm_pool_page_fd_readonly(pool, id, 1, &fd));
	fds_kept = vt_count_fds();
	t_assert_eq(fds_kept, fds_start + 1);
	check_readonly(fd, pool_fd);
	for (int i = 0; i < 100; i++) {
		t_ok(vmm_pool_page_fd_readonly(pool, id, 1, &fd2));
		t_assert_eq(fd2, fd);
		vmm_pool_readonly_sent(pool);
	}
	t_assert_eq(vt_count_fds(), fds_kept);
	t_assert_eq(stats(pool).ro_fds, 1);
	t_assert_eq(stats(pool).ro_fd_opens, 1);
	/* the writer's fd stays read-write */
	t_assert_eq(fcntl(pool_fd, F_GETFL) & O_ACCMODE, O_RDWR);

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
	check_import(fd);
	/* still read-only after a reader used it */
	t_ok(vmm_pool_page_fd_readonly(pool, id, 1, &fd2));
	t_assert_eq(fd2, fd);
	check_readonly(fd2, pool_fd);

	/* read by domain 2 as well: renewed before it is handed out again;
	 * the kept fd goes when the page is freed */
	t_ok(vmm_pool_page_fd_readonly(pool, id, 2, &fd));
	vmm_pool_readonly_sent(pool);
	t_ok(vmm_pool_free(pool, id));
	t_assert_eq(stats(pool).ro_fds, 0);
	t_assert_eq(vt_count_fds(), fds_start);
	t_assert_eq(vmm_pool_page_fd_readonly(pool, id, 1, &fd), -EINVAL);
	{
		uint32_t again;

		t_ok(vmm_pool_alloc_for(pool, 1, 1, &again));
		t_assert_eq(again, id);
		t_assert_eq(stats(pool).renewed, 1);
		t_assert_eq(vt_count_fds(), fds_start);
	}

	/* a failure to open one: counted, nothing leaked */
	vmm_fault_arm(b, VMM_OP_PAGE_FD_READONLY, 1, -EMFILE);
	fd = -1;
	t_assert_eq(vmm_pool_page_fd_readonly(pool, id, 1, &fd), -EMFILE);
	t_assert_eq(fd, -1);
	t_assert_eq(stats(pool).failures, 1);
	t_assert_eq(stats(pool).ro_fds, 0);
	t_assert_eq(vt_count_fds(), fds_start);

	check_shortage(b, pool, id);

	/* a page destroyed with the pool takes its kept fd along */
	t_ok(vmm_pool_page_fd_readonly(pool, id, 1, &fd));
	t_assert_eq(stats(pool).ro_fds, 1);
	printf("host: one kept O_RDONLY fd, PROT_WRITE and mprotect EACCES, mode 0400, closed at free\n");
}

int main(void)
{
	struct vmm_backend *b = vt_open_fault(PAGE);
	struct vmm_pool *pool;
	uint32_t id;
	int fd, fds = 0;

	t_ok(vmm_pool_create(b, CAP, &pool));
	t_ok(vmm_pool_alloc_for(pool, 1, 1, &id));
	t_assert_eq(vmm_pool_page_fd_readonly(pool, CAP + 1, 1, &fd), -EINVAL);
	t_assert_eq(vmm_pool_page_fd_readonly(pool, id, UINT64_MAX - 1, &fd),
		    -EINVAL);
	if (b->kind == VMM_BACKEND_CUDA) {
		check_cuda(b, pool, id);
		t_ok(vmm_pool_free(pool, id));
	} else {
		fds = vt_count_fds();
		check_host(b, pool, id);
		/* two more pages, and id still allocated with its kept fd */
		t_assert_eq(vt_count_fds(), fds + 3);
	}
	vmm_pool_destroy(pool);
	/* every page's memfd and the kept fd closed */
	if (b->kind != VMM_BACKEND_CUDA)
		t_assert_eq(vt_count_fds(), fds - 1);
	vmm_backend_close(b);
	return 0;
}
