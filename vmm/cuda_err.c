/* SPDX-License-Identifier: MIT */
/*
 * The one place a CUresult becomes an errno.  Every driver call in
 * vmm/cuda.c and vmm/cuda_open.c goes through vmm_cuda_result_to_errno(),
 * which logs the call, the raw code and the driver's own name for it, so
 * an operator can look the code up while the rest of kvmm only ever sees
 * 0 / -errno.
 *
 * The table uses the numeric codes so it builds (and is tested) without
 * cuda.h; with cuda.h every number is checked against the header's enum at
 * compile time.
 */
#include <errno.h>
#include <stddef.h>

#include "vmm/cuda_priv.h"
#include "vmm/vmm.h"

#if HAVE_CUDA_H
#include <cuda.h>
#endif

#define CUDA_ERRNO_TABLE(X)                                        \
	X(CUDA_SUCCESS, 0, 0)                                      \
	X(CUDA_ERROR_INVALID_VALUE, 1, -EINVAL)                    \
	X(CUDA_ERROR_OUT_OF_MEMORY, 2, -ENOMEM)                    \
	X(CUDA_ERROR_NOT_INITIALIZED, 3, -ENODEV)                  \
	X(CUDA_ERROR_DEINITIALIZED, 4, -ENODEV)                    \
	X(CUDA_ERROR_STUB_LIBRARY, 34, -ENODEV)                    \
	X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, 36, -ENOSYS)      \
	X(CUDA_ERROR_DEVICE_UNAVAILABLE, 46, -EBUSY)               \
	X(CUDA_ERROR_NO_DEVICE, 100, -ENODEV)                      \
	X(CUDA_ERROR_INVALID_DEVICE, 101, -ENODEV)                 \
	X(CUDA_ERROR_DEVICE_NOT_LICENSED, 102, -EPERM)             \
	X(CUDA_ERROR_INVALID_CONTEXT, 201, -EINVAL)                \
	X(CUDA_ERROR_MAP_FAILED, 205, -ENOMEM)                     \
	X(CUDA_ERROR_UNMAP_FAILED, 206, -EIO)                      \
	X(CUDA_ERROR_ALREADY_MAPPED, 208, -EBUSY)                  \
	X(CUDA_ERROR_ALREADY_ACQUIRED, 210, -EBUSY)                \
	X(CUDA_ERROR_NOT_MAPPED, 211, -ENOENT)                     \
	X(CUDA_ERROR_ECC_UNCORRECTABLE, 214, -EIO)                 \
	X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, 216, -EBUSY)          \
	X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 217, -ENOTSUP)       \
	X(CUDA_ERROR_FILE_NOT_FOUND, 301, -ENOENT)                 \
	X(CUDA_ERROR_OPERATING_SYSTEM, 304, -EIO)                  \
	X(CUDA_ERROR_INVALID_HANDLE, 400, -EBADF)                  \
	X(CUDA_ERROR_ILLEGAL_STATE, 401, -EINVAL)                  \
	X(CUDA_ERROR_NOT_FOUND, 500, -ENOENT)                      \
	X(CUDA_ERROR_NOT_READY, 600, -EAGAIN)                      \
	X(CUDA_ERROR_ILLEGAL_ADDRESS, 700, -EFAULT)                \
	X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701, -EAGAIN)        \
	X(CUDA_ERROR_LAUNCH_TIMEOUT, 702, -ETIMEDOUT)              \
	X(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709, -ENODEV)           \
	X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712, -EEXIST) \
	X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713, -ENOENT)     \
	X(CUDA_ERROR_LAUNCH_FAILED, 719, -EIO)                     \
	X(CUDA_ERROR_NOT_PERMITTED, 800, -EPERM)                   \
	X(CUDA_ERROR_NOT_SUPPORTED, 801, -ENOTSUP)                 \
	X(CUDA_ERROR_SYSTEM_NOT_READY, 802, -EAGAIN)               \
	X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803, -ENODEV)         \
	X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804, -ENODEV) \
	X(CUDA_ERROR_TIMEOUT, 909, -ETIMEDOUT)                     \
	X(CUDA_ERROR_UNKNOWN, 999, -EIO)

#if HAVE_CUDA_H
#define CHECK_CODE(name, num, err) \
	_Static_assert(name == num, #name " changed value in cuda.h");
CUDA_ERRNO_TABLE(CHECK_CODE)
#endif

static const struct {
	int code;
	int err;
	const char *name;
} errno_table[] = {
#define ENTRY(name, num, err) { num, err, #name },
	CUDA_ERRNO_TABLE(ENTRY)
#undef ENTRY
};

/* Set by vmm/cuda_open.c once libcuda is loaded; NULL before. */
vmm_cuda_error_name_fn vmm_cuda_error_name;

const char *vmm_cuda_result_name(int result)
{
	for (size_t i = 0; i < sizeof(errno_table) / sizeof(errno_table[0]);
	     i++)
		if (errno_table[i].code == result)
			return errno_table[i].name;
	return "unknown";
}

int vmm_cuda_result_to_errno(int result, const char *call)
{
	return vmm_cuda_result_to_errno_level(result, call, VMM_LOG_ERR);
}

int vmm_cuda_result_to_errno_level(int result, const char *call, int level)
{
	const char *name = NULL;
	int err = -EIO;

	for (size_t i = 0; i < sizeof(errno_table) / sizeof(errno_table[0]);
	     i++) {
		if (errno_table[i].code == result) {
			err = errno_table[i].err;
			name = errno_table[i].name;
			break;
		}
	}
	if (result == 0)
		return 0;
	if (vmm_cuda_error_name) {
		const char *driver_name = NULL;

		if (vmm_cuda_error_name(result, &driver_name) == 0 &&
		    driver_name)
			name = driver_name;
	}
	vmm_log((enum vmm_log_level)level,
		"vmm cuda: %s failed: CUresult %d (%s) -> %d",
		call ? call : "driver call", result, name ? name : "unknown",
		err);
	return err;
}
