/* SPDX-License-Identifier: MIT */
/*
 * Without a usable driver the cuda backend fails cleanly: a libcuda path
 * that does not exist, and the toolkit's stub libcuda (which loads but
 * answers CUDA_ERROR_STUB_LIBRARY), both give -ENODEV from the cuda
 * backend, leak no fd, and make AUTO fall back to a working host backend.
 */
#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define STUB "/usr/local/cuda/lib64/stubs/libcuda.so"

static void check_path(const char *path)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_CUDA,
				  .libcuda_path = path };
	struct vmm_backend *b = NULL;
	int fds = vt_count_fds();
	uint64_t va;
	vmm_handle_t page;

#if HAVE_CUDA_H
	t_assert_eq(vmm_backend_open(&cfg, &b), -ENODEV);
#else
	t_assert_eq(vmm_backend_open(&cfg, &b), -ENOTSUP);
#endif
	t_assert(b == NULL);
	t_assert_eq(vt_count_fds(), fds);

	cfg.kind = VMM_BACKEND_AUTO;
	cfg.page_size = 8192;
	t_ok(vmm_backend_open(&cfg, &b));
	t_assert_eq(b->kind, VMM_BACKEND_HOST);
	t_assert(strcmp(b->ops->name, "host") == 0);
	t_assert_eq(b->page_size, 8192);
	/* ...and the fallback is a working backend. */
	t_ok(b->ops->reserve(b, 8192, &va));
	t_ok(b->ops->page_create(b, &page));
	t_ok(vmm_map_page(b, va, page, VMM_PROT_RW));
	*(volatile int *)(uintptr_t)va = 42;
	t_ok(b->ops->unmap(b, va));
	t_ok(b->ops->page_release(b, page));
	t_ok(b->ops->free_range(b, va, 8192));
	vmm_backend_close(b);
	t_assert_eq(vt_count_fds(), fds);
}

int main(void)
{
	check_path("/nonexistent/kvmm/libcuda.so.1");
	if (access(STUB, R_OK) == 0)
		check_path(STUB);
	else
		printf("no stub libcuda at %s, only the bogus path checked\n",
		       STUB);
	t_assert(strcmp(vmm_backend_kind_string(VMM_BACKEND_AUTO), "auto") ==
		 0);
	t_assert(strcmp(vmm_op_string(VMM_OP_SET_ACCESS), "set_access") == 0);
	t_assert(strcmp(vmm_op_string(VMM_OP_COUNT), "unknown") == 0);
	return 0;
}
