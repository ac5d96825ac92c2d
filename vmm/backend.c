/* SPDX-License-Identifier: MIT */
/*
 * Backend selection and the small helpers every backend shares: enum
 * strings, open/close, map-with-access, a page copy that bounces through
 * host memory where the backend has no page_copy.
 *
 * AUTO tries cuda first: a node with a driver and a GPU wants device
 * memory.  When cuda cannot open (no libcuda, no device, built without
 * cuda.h) AUTO falls back to host and logs one line with the reason, so an
 * operator never wonders which backend is serving.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/cuda_priv.h"
#include "vmm/vmm.h"

const char *vmm_op_string(enum vmm_op op)
{
	static const char *const names[VMM_OP_COUNT] = {
		[VMM_OP_GRANULARITY] = "granularity",
		[VMM_OP_RESERVE] = "reserve",
		[VMM_OP_FREE_RANGE] = "free_range",
		[VMM_OP_PAGE_CREATE] = "page_create",
		[VMM_OP_PAGE_RELEASE] = "page_release",
		[VMM_OP_PAGE_EXPORT] = "page_export",
		[VMM_OP_PAGE_IMPORT] = "page_import",
		[VMM_OP_MAP] = "map",
		[VMM_OP_UNMAP] = "unmap",
		[VMM_OP_SET_ACCESS] = "set_access",
		[VMM_OP_COPY_TO_HOST] = "copy_to_host",
		[VMM_OP_COPY_FROM_HOST] = "copy_from_host",
		[VMM_OP_PAGE_FD] = "page_fd",
		[VMM_OP_PAGE_ZERO] = "page_zero",
		[VMM_OP_PAGE_FD_READONLY] = "page_fd_readonly",
		[VMM_OP_PAGE_COPY] = "page_copy",
	};

	if ((unsigned int)op >= VMM_OP_COUNT)
		return "unknown";
	return names[op];
}

const char *vmm_backend_kind_string(enum vmm_backend_kind kind)
{
	switch (kind) {
	case VMM_BACKEND_HOST:
		return "host";
	case VMM_BACKEND_CUDA:
		return "cuda";
	case VMM_BACKEND_AUTO:
		return "auto";
	}
	return "unknown";
}

int vmm_backend_open(const struct vmm_config *cfg, struct vmm_backend **out)
{
	struct vmm_config def = { .kind = VMM_BACKEND_AUTO };
	int err;

	if (!out)
		return -EINVAL;
	if (!cfg)
		cfg = &def;
	switch (cfg->kind) {
	case VMM_BACKEND_HOST:
		err = vmm_host_open(cfg, out);
		break;
	case VMM_BACKEND_CUDA:
		err = vmm_cuda_open(cfg, out);
		break;
	case VMM_BACKEND_AUTO: {
		char why[256] = "";

		err = vmm_cuda_open_why(cfg, out, why, sizeof(why));
		if (!err)
			break;
		vmm_log(VMM_LOG_INFO,
			"vmm: backend auto: cuda unavailable (%s), using host",
			why[0] ? why : strerror(-err));
		err = vmm_host_open(cfg, out);
		break;
	}
	default:
		return -EINVAL;
	}
	if (!err)
		vmm_log(VMM_LOG_DEBUG, "vmm: backend %s on %s, page %zu bytes",
			(*out)->ops->name, (*out)->device_name,
			(*out)->page_size);
	return err;
}

void vmm_backend_close(struct vmm_backend *b)
{
	if (b)
		b->ops->destroy(b);
}

int vmm_map_page(struct vmm_backend *b, uint64_t va, vmm_handle_t page,
		 int prot)
{
	int err = b->ops->map(b, va, page);

	if (err)
		return err;
	err = b->ops->set_access(b, va, b->page_size, prot);
	if (err)
		b->ops->unmap(b, va);
	return err;
}

int vmm_page_copy(struct vmm_backend *b, vmm_handle_t dst, vmm_handle_t src)
{
	void *buf;
	int err = -EOPNOTSUPP;

	if (dst == src)
		return -EINVAL;
	if (b->ops->page_copy)
		err = b->ops->page_copy(b, dst, src);
	if (err != -EOPNOTSUPP)
		return err;
	buf = malloc(b->page_size);
	if (!buf)
		return -ENOMEM;
	err = b->ops->copy_to_host(b, buf, src, 0, b->page_size);
	if (!err)
		err = b->ops->copy_from_host(b, dst, 0, buf, b->page_size);
	free(buf);
	return err;
}

void vmm_backend_get_usage(struct vmm_backend *b, struct vmm_backend_usage *u)
{
	memset(u, 0, sizeof(*u));
	if (b && b->ops->usage)
		b->ops->usage(b, u);
}
