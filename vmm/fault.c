/* SPDX-License-Identifier: MIT */
/*
 * Fault injector: a backend that forwards every call to an inner backend,
 * except the armed nth call of one or more operations, which returns the
 * armed errno without reaching the inner backend.  Tests arm each
 * operation at each call number a scenario makes and check that the
 * scenario unwinds with nothing leaked (SQLite's test_malloc idea applied
 * to the vmm vtable).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/vmm.h"

struct fault_arm {
	unsigned int nth; /* 0 = disarmed */
	unsigned int count; /* calls nth .. nth + count - 1 fail */
	int err;
	unsigned int calls;
};

struct fault_backend {
	struct vmm_backend base;
	struct vmm_backend *inner;
	struct fault_arm arm[VMM_OP_COUNT];
};

static struct fault_backend *to_fault(struct vmm_backend *b)
{
	return (struct fault_backend *)b;
}

/* Count the call; nonzero when this one must fail. */
static int fault_hit(struct vmm_backend *b, enum vmm_op op)
{
	struct fault_arm *a = &to_fault(b)->arm[op];

	a->calls++;
	if (a->nth && a->calls >= a->nth && a->calls - a->nth < a->count) {
		vmm_log(VMM_LOG_DEBUG, "vmm fault: %s call %u fails with %d",
			vmm_op_string(op), a->calls, a->err);
		return a->err;
	}
	return 0;
}

#define INNER(b) (to_fault(b)->inner)

static int fault_granularity(struct vmm_backend *b, size_t *page_size)
{
	int err = fault_hit(b, VMM_OP_GRANULARITY);

	return err ? err : INNER(b)->ops->granularity(INNER(b), page_size);
}

static int fault_reserve(struct vmm_backend *b, size_t size, uint64_t *va)
{
	int err = fault_hit(b, VMM_OP_RESERVE);

	return err ? err : INNER(b)->ops->reserve(INNER(b), size, va);
}

static int fault_free_range(struct vmm_backend *b, uint64_t va, size_t size)
{
	int err = fault_hit(b, VMM_OP_FREE_RANGE);

	return err ? err : INNER(b)->ops->free_range(INNER(b), va, size);
}

static int fault_page_create(struct vmm_backend *b, vmm_handle_t *page)
{
	int err = fault_hit(b, VMM_OP_PAGE_CREATE);

	return err ? err : INNER(b)->ops->page_create(INNER(b), page);
}

static int fault_page_release(struct vmm_backend *b, vmm_handle_t page)
{
	int err = fault_hit(b, VMM_OP_PAGE_RELEASE);

	return err ? err : INNER(b)->ops->page_release(INNER(b), page);
}

static int fault_page_export(struct vmm_backend *b, vmm_handle_t page, int *fd)
{
	int err = fault_hit(b, VMM_OP_PAGE_EXPORT);

	return err ? err : INNER(b)->ops->page_export(INNER(b), page, fd);
}

/* Counted and injectable like the required ops: the pool's page creation
 * calls it, and its failure must unwind too.  An inner backend without it
 * answers -EOPNOTSUPP, as a backend whose handle is not an fd would. */
static int fault_page_fd(struct vmm_backend *b, vmm_handle_t page, int *fd)
{
	int err = fault_hit(b, VMM_OP_PAGE_FD);

	if (err)
		return err;
	if (!INNER(b)->ops->page_fd)
		return -EOPNOTSUPP;
	return INNER(b)->ops->page_fd(INNER(b), page, fd);
}

static int fault_page_import(struct vmm_backend *b, int fd, vmm_handle_t *page)
{
	int err = fault_hit(b, VMM_OP_PAGE_IMPORT);

	return err ? err : INNER(b)->ops->page_import(INNER(b), fd, page);
}

static int fault_map(struct vmm_backend *b, uint64_t va, vmm_handle_t page)
{
	int err = fault_hit(b, VMM_OP_MAP);

	return err ? err : INNER(b)->ops->map(INNER(b), va, page);
}

static int fault_unmap(struct vmm_backend *b, uint64_t va)
{
	int err = fault_hit(b, VMM_OP_UNMAP);

	return err ? err : INNER(b)->ops->unmap(INNER(b), va);
}

static int fault_set_access(struct vmm_backend *b, uint64_t va, size_t size,
			    int prot)
{
	int err = fault_hit(b, VMM_OP_SET_ACCESS);

	return err ? err : INNER(b)->ops->set_access(INNER(b), va, size, prot);
}

static int fault_copy_to_host(struct vmm_backend *b, void *dst,
			      vmm_handle_t page, size_t offset, size_t len)
{
	int err = fault_hit(b, VMM_OP_COPY_TO_HOST);

	return err ? err :
		     INNER(b)->ops->copy_to_host(INNER(b), dst, page, offset,
						 len);
}

static int fault_copy_from_host(struct vmm_backend *b, vmm_handle_t page,
				size_t offset, const void *src, size_t len)
{
	int err = fault_hit(b, VMM_OP_COPY_FROM_HOST);

	return err ? err :
		     INNER(b)->ops->copy_from_host(INNER(b), page, offset, src,
						   len);
}

static int fault_usage(struct vmm_backend *b, struct vmm_backend_usage *u)
{
	vmm_backend_get_usage(INNER(b), u);
	return 0;
}

static int fault_copy_va_to_host_async(struct vmm_backend *b, void *dst,
				       uint64_t va, size_t len)
{
	if (!INNER(b)->ops->copy_va_to_host_async)
		return -ENOTSUP;
	return INNER(b)->ops->copy_va_to_host_async(INNER(b), dst, va, len);
}

static int fault_copy_host_to_va_async(struct vmm_backend *b, uint64_t va,
				       const void *src, size_t len)
{
	if (!INNER(b)->ops->copy_host_to_va_async)
		return -ENOTSUP;
	return INNER(b)->ops->copy_host_to_va_async(INNER(b), va, src, len);
}

static int fault_synchronize(struct vmm_backend *b)
{
	if (!INNER(b)->ops->synchronize)
		return -ENOTSUP;
	return INNER(b)->ops->synchronize(INNER(b));
}

static int fault_host_register(struct vmm_backend *b, void *ptr, size_t len)
{
	if (!INNER(b)->ops->host_register)
		return -ENOTSUP;
	return INNER(b)->ops->host_register(INNER(b), ptr, len);
}

static int fault_host_unregister(struct vmm_backend *b, void *ptr)
{
	if (!INNER(b)->ops->host_unregister)
		return -ENOTSUP;
	return INNER(b)->ops->host_unregister(INNER(b), ptr);
}

static int fault_page_zero(struct vmm_backend *b, vmm_handle_t page)
{
	int err = fault_hit(b, VMM_OP_PAGE_ZERO);

	if (err)
		return err;
	if (!INNER(b)->ops->page_zero)
		return -ENOTSUP;
	return INNER(b)->ops->page_zero(INNER(b), page);
}

static int fault_page_fd_readonly(struct vmm_backend *b, vmm_handle_t page,
				  int *fd)
{
	int err = fault_hit(b, VMM_OP_PAGE_FD_READONLY);

	if (err)
		return err;
	if (!INNER(b)->ops->page_fd_readonly)
		return -EOPNOTSUPP;
	return INNER(b)->ops->page_fd_readonly(INNER(b), page, fd);
}

static int fault_page_copy(struct vmm_backend *b, vmm_handle_t dst,
			   vmm_handle_t src)
{
	int err = fault_hit(b, VMM_OP_PAGE_COPY);

	if (err)
		return err;
	if (!INNER(b)->ops->page_copy)
		return -EOPNOTSUPP;
	return INNER(b)->ops->page_copy(INNER(b), dst, src);
}

static void fault_destroy(struct vmm_backend *b)
{
	vmm_backend_close(INNER(b));
	free(to_fault(b));
}

static const struct vmm_ops fault_ops = {
	.name = "fault",
	.granularity = fault_granularity,
	.reserve = fault_reserve,
	.free_range = fault_free_range,
	.page_create = fault_page_create,
	.page_release = fault_page_release,
	.page_export = fault_page_export,
	.page_import = fault_page_import,
	.map = fault_map,
	.unmap = fault_unmap,
	.set_access = fault_set_access,
	.copy_to_host = fault_copy_to_host,
	.copy_from_host = fault_copy_from_host,
	.destroy = fault_destroy,
	.page_fd = fault_page_fd,
	.usage = fault_usage,
	.copy_va_to_host_async = fault_copy_va_to_host_async,
	.copy_host_to_va_async = fault_copy_host_to_va_async,
	.synchronize = fault_synchronize,
	.host_register = fault_host_register,
	.host_unregister = fault_host_unregister,
	.page_zero = fault_page_zero,
	.page_fd_readonly = fault_page_fd_readonly,
	.page_copy = fault_page_copy,
};

int vmm_fault_wrap(struct vmm_backend *inner, struct vmm_backend **out)
{
	struct fault_backend *f;

	if (!inner || !out)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->base.ops = &fault_ops;
	f->base.kind = inner->kind;
	f->base.page_size = inner->page_size;
	memcpy(f->base.device_name, inner->device_name,
	       sizeof(f->base.device_name));
	memcpy(f->base.pci_bus_id, inner->pci_bus_id,
	       sizeof(f->base.pci_bus_id));
	memcpy(f->base.gpu_uuid, inner->gpu_uuid, sizeof(f->base.gpu_uuid));
	f->base.priv = f;
	f->inner = inner;
	*out = &f->base;
	return 0;
}

static bool is_fault(struct vmm_backend *b)
{
	return b && b->ops == &fault_ops;
}

void vmm_fault_arm_count(struct vmm_backend *wrapped, enum vmm_op op,
			 unsigned int nth, unsigned int count, int err)
{
	struct fault_arm *a;

	if (!is_fault(wrapped) || (unsigned int)op >= VMM_OP_COUNT)
		return;
	a = &to_fault(wrapped)->arm[op];
	a->nth = count ? nth : 0;
	a->count = count;
	a->err = err < 0 ? err : -EIO;
	a->calls = 0;
}

void vmm_fault_arm(struct vmm_backend *wrapped, enum vmm_op op,
		   unsigned int nth, int err)
{
	vmm_fault_arm_count(wrapped, op, nth, 1, err);
}

unsigned int vmm_fault_calls(struct vmm_backend *wrapped, enum vmm_op op)
{
	if (!is_fault(wrapped) || (unsigned int)op >= VMM_OP_COUNT)
		return 0;
	return to_fault(wrapped)->arm[op].calls;
}
