/* SPDX-License-Identifier: MIT */
/* placeholder until the cuda backend lands */
#include <errno.h>

#include "vmm/vmm.h"

int vmm_cuda_open(const struct vmm_config *cfg, struct vmm_backend **out)
{
	vmm_log(VMM_LOG_INFO, "vmm cuda: backend not built yet");
	return -ENODEV;
}

int vmm_cuda_result_to_errno(int result, const char *call)
{
	return result ? -EIO : 0;
}
