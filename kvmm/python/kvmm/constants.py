# SPDX-License-Identifier: MIT
"""The values of the C headers the binding passes or compares:
kvmm/include/kvmm/uapi.h (block actions, pin and prefix flags),
vmm/vmm.h (backends), and the limits its argument checks use."""

# kvmm/include/kvmm/uapi.h
BLOCK_GPU_SHARED = 1
BLOCK_RELOADED_HOST = 2
BLOCK_RELOADED_NVME = 3
BLOCK_RECOMPUTE = 4
PIN_F_TTL = 0x1
PIN_F_PRIORITY = 0x2
PIN_F_PRIORITY_ONLY = 0x4
PIN_F_DEMOTE = 0x8
PREFIX_MAX_BLOCKS = 4096
PREFIX_OPEN_SEGMENTS = 0x2  # kvmm_prefix_opts.flags (ABI 1.6)
PREFIX_OPEN_EARLY = 0x4  # kvmm_prefix_opts.flags (ABI 1.8)
WAIT_READY_POLL = 0x1  # kvmm_seq_wait_ready() flags (ABI 1.8)
# vmm/vmm.h enum vmm_backend_kind
BACKEND_HOST = 0
BACKEND_CUDA = 1
_BACKEND_NAMES = {BACKEND_HOST: "host", BACKEND_CUDA: "cuda"}
# struct kvmm_hello.name: 32 bytes, NUL padded
_NAME_MAX = 31

_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1
