/* SPDX-License-Identifier: MIT */
/*
 * The cuda backend takes a configured page size only when it is a power
 * of two multiple of the granularity: every reservation is aligned to the
 * page size, and cuMemAddressReserve takes only power-of-two alignments.
 * 3 x the granularity is refused at open with -EINVAL and a reason that
 * says so, before any reservation reaches the driver (the mock libcuda
 * fails the process for one with a bad alignment); 2 x is accepted and
 * its reservations are aligned to it.  Skips (77) without a driver and a
 * GPU.
 */
#include "tests/vmm-util.h"
#include "vmm/cuda_priv.h"
#include "vmm/vmm.h"

int main(void)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_CUDA };
	struct vmm_backend *b;
	vmm_handle_t page;
	char why[256] = "";
	size_t gran;
	uint64_t va;
	int err;

	cfg.libcuda_path = getenv("KVMM_LIBCUDA");
	err = vmm_backend_open(&cfg, &b);
	if (err == -ENODEV || err == -ENOTSUP)
		t_skip("no CUDA driver or GPU (vmm_cuda_open: %s)",
		       strerror(-err));
	t_ok(err);
	t_ok(b->ops->granularity(b, &gran));
	vmm_backend_close(b);

	cfg.page_size = 3 * gran;
	t_assert_eq(vmm_cuda_open_why(&cfg, &b, why, sizeof(why)), -EINVAL);
	printf("page size %zu: %s\n", cfg.page_size, why);
	t_assert(strstr(why, "not a power of two") != NULL);

	cfg.page_size = 2 * gran;
	t_ok(vmm_backend_open(&cfg, &b));
	t_assert_eq(b->page_size, 2 * gran);
	t_ok(b->ops->reserve(b, 3 * b->page_size, &va));
	t_assert_eq(va % b->page_size, 0);
	t_ok(b->ops->page_create(b, &page));
	t_ok(vmm_map_page(b, va + b->page_size, page, VMM_PROT_RW));
	t_ok(b->ops->unmap(b, va + b->page_size));
	t_ok(b->ops->page_release(b, page));
	t_ok(b->ops->free_range(b, va, 3 * b->page_size));
	vmm_backend_close(b);
	return 0;
}
