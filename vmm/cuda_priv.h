/* SPDX-License-Identifier: MIT */
/* Shared between vmm/cuda.c, vmm/cuda_open.c and vmm/cuda_err.c; no
 * cuda.h here (vmm/cuda_backend.h has what needs it). */
#ifndef KVMM_VMM_CUDA_PRIV_H
#define KVMM_VMM_CUDA_PRIV_H

/* cuGetErrorName with the CUresult as int, so cuda_err.c needs no cuda.h. */
typedef int (*vmm_cuda_error_name_fn)(int result, const char **name);
extern vmm_cuda_error_name_fn vmm_cuda_error_name;

/* vmm_cuda_result_to_errno, logging at level: open() probes log at INFO
 * so a machine without a GPU does not print errors. */
int vmm_cuda_result_to_errno_level(int result, const char *call, int level);

/* The table's name for a CUresult ("CUDA_ERROR_NO_DEVICE"), "unknown" when
 * it has none. */
const char *vmm_cuda_result_name(int result);

/* vmm_cuda_open without the log line: the reason it failed goes to why. */
struct vmm_backend;
struct vmm_config;
int vmm_cuda_open_why(const struct vmm_config *cfg, struct vmm_backend **out,
		      char *why, size_t why_len);

#endif
