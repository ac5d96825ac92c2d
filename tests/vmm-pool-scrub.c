/* SPDX-License-Identifier: MIT */
/*
 * A pool page never reaches a new owner with its last owner's bytes:
 * vmm_pool_alloc_for() zeroes a free page last allocated for another
 * owner (vmm_ops.page_zero), and only then.
 *
 *   - the same owner gets its page back unscrubbed (scrubbed stays 0);
 *   - another owner gets it zeroed, every byte (scrubbed 1);
 *   - among the last freed pages one of the same owner is taken first
 *     (no scrub although another owner's page was freed last);
 *   - a backend without page_zero (injected -ENOTSUP) is scrubbed by
 *     writing zeros through copy_from_host;
 *   - a failed scrub fails the allocation (scrub_failures 1), the page
 *     stays free and is not handed out, and the next try zeroes it;
 *   - a fresh page (never allocated) needs no scrub.
 *
 * KVMM_FAULT_BACKEND=cuda runs it over the cuda backend (the mock libcuda
 * in tests/vmm-cuda-mock.sh: cuMemsetD8Async, waited for, through the scratch range).
 */
#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define CAP 4

static struct vmm_backend *open_backend(void)
{
	return vt_open_fault(64 * 1024);
}

static void fill(struct vmm_backend *b, struct vmm_pool *pool, uint32_t id,
		 unsigned char v)
{
	size_t n = b->page_size;
	unsigned char *buf = malloc(n);

	t_assert(buf);
	memset(buf, v, n);
	t_ok(b->ops->copy_from_host(b, vmm_pool_page_handle(pool, id), 0, buf,
				    n));
	free(buf);
}

/* Bytes of the page that are not v. */
static size_t differ(struct vmm_backend *b, struct vmm_pool *pool, uint32_t id,
		     unsigned char v)
{
	size_t n = b->page_size, bad = 0;
	unsigned char *buf = malloc(n);

	t_assert(buf);
	t_ok(b->ops->copy_to_host(b, buf, vmm_pool_page_handle(pool, id), 0,
				  n));
	for (size_t i = 0; i < n; i++)
		bad += buf[i] != v;
	free(buf);
	return bad;
}

static uint64_t scrubbed(struct vmm_pool *pool, uint64_t *failures)
{
	struct vmm_pool_stats st;

	vmm_pool_get_stats(pool, &st);
	if (failures)
		*failures = st.scrub_failures;
	return st.scrubbed;
}

int main(void)
{
	struct vmm_backend *b = open_backend();
	struct vmm_pool *pool;
	uint32_t a, a2, c, id;
	uint64_t fails;

	t_ok(vmm_pool_create(b, CAP, &pool));
	t_assert_eq(vmm_pool_alloc_for(pool, UINT64_MAX, 0, &id), -EINVAL);

	/* owner 1 writes; gets the page back as it was, no scrub */
	t_ok(vmm_pool_alloc_for(pool, 1, 0, &a));
	fill(b, pool, a, 0xA1);
	t_ok(vmm_pool_free(pool, a));
	t_ok(vmm_pool_alloc_for(pool, 1, 0, &id));
	t_assert_eq(id, a);
	t_assert_eq(scrubbed(pool, NULL), 0);
	t_assert_eq(differ(b, pool, a, 0xA1), 0); /* its own bytes */
	t_ok(vmm_pool_free(pool, a));

	/* owner 2 gets it zeroed */
	t_ok(vmm_pool_alloc_for(pool, 2, 0, &id));
	t_assert_eq(id, a);
	t_assert_eq(scrubbed(pool, NULL), 1);
	t_assert_eq(differ(b, pool, a, 0), 0);
	fill(b, pool, a, 0xB2);

	/* owner 1 gets a fresh page (never allocated: no scrub), writes it;
	 * both freed, owner 2's last: owner 1 still finds its own */
	t_ok(vmm_pool_alloc_for(pool, 1, 0, &a2));
	t_assert(a2 != a);
	fill(b, pool, a2, 0xA1);
	t_assert_eq(scrubbed(pool, NULL), 1);
	t_ok(vmm_pool_free(pool, a2));
	t_ok(vmm_pool_free(pool, a)); /* owner 2's, on top */
	t_ok(vmm_pool_alloc_for(pool, 1, 0, &id));
	t_assert_eq(id, a2);
	t_assert_eq(scrubbed(pool, NULL), 1);
	t_assert_eq(differ(b, pool, a2, 0xA1), 0);
	t_ok(vmm_pool_free(pool, a2));

	/* a backend without page_zero: zeros written through copy_from_host */
	vmm_fault_arm(b, VMM_OP_PAGE_ZERO, 1, -ENOTSUP);
	t_ok(vmm_pool_alloc_for(pool, 3, 0, &c)); /* a2 (owner 1, on top) */
	t_assert_eq(c, a2);
	t_assert_eq(scrubbed(pool, &fails), 2);
	t_assert_eq(fails, 0);
	t_assert_eq(differ(b, pool, c, 0), 0);
	fill(b, pool, c, 0xC3);
	t_ok(vmm_pool_free(pool, c));

	/* a failed scrub: the allocation fails, the page stays free with its
	 * bytes, nobody gets it; the next try zeroes it */
	vmm_fault_arm(b, VMM_OP_PAGE_ZERO, 1, -EIO);
	t_assert_eq(vmm_pool_alloc_for(pool, 4, 0, &id), -EIO);
	t_assert_eq(scrubbed(pool, &fails), 2);
	t_assert_eq(fails, 1);
	t_assert_eq(vmm_pool_page_state(pool, c), VMM_PAGE_FREE);
	t_ok(vmm_pool_alloc_for(pool, 4, 0, &id));
	t_assert_eq(id, c);
	t_assert_eq(scrubbed(pool, &fails), 3);
	t_assert_eq(differ(b, pool, c, 0), 0);
	t_ok(vmm_pool_free(pool, c));

	vmm_pool_destroy(pool);
	vmm_backend_close(b);
	printf("pool scrub: same owner kept, another owner zeroed, fallback and failure ok\n");
	return 0;
}
