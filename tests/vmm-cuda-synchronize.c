/* SPDX-License-Identifier: MIT */
/*
 * The cuda backend's synchronize never returns as if it had waited when
 * it had not: a context that cannot be entered at once (the mock libcuda
 * fails the next cuCtxPushCurrent calls on request) is tried again, and
 * the wait then happens (0); one that cannot be entered at all is
 * -EINPROGRESS, which tells the caller that queued copies may still land
 * and their memory must not be reused (kvmmd keeps such a host slot out
 * of use).  Runs on the mock only (tests/vmm-cuda-mock.sh; skips (77)
 * elsewhere: a real driver has no way to make the push fail).
 */
#include <dlfcn.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

int main(void)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_CUDA };
	void (*fail_push)(int n);
	struct vmm_backend *b;
	vmm_handle_t page;
	char host[64] = "queued on the stream";
	uint64_t va;
	void *dl;
	int err;

	cfg.libcuda_path = getenv("KVMM_LIBCUDA");
	err = vmm_backend_open(&cfg, &b);
	if (err == -ENODEV || err == -ENOTSUP)
		t_skip("no CUDA driver or GPU (vmm_cuda_open: %s)",
		       strerror(-err));
	t_ok(err);
	dl = cfg.libcuda_path ?
		     dlopen(cfg.libcuda_path, RTLD_NOW | RTLD_NOLOAD) :
		     NULL;
	fail_push = dl ? (void (*)(int))dlsym(dl, "kvmm_mock_fail_ctx_push") :
			 NULL;
	if (!fail_push) {
		vmm_backend_close(b);
		t_skip("not the mock libcuda: no way to fail cuCtxPushCurrent");
	}

	t_ok(b->ops->reserve(b, b->page_size, &va));
	t_ok(b->ops->page_create(b, &page));
	t_ok(vmm_map_page(b, va, page, VMM_PROT_RW));
	t_ok(b->ops->copy_host_to_va_async(b, va, host, sizeof(host)));
	/* two failed pushes: the third try waits */
	fail_push(2);
	t_ok(b->ops->synchronize(b));
	memset(host, 0, sizeof(host));
	t_ok(b->ops->copy_to_host(b, host, page, 0, 21));
	t_assert(!strcmp(host, "queued on the stream"));
	/* never: it says it could not wait */
	t_ok(b->ops->copy_host_to_va_async(b, va, host, sizeof(host)));
	fail_push(1000);
	t_assert_eq(b->ops->synchronize(b), -EINPROGRESS);
	fail_push(0);
	t_ok(b->ops->synchronize(b));

	t_ok(b->ops->unmap(b, va));
	t_ok(b->ops->page_release(b, page));
	t_ok(b->ops->free_range(b, va, b->page_size));
	vmm_backend_close(b);
	dlclose(dl);
	return 0;
}
