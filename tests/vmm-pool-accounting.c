/* SPDX-License-Identifier: MIT */
/*
 * The page pool's counters follow every state change and come back to
 * their starting values after many alloc / map / free / unmap cycles,
 * including frees that wait in REVOKING for the last mapper; pages are
 * created only once and recycled; destroying the pool returns every page
 * and fd to the backend.
 */
#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define CAP 8
#define CYCLES 500

static void check_stats(struct vmm_pool *pool, uint64_t created, uint64_t free,
			uint64_t allocated, uint64_t mapped)
{
	struct vmm_pool_stats st;

	vmm_pool_get_stats(pool, &st);
	t_assert_eq(st.created, created);
	t_assert_eq(st.free, free);
	t_assert_eq(st.allocated, allocated);
	t_assert_eq(st.mapped, mapped);
	t_assert_eq(st.failures, 0);
}

int main(void)
{
	struct vmm_backend_usage u;
	struct vmm_pool_stats st;
	struct vmm_backend *b;
	struct vmm_pool *pool;
	uint32_t ids[CAP], extra;
	uint64_t va;
	int fds_before = vt_count_fds();

	b = vt_open_host(8192);
	t_assert_eq(vmm_pool_create(b, 0, &pool), -EINVAL);
	t_ok(vmm_pool_create(b, CAP, &pool));
	t_ok(b->ops->reserve(b, CAP * b->page_size, &va));
	check_stats(pool, 0, 0, 0, 0);
	t_ok(vmm_pool_prefill(pool, 3));
	check_stats(pool, 3, 3, 0, 0);

	for (int c = 0; c < CYCLES; c++) {
		int n = 1 + c % CAP;

		for (int i = 0; i < n; i++) {
			t_ok(vmm_pool_alloc(pool, &ids[i]));
			t_assert_eq(vmm_pool_page_state(pool, ids[i]),
				    VMM_PAGE_ALLOCATED);
			t_ok(vmm_map_page(b, va + i * b->page_size,
					  vmm_pool_page_handle(pool, ids[i]),
					  VMM_PROT_RW));
			*(volatile int *)(uintptr_t)(va + i * b->page_size) = c;
			t_ok(vmm_pool_mapped(pool, ids[i]));
		}
		check_stats(pool, c < CAP ? (n > 3 ? n : 3) : CAP,
			    (c < CAP ? (n > 3 ? n : 3) : CAP) - n, n, n);
		/* Half the pages are freed while mapped (REVOKING), half after
		 * their unmap; the count of REVOKING pages follows. */
		for (int i = 0; i < n; i++) {
			if (i % 2) {
				t_ok(vmm_pool_free(pool, ids[i]));
				vmm_pool_get_stats(pool, &st);
				t_assert_eq(st.revoking, 1);
				t_assert_eq(vmm_pool_page_state(pool, ids[i]),
					    VMM_PAGE_REVOKING);
				t_assert_eq(vmm_pool_mapped(pool, ids[i]),
					    -EINVAL);
				t_assert_eq(vmm_pool_free(pool, ids[i]),
					    -EINVAL);
			}
			t_ok(b->ops->unmap(b, va + i * b->page_size));
			t_ok(vmm_pool_unmapped(pool, ids[i]));
			vmm_pool_get_stats(pool, &st);
			t_assert_eq(st.revoking, 0);
			t_assert_eq(vmm_pool_unmapped(pool, ids[i]), -EINVAL);
			if (i % 2 == 0) {
				t_assert_eq(vmm_pool_page_state(pool, ids[i]),
					    VMM_PAGE_ALLOCATED);
				t_ok(vmm_pool_free(pool, ids[i]));
			}
			t_assert_eq(vmm_pool_page_state(pool, ids[i]),
				    VMM_PAGE_FREE);
		}
		vmm_pool_get_stats(pool, &st);
		t_assert_eq(st.allocated, 0);
		t_assert_eq(st.mapped, 0);
		t_assert_eq(st.free, st.created);
	}
	vmm_pool_get_stats(pool, &st);
	t_assert_eq(st.created, CAP);
	t_assert_eq(st.create_calls, CAP);
	t_assert_eq(st.peak_allocated, CAP);

	/* Capacity is a hard limit. */
	for (int i = 0; i < CAP; i++)
		t_ok(vmm_pool_alloc(pool, &ids[i]));
	t_assert_eq(vmm_pool_alloc(pool, &extra), -ENOMEM);
	for (int i = 0; i < CAP; i++)
		t_ok(vmm_pool_free(pool, ids[i]));
	check_stats(pool, CAP, CAP, 0, 0);

	/* Bad ids are refused, not trusted. */
	t_assert_eq(vmm_pool_free(pool, CAP), -EINVAL);
	t_assert_eq(vmm_pool_mapped(pool, 1u << 30), -EINVAL);
	t_assert_eq(vmm_pool_page_fd(pool, CAP + 1, 0), -EINVAL);
	t_assert_eq(vmm_pool_page_state(pool, CAP), VMM_PAGE_UNUSED);
	t_assert(strcmp(vmm_page_state_string(VMM_PAGE_REVOKING), "revoking") ==
		 0);

	vmm_pool_destroy(pool);
	t_ok(b->ops->free_range(b, va, CAP * b->page_size));
	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages + u.ranges + u.mappings, 0);
	vmm_backend_close(b);
	t_assert_eq(vt_count_fds(), fds_before);
	return 0;
}
