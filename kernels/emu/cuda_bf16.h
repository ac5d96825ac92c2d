/* SPDX-License-Identifier: MIT */
/* CUDA emulation: see cuda_runtime.h. */
#include "cuda_runtime.h"
