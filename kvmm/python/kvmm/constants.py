# SPDX-License-Identifier: MIT
"""The values of the C headers the binding passes or compares:
kvmm/include/kvmm/uapi.h (the ABI version, block actions, query tiers,
pin and prefix flags and limits, backends), and the limits its argument
checks use.  tests/python-parity.sh compares each public one with the C
compiler's value."""

# kvmm/include/kvmm/uapi.h: the ABI these mirrors follow (a daemon says
# its own in Connection.daemon_info()["abi_minor"])
ABI_MAJOR = 1
ABI_MINOR = 25
# enum kvmm_block_action: a prefix open's restore plan, one a block
BLOCK_GPU_SHARED = 1
BLOCK_RELOADED_HOST = 2
BLOCK_RELOADED_NVME = 3
BLOCK_RECOMPUTE = 4
# enum kvmm_query_tier: Region.query_prefix()'s answer, one a block; a
# pin's tier (PinInfo.tier, pin_many()'s results) is 0..2 of the same
QUERY_GPU = 0
QUERY_HOST = 1
QUERY_NVME = 2
QUERY_MOVING = 3
PIN_F_TTL = 0x1
PIN_F_PRIORITY = 0x2
PIN_F_PRIORITY_ONLY = 0x4
PIN_F_DEMOTE = 0x8
PIN_TTL_MAX_NS = 24 * 3600 * 1000000000  # longer: ERANGE
PIN_MANY_MAX = 4096  # hashes of one pin_many()
PREFIX_MAX_BLOCKS = 4096
PREFIX_OPEN_SEGMENTS = 0x2  # kvmm_prefix_opts.flags (ABI 1.6)
PREFIX_OPEN_EARLY = 0x4  # kvmm_prefix_opts.flags (ABI 1.8)
WAIT_READY_POLL = 0x1  # kvmm_seq_wait_ready() flags (ABI 1.8)
TIER_STATS_SIZES = 4  # block sizes one tier_stats() lists at most
# KVMM_BACKEND_* (vmm/vmm.h's enum vmm_backend_kind)
BACKEND_HOST = 0
BACKEND_CUDA = 1
_BACKEND_NAMES = {BACKEND_HOST: "host", BACKEND_CUDA: "cuda"}
# struct kvmm_hello.name: 32 bytes, NUL padded
_NAME_MAX = 31

_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1
