/* SPDX-License-Identifier: MIT */
/*
 * A pool page whose fd went to a process of another trust domain is
 * swapped for a new page before it is handed out again, so a process that
 * kept the old fd or a mapping of it (a client lying about its unmaps)
 * never reads what the next owner writes (vmm_pool_page_fd(),
 * vmm_pool_alloc_for()):
 *
 *   - fds given within one domain: the page comes back as it is (same
 *     handle, same bytes, renewed 0);
 *   - its fd given to a second domain too: the next allocation gets a new
 *     page (another handle, all zeros, renewed 1, no scrub); the fd the
 *     test kept still maps the old bytes and none of the new owner's; the
 *     backend holds as many pages as the pool, the old one released;
 *   - seen by one domain, taken in another: renewed; last owned by
 *     another owner but seen by no other domain: scrubbed, not renewed;
 *   - a swap that fails (page_create, then page_fd injected): the
 *     allocation fails, renew_failures counts it, the page stays free with
 *     its handle and bytes and nothing leaks; the next allocation renews;
 *   - a domain the pool reserves (UINT64_MAX - 1 and above): -EINVAL.
 *
 * The mapping checks need the host backend (a memfd fd); the rest runs
 * over cuda too (KVMM_FAULT_BACKEND=cuda, tests/vmm-cuda-mock.sh).
 */
#include <sys/mman.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define CAP 4
#define PAGE (64 * 1024)

static void fill(struct vmm_backend *b, struct vmm_pool *pool, uint32_t id,
		 unsigned char v)
{
	unsigned char *buf = malloc(b->page_size);

	t_assert(buf);
	memset(buf, v, b->page_size);
	t_ok(b->ops->copy_from_host(b, vmm_pool_page_handle(pool, id), 0, buf,
				    b->page_size));
	free(buf);
}

/* Bytes of the page that are not v. */
static size_t differ(struct vmm_backend *b, struct vmm_pool *pool, uint32_t id,
		     unsigned char v)
{
	unsigned char *buf = malloc(b->page_size);
	size_t bad = 0;

	t_assert(buf);
	t_ok(b->ops->copy_to_host(b, buf, vmm_pool_page_handle(pool, id), 0,
				  b->page_size));
	for (size_t i = 0; i < b->page_size; i++)
		bad += buf[i] != v;
	free(buf);
	return bad;
}

static struct vmm_pool_stats stats(struct vmm_pool *pool)
{
	struct vmm_pool_stats st;

	vmm_pool_get_stats(pool, &st);
	return st;
}

/* What a liar keeps: a mapping of the page's fd (host: the memfd). */
static const unsigned char *keep_mapping(struct vmm_backend *b, int fd)
{
	void *m;

	if (b->kind != VMM_BACKEND_HOST)
		return NULL;
	m = mmap(NULL, b->page_size, PROT_READ, MAP_SHARED, fd, 0);
	t_assert(m != MAP_FAILED);
	return m;
}

static size_t mapping_differs(struct vmm_backend *b, const unsigned char *m,
			      unsigned char v)
{
	size_t bad = 0;

	for (size_t i = 0; m && i < b->page_size; i++)
		bad += m[i] != v;
	return bad;
}

int main(void)
{
	struct vmm_backend *b = vt_open_fault(PAGE);
	struct vmm_backend_usage u;
	const unsigned char *liar;
	struct vmm_pool *pool;
	vmm_handle_t old;
	uint32_t a, id;
	int fd;

	vmm_log_set_level(VMM_LOG_ERR);
	t_ok(vmm_pool_create(b, CAP, &pool));
	t_assert_eq(vmm_pool_alloc_for(pool, 1, UINT64_MAX - 1, &id), -EINVAL);
	t_assert_eq(vmm_pool_alloc_for(pool, 1, UINT64_MAX, &id), -EINVAL);

	/* domain 10 only: back as it was */
	t_ok(vmm_pool_alloc_for(pool, 1, 10, &a));
	t_assert(vmm_pool_page_fd(pool, a, 10) >= 0);
	t_assert_eq(vmm_pool_page_fd(pool, a, UINT64_MAX - 1), -EINVAL);
	fill(b, pool, a, 0xA1);
	old = vmm_pool_page_handle(pool, a);
	t_ok(vmm_pool_free(pool, a));
	t_ok(vmm_pool_alloc_for(pool, 1, 10, &id));
	t_assert_eq(id, a);
	t_assert_eq(vmm_pool_page_handle(pool, a), old);
	t_assert_eq(differ(b, pool, a, 0xA1), 0);
	t_assert_eq(stats(pool).renewed, 0);

	/* its fd goes to domain 20 as well (a process there keeps it) */
	fd = vmm_pool_page_fd(pool, a, 20);
	t_assert(fd >= 0);
	fd = dup(fd);
	t_assert(fd >= 0);
	liar = keep_mapping(b, fd);
	t_ok(vmm_pool_free(pool, a));
	t_ok(vmm_pool_alloc_for(pool, 1, 10, &id));
	t_assert_eq(id, a);
	t_assert(vmm_pool_page_handle(pool, a) != old);
	t_assert_eq(stats(pool).renewed, 1);
	t_assert_eq(stats(pool).scrubbed, 0);
	t_assert_eq(differ(b, pool, a, 0), 0); /* a new page */
	t_assert(vmm_pool_page_fd(pool, a, 10) >= 0);
	fill(b, pool, a, 0xB2);
	t_assert_eq(mapping_differs(b, liar, 0xA1), 0); /* still the old */
	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, stats(pool).created);

	/* seen by 10, taken in 30: renewed; then owner 2 of domain 30 takes
	 * owner 1's page that only 30 saw: scrubbed, not renewed */
	t_ok(vmm_pool_free(pool, a));
	t_ok(vmm_pool_alloc_for(pool, 1, 30, &id));
	t_assert_eq(id, a);
	t_assert_eq(stats(pool).renewed, 2);
	t_assert_eq(differ(b, pool, a, 0), 0);
	t_assert(vmm_pool_page_fd(pool, a, 30) >= 0);
	fill(b, pool, a, 0xC3);
	t_ok(vmm_pool_free(pool, a));
	t_ok(vmm_pool_alloc_for(pool, 2, 30, &id));
	t_assert_eq(id, a);
	t_assert_eq(stats(pool).renewed, 2);
	t_assert_eq(stats(pool).scrubbed, 1);
	t_assert_eq(differ(b, pool, a, 0), 0);

	/* a swap that fails leaves the page as it was, free; then one whose
	 * new page gets no fd releases that page (host: page_fd; cuda: its
	 * export) */
	fill(b, pool, a, 0xD4);
	t_assert(vmm_pool_page_fd(pool, a, 30) >= 0);
	t_ok(vmm_pool_free(pool, a));
	old = vmm_pool_page_handle(pool, a);
	vmm_fault_arm(b, VMM_OP_PAGE_CREATE, 1, -ENOMEM);
	t_assert_eq(vmm_pool_alloc_for(pool, 3, 40, &id), -ENOMEM);
	t_assert_eq(stats(pool).renew_failures, 1);
	t_assert_eq(vmm_pool_page_state(pool, a), VMM_PAGE_FREE);
	t_assert_eq(vmm_pool_page_handle(pool, a), old);
	t_assert_eq(differ(b, pool, a, 0xD4), 0);
	vmm_fault_arm(b,
		      b->kind == VMM_BACKEND_HOST ? VMM_OP_PAGE_FD :
						    VMM_OP_PAGE_EXPORT,
		      1, -EMFILE);
	t_assert_eq(vmm_pool_alloc_for(pool, 3, 40, &id), -EMFILE);
	t_assert_eq(stats(pool).renew_failures, 2);
	t_assert_eq(vmm_pool_page_handle(pool, a), old);
	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, stats(pool).created); /* the new one released */
	t_ok(vmm_pool_alloc_for(pool, 3, 40, &id));
	t_assert_eq(id, a);
	t_assert_eq(stats(pool).renewed, 3);
	t_assert_eq(differ(b, pool, a, 0), 0);
	t_ok(vmm_pool_free(pool, a));

	vmm_pool_destroy(pool);
	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, 0);
	t_assert_eq(mapping_differs(b, liar, 0xA1), 0);
	if (liar)
		munmap((void *)liar, b->page_size);
	close(fd);
	vmm_backend_close(b);
	printf("pool renew: another domain's page swapped for a new one (3), the kept fd sees none of it, failures leave it as it was\n");
	return 0;
}
