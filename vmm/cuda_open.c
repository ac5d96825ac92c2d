/* SPDX-License-Identifier: MIT */
/*
 * The cuda backend's life: libcuda loaded, the device the config names
 * picked, the backend opened (its primary context, stream, scratch range
 * and page size) and torn down again.  What an open backend does is
 * vmm/cuda.c's (its ops table, vmm_cuda_ops).
 *
 * libcuda is loaded with dlopen (cfg->libcuda_path or "libcuda.so.1") and
 * every entry point comes from cuGetProcAddress, so nothing links against
 * libcuda and a machine without a driver just fails vmm_cuda_open with
 * -ENODEV, with the reason (vmm_cuda_open_why()); vmm_cuda_open() logs it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vmm/cuda_priv.h"
#include "vmm/track.h"
#include "vmm/vmm.h"

#if HAVE_CUDA_H
#include "vmm/cuda_backend.h"

/* The driver ABI version we ask cuGetProcAddress for: 12.0 gives the _v2
 * entry points that cuda.h's macros name. */
#define KVMM_CUDA_API_VERSION 12000

/* The loaded cuGetErrorName for cuda_err.c's logging. */
static __typeof__(&cuGetErrorName) error_name_pfn;

static int error_name_wrapper(int result, const char **name)
{
	return error_name_pfn ? (int)error_name_pfn((CUresult)result, name) :
				-1;
}

/* Undo whatever vmm_cuda_open got as far as; fields not set are zero. */
void vmm_cuda_teardown(struct cuda_backend *c)
{
	struct vmm_backend_usage u;

	if (c->ctx && !cuda_ctx_enter(c)) {
		if (c->scratch)
			CUCHECK(c->api.p_cuMemAddressFree(
					c->scratch, 2 * c->base.page_size),
				"cuMemAddressFree");
		if (c->stream)
			CUCHECK(c->api.p_cuStreamDestroy(c->stream),
				"cuStreamDestroy");
		cuda_ctx_leave(c);
	}
	if (c->ctx)
		CUCHECK(c->api.p_cuDevicePrimaryCtxRelease(c->dev),
			"cuDevicePrimaryCtxRelease");
	vmm_track_usage(&c->track, &u);
	if (u.pages || u.ranges || u.mappings)
		vmm_log(VMM_LOG_WARN,
			"vmm cuda: closing with %llu pages, %llu ranges, %llu mappings still held",
			(unsigned long long)u.pages,
			(unsigned long long)u.ranges,
			(unsigned long long)u.mappings);
	vmm_track_fini(&c->track);
	pthread_mutex_destroy(&c->lock);
	/* libcuda stays loaded: unloading a driver library under threads it
	 * started is not safe, and the process reuses it on the next open. */
	free(c);
}

typedef CUresult (*get_proc_v2_fn)(const char *, void **, int, cuuint64_t,
				   CUdriverProcAddressQueryResult *);
typedef CUresult (*get_proc_v1_fn)(const char *, void **, int, cuuint64_t);

static int load_api(struct cuda_api *api, const char *path, char *why,
		    size_t why_len)
{
	get_proc_v2_fn get_v2;
	get_proc_v1_fn get_v1 = NULL;
	void *sym;

	dlerror();
	api->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!api->dl) {
		snprintf(why, why_len, "cannot load %s: %s", path, dlerror());
		return -ENODEV;
	}
	sym = dlsym(api->dl, "cuGetProcAddress_v2");
	memcpy(&get_v2, &sym, sizeof(sym));
	if (!get_v2) {
		sym = dlsym(api->dl, "cuGetProcAddress");
		memcpy(&get_v1, &sym, sizeof(sym));
	}
	if (!get_v2 && !get_v1) {
		snprintf(
			why, why_len,
			"%s has no cuGetProcAddress (driver older than CUDA 11.3)",
			path);
		goto err_close;
	}
#define LOOKUP(name)                                                           \
	{                                                                      \
		void *fn = NULL;                                               \
		CUdriverProcAddressQueryResult st =                            \
			CU_GET_PROC_ADDRESS_SUCCESS;                           \
		CUresult r =                                                   \
			get_v2 ? get_v2(#name, &fn, KVMM_CUDA_API_VERSION,     \
					CU_GET_PROC_ADDRESS_DEFAULT, &st) :    \
				 get_v1(#name, &fn, KVMM_CUDA_API_VERSION,     \
					CU_GET_PROC_ADDRESS_DEFAULT);          \
		if (r != CUDA_SUCCESS || !fn ||                                \
		    st != CU_GET_PROC_ADDRESS_SUCCESS) {                       \
			r = r ? r : CUDA_ERROR_NOT_FOUND;                      \
			vmm_cuda_result_to_errno_level(                        \
				(int)r, "cuGetProcAddress(" #name ")",         \
				VMM_LOG_DEBUG);                                \
			snprintf(why, why_len,                                 \
				 "%s: cuGetProcAddress(%s): CUresult %d (%s)", \
				 path, #name, (int)r,                          \
				 vmm_cuda_result_name((int)r));                \
			goto err_close;                                        \
		}                                                              \
		memcpy(&api->p_##name, &fn, sizeof(fn));                       \
	}
	CUDA_FUNCS(LOOKUP)
#undef LOOKUP
	return 0;

err_close:
	dlclose(api->dl);
	memset(api, 0, sizeof(*api));
	return -ENODEV;
}

static void format_uuid(const CUuuid *u, char *buf, size_t len)
{
	const unsigned char *b = (const unsigned char *)u->bytes;

	snprintf(
		buf, len,
		"GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* The device cfg names, by UUID ("GPU-..." or without the prefix) or by
 * ordinal. */
static int pick_device(struct cuda_backend *c, const struct vmm_config *cfg,
		       char *uuid, size_t uuid_len, char *why, size_t why_len)
{
	const char *want = cfg->gpu_uuid;
	int count = 0, err;

	CUresult r = c->api.p_cuDeviceGetCount(&count);

	err = vmm_cuda_result_to_errno_level((int)r, "cuDeviceGetCount",
					     VMM_LOG_DEBUG);
	if (err || count <= 0) {
		snprintf(why, why_len, "no CUDA device (CUresult %d, %s)",
			 (int)r, vmm_cuda_result_name((int)r));
		return -ENODEV;
	}
	if (!strncasecmp(want, "GPU-", 4))
		want += 4;
	for (int i = 0; i < count; i++) {
		CUdevice dev;
		CUuuid u;

		if (!want[0] && i != cfg->cuda_device)
			continue;
		if (CUCHECK(c->api.p_cuDeviceGet(&dev, i), "cuDeviceGet") ||
		    CUCHECK(c->api.p_cuDeviceGetUuid(&u, dev),
			    "cuDeviceGetUuid"))
			continue;
		format_uuid(&u, uuid, uuid_len);
		if (want[0] && strcasecmp(uuid + 4, want))
			continue;
		c->dev = dev;
		memcpy(c->base.gpu_uuid, u.bytes, sizeof(c->base.gpu_uuid));
		return 0;
	}
	if (want[0])
		snprintf(why, why_len, "no device with UUID %s among %d",
			 cfg->gpu_uuid, count);
	else
		snprintf(why, why_len,
			 "device ordinal %d out of range (%d devices)",
			 cfg->cuda_device, count);
	return -ENODEV;
}

int vmm_cuda_open_why(const struct vmm_config *cfg, struct vmm_backend **out,
		      char *why, size_t why_len)
{
	struct vmm_config def = { .kind = VMM_BACKEND_CUDA };
	const char *path;
	struct cuda_backend *c;
	char name[72] = "", uuid[48] = "";
	size_t gran = 0;
	bool bad_size = false;
	int err;

	if (!out)
		return -EINVAL;
	if (!cfg)
		cfg = &def;
	path = cfg->libcuda_path ? cfg->libcuda_path : "libcuda.so.1";
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	err = load_api(&c->api, path, why, why_len);
	if (err)
		goto err_free;
	error_name_pfn = c->api.p_cuGetErrorName;
	vmm_cuda_error_name = error_name_wrapper;

	{
		CUresult r = c->api.p_cuInit(0);

		if (vmm_cuda_result_to_errno_level((int)r, "cuInit",
						   VMM_LOG_DEBUG)) {
			snprintf(why, why_len, "cuInit in %s: CUresult %d (%s)",
				 path, (int)r, vmm_cuda_result_name((int)r));
			err = -ENODEV;
			goto err_free;
		}
	}
	err = pick_device(c, cfg, uuid, sizeof(uuid), why, why_len);
	if (err)
		goto err_free;
	CUCHECK(c->api.p_cuDeviceGetName(name, sizeof(name), c->dev),
		"cuDeviceGetName");
	/* only where the host tier's slab goes depends on it: a failure
	 * leaves it empty (the CPU's node) */
	if (vmm_cuda_result_to_errno_level((int)c->api.p_cuDeviceGetPCIBusId(
						   c->base.pci_bus_id,
						   sizeof(c->base.pci_bus_id),
						   c->dev),
					   "cuDeviceGetPCIBusId", VMM_LOG_WARN))
		c->base.pci_bus_id[0] = '\0';
	err = CUCHECK(c->api.p_cuDevicePrimaryCtxRetain(&c->ctx, c->dev),
		      "cuDevicePrimaryCtxRetain");
	if (err)
		goto err_free;

	c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	c->prop.location.id = c->dev;
	c->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	c->access_rw.location = c->prop.location;
	c->access_rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	c->access_ro.location = c->prop.location;
	c->access_ro.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
	c->access_none.location = c->prop.location;
	c->access_none.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;

	err = cuda_ctx_enter(c);
	if (err)
		goto err_teardown;
	err = CUCHECK(c->api.p_cuMemGetAllocationGranularity(
			      &gran, &c->prop,
			      CU_MEM_ALLOC_GRANULARITY_MINIMUM),
		      "cuMemGetAllocationGranularity");
	if (!err && (gran == 0 || (cfg->page_size && cfg->page_size % gran))) {
		snprintf(
			why, why_len,
			"page size %zu is not a multiple of the granularity %zu",
			cfg->page_size, gran);
		err = -EINVAL;
		bad_size = true;
	} else if (!err && (cfg->page_size & (cfg->page_size - 1))) {
		/* Every reservation is aligned to the page size (the
		 * tracking checks addresses against it), and
		 * cuMemAddressReserve takes only a power of two. */
		snprintf(
			why, why_len,
			"page size %zu is not a power of two (the GPU aligns reservations to powers of two only)",
			cfg->page_size);
		err = -EINVAL;
		bad_size = true;
	}
	if (bad_size) {
		vmm_log(VMM_LOG_ERR, "vmm cuda: %s", why);
		cuda_ctx_leave(c);
		goto err_teardown_why;
	}
	if (!err) {
		c->base.page_size = cfg->page_size ? cfg->page_size : gran;
		err = CUCHECK(c->api.p_cuStreamCreate(&c->stream,
						      CU_STREAM_NON_BLOCKING),
			      "cuStreamCreate");
	}
	if (!err)
		err = CUCHECK(c->api.p_cuMemAddressReserve(
				      &c->scratch, 2 * c->base.page_size,
				      c->base.page_size, 0, 0),
			      "cuMemAddressReserve");
	cuda_ctx_leave(c);
	if (err)
		goto err_teardown;

	c->base.ops = &vmm_cuda_ops;
	c->base.kind = VMM_BACKEND_CUDA;
	c->base.priv = c;
	snprintf(c->base.device_name, sizeof(c->base.device_name), "%s %s",
		 name, uuid);
	vmm_track_init(&c->track, c->base.page_size);
	{
		int drv = 0;

		c->api.p_cuDriverGetVersion(&drv);
		vmm_log(VMM_LOG_INFO,
			"vmm cuda: %s, driver API %d.%d, page %zu bytes",
			c->base.device_name, drv / 1000, drv % 1000 / 10,
			c->base.page_size);
	}
	*out = &c->base;
	return 0;

err_teardown:
	snprintf(why, why_len, "device setup failed: %s", strerror(-err));
err_teardown_why:
	vmm_cuda_teardown(c);
	return err;
err_free:
	pthread_mutex_destroy(&c->lock);
	free(c);
	return err;
}

#else /* !HAVE_CUDA_H */

int vmm_cuda_open_why(const struct vmm_config *cfg, struct vmm_backend **out,
		      char *why, size_t why_len)
{
	snprintf(why, why_len, "built without cuda.h");
	return -ENOTSUP;
}

#endif

int vmm_cuda_open(const struct vmm_config *cfg, struct vmm_backend **out)
{
	char why[256] = "";
	int err = vmm_cuda_open_why(cfg, out, why, sizeof(why));

	if (err)
		vmm_log(VMM_LOG_INFO, "vmm cuda: unavailable: %s", why);
	return err;
}
