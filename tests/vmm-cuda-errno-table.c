/* SPDX-License-Identifier: MIT */
/*
 * The one CUresult -> errno conversion maps each driver code the vmm layer
 * can meet to the errno callers test for, passes success through as 0 and
 * turns any code it does not know into -EIO (never 0, never positive).
 */
#include "tests/vmm-util.h"
#include "vmm/vmm.h"

static const struct {
	int code, err;
} expect[] = {
	{ 0, 0 }, /* CUDA_SUCCESS */
	{ 1, -EINVAL }, /* INVALID_VALUE */
	{ 2, -ENOMEM }, /* OUT_OF_MEMORY */
	{ 3, -ENODEV }, /* NOT_INITIALIZED */
	{ 4, -ENODEV }, /* DEINITIALIZED */
	{ 34, -ENODEV }, /* STUB_LIBRARY */
	{ 36, -ENOSYS }, /* CALL_REQUIRES_NEWER_DRIVER */
	{ 46, -EBUSY }, /* DEVICE_UNAVAILABLE */
	{ 100, -ENODEV }, /* NO_DEVICE */
	{ 101, -ENODEV }, /* INVALID_DEVICE */
	{ 201, -EINVAL }, /* INVALID_CONTEXT */
	{ 205, -ENOMEM }, /* MAP_FAILED */
	{ 208, -EBUSY }, /* ALREADY_MAPPED */
	{ 211, -ENOENT }, /* NOT_MAPPED */
	{ 304, -EIO }, /* OPERATING_SYSTEM */
	{ 400, -EBADF }, /* INVALID_HANDLE */
	{ 500, -ENOENT }, /* NOT_FOUND */
	{ 600, -EAGAIN }, /* NOT_READY */
	{ 700, -EFAULT }, /* ILLEGAL_ADDRESS */
	{ 712, -EEXIST }, /* HOST_MEMORY_ALREADY_REGISTERED */
	{ 713, -ENOENT }, /* HOST_MEMORY_NOT_REGISTERED */
	{ 800, -EPERM }, /* NOT_PERMITTED */
	{ 801, -ENOTSUP }, /* NOT_SUPPORTED */
	{ 909, -ETIMEDOUT }, /* TIMEOUT */
	{ 999, -EIO }, /* UNKNOWN */
};

int main(void)
{
	vmm_log_set_level(VMM_LOG_ERR);
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		int got = vmm_cuda_result_to_errno(expect[i].code, "test");

		if (got != expect[i].err)
			t_fail("CUresult %d -> %d, expected %d", expect[i].code,
			       got, expect[i].err);
	}
	/* Codes outside the table: an error, never success. */
	t_assert_eq(vmm_cuda_result_to_errno(12345, "test"), -EIO);
	t_assert_eq(vmm_cuda_result_to_errno(-1, NULL), -EIO);
	t_assert_eq(vmm_cuda_result_to_errno(223, "test"), -EIO);
	return 0;
}
