# SPDX-License-Identifier: MIT
"""ctypes mirrors of the structs of kvmm/include/kvmm/kvmm.h (and the
two of uapi.h kvmm_tier_stats() fills), field for field:
tests/python-layout.sh compares them, through STRUCTS, with the C
compiler's layout."""

import ctypes


class ConnectOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("socket_path", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("map_ahead_blocks", ctypes.c_uint32),
        ("map_ahead_set", ctypes.c_uint32),
        ("sq_entries", ctypes.c_uint32),
        ("spin_us", ctypes.c_uint32),
    ]


class RegionOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("layers", ctypes.c_uint32),
        ("kv_heads", ctypes.c_uint32),
        ("head_dim", ctypes.c_uint32),
        ("dtype_bytes", ctypes.c_uint32),
        ("max_seqs", ctypes.c_uint32),
        ("max_tokens", ctypes.c_uint32),
        ("salt", ctypes.c_uint64),
    ]


class PrefixOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("actions", ctypes.POINTER(ctypes.c_uint8)),
        ("shared", ctypes.c_uint32),
        ("reloaded_host", ctypes.c_uint32),
        ("reloaded_nvme", ctypes.c_uint32),
        ("recompute", ctypes.c_uint32),
    ]


class PinOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("ttl_ns", ctypes.c_uint64),
        ("priority", ctypes.c_int32),
        ("tier", ctypes.c_uint32),
        ("pins", ctypes.c_uint32),
        ("pin_quota", ctypes.c_uint32),
        ("expires_ns", ctypes.c_uint64),
    ]


class DaemonInfoStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("abi_major", ctypes.c_uint32),
        ("abi_minor", ctypes.c_uint32),
        ("backend", ctypes.c_uint32),
        ("revoke_timeout_ms", ctypes.c_uint32),
        ("page_size", ctypes.c_uint64),
        ("pages_total", ctypes.c_uint64),
        ("quota_pages", ctypes.c_uint64),
        ("gpu_uuid", ctypes.c_uint8 * 16),
    ]


class StatsStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("session_id", ctypes.c_uint32),
        ("backend", ctypes.c_uint32),
        ("page_size", ctypes.c_uint64),
        ("extends", ctypes.c_uint64),
        ("extend_waits", ctypes.c_uint64),
        ("pages_imported", ctypes.c_uint64),
        ("pages_mapped", ctypes.c_uint64),
        ("pages_revoked", ctypes.c_uint64),
        ("map_ahead_blocks", ctypes.c_uint64),
        ("cmds_ring", ctypes.c_uint64),
        ("cmds_socket", ctypes.c_uint64),
        ("pages_held", ctypes.c_uint64),
        ("blocks_lent", ctypes.c_uint64),
        ("extends_lent", ctypes.c_uint64),
        ("map_ahead_backoffs", ctypes.c_uint64),
        ("blocks_lent_on_request", ctypes.c_uint64),
        ("blocks_unshared", ctypes.c_uint64),  # ABI 1.20
    ]


class TierInfoStruct(ctypes.Structure):
    """struct kvmm_tier_info (kvmm/uapi.h): one tier of TIER_STATS."""
    _fields_ = [
        ("capacity_blocks", ctypes.c_uint64),
        ("used_blocks", ctypes.c_uint64),
        ("block_bytes", ctypes.c_uint64),
        ("hits", ctypes.c_uint64),
        ("demotions_in", ctypes.c_uint64),
        ("promotions_out", ctypes.c_uint64),
        ("drops", ctypes.c_uint64),
        ("bytes_in", ctypes.c_uint64),
        ("bytes_out", ctypes.c_uint64),
        ("restore_ns", ctypes.c_uint64),
        ("restore_max_ns", ctypes.c_uint64),
        ("promotions_by_publish", ctypes.c_uint64),
    ]


class TierStatsStruct(ctypes.Structure):
    """struct kvmm_tier_stats_reply (kvmm/uapi.h), as kvmm_tier_stats()
    fills it: the fields a daemon's shorter reply lacks read 0, size says
    where its bytes end."""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("nr_tiers", ctypes.c_uint32),
        ("publishes", ctypes.c_uint64),
        ("duplicates", ctypes.c_uint64),
        ("not_cached", ctypes.c_uint64),
        ("prefix_opens", ctypes.c_uint64),
        ("prefix_blocks_asked", ctypes.c_uint64),
        ("prefix_blocks_hit", ctypes.c_uint64),
        ("misses", ctypes.c_uint64),
        ("busy_misses", ctypes.c_uint64),
        ("checksum_failures", ctypes.c_uint64),
        ("recovered_blocks", ctypes.c_uint64),
        ("migrations_failed", ctypes.c_uint64),
        ("migrations_in_flight", ctypes.c_uint64),
        ("slot_waits", ctypes.c_uint64),
        ("nvme_admission_rejects", ctypes.c_uint64),
        ("pressure_reclaims", ctypes.c_uint64),
        ("restores_waited", ctypes.c_uint64),
        ("prefix_opens_pending", ctypes.c_uint64),
        ("restores_cancelled", ctypes.c_uint64),
        ("tiers", TierInfoStruct * 3),
        ("prefix_holes", ctypes.c_uint64),
        ("prefix_blocks_after_hole", ctypes.c_uint64),
        ("plan_recomputes_host", ctypes.c_uint64),
        ("plan_recomputes_nvme", ctypes.c_uint64),
        ("held_copies", ctypes.c_uint64),
        ("early_opens", ctypes.c_uint64),
        ("early_reloads", ctypes.c_uint64),
        ("early_reload_failures", ctypes.c_uint64),
        ("nvme_read_error_drops", ctypes.c_uint64),
        ("cache_open_error", ctypes.c_uint64),
        ("nvme_open_error", ctypes.c_uint64),
        ("quota_reclaims", ctypes.c_uint64),
        ("cache_open_attempts", ctypes.c_uint64),
        ("cache_open_last_error", ctypes.c_uint64),
        ("cache_open_retry_ms", ctypes.c_uint64),
        ("lower_free_refused", ctypes.c_uint64),
        ("nvme_invalidate_jobs", ctypes.c_uint64),
        ("nvme_invalidated_blocks", ctypes.c_uint64),
        ("nvme_invalidate_failures", ctypes.c_uint64),
        ("nvme_open_attempts", ctypes.c_uint64),
        ("nvme_open_last_error", ctypes.c_uint64),
        ("nvme_open_retry_ms", ctypes.c_uint64),
        ("nvme_write_returns", ctypes.c_uint64),
        ("nvme_write_outs", ctypes.c_uint64),
        ("nvme_write_error", ctypes.c_uint64),
        ("nvme_write_retry_ms", ctypes.c_uint64),
        ("blocks_unshared", ctypes.c_uint64),  # ABI 1.20
        ("block_pages", ctypes.c_uint32),  # ABI 1.21
        ("nr_sizes", ctypes.c_uint32),
        ("sizes", ctypes.c_uint32 * 4),
        ("nvme_restamped", ctypes.c_uint64),  # ABI 1.23
        ("nvme_restamp_failures", ctypes.c_uint64),
        ("cold_blocks", ctypes.c_uint64),  # ABI 1.24
        ("cold_admitted", ctypes.c_uint64),
        ("cold_evicted", ctypes.c_uint64),
        ("cold_dropped", ctypes.c_uint64),
        ("weights", ctypes.c_uint32 * 4),  # ABI 1.25
    ]


class HashLayout(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("model", ctypes.c_char_p),
        ("layers", ctypes.c_uint32),
        ("kv_heads", ctypes.c_uint32),
        ("head_dim", ctypes.c_uint32),
        ("dtype_bytes", ctypes.c_uint32),
        ("tokens_per_block", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),  # must be 0
    ]


# C struct name -> mirror, for the layout test.
STRUCTS = {
    "kvmm_connect_opts": ConnectOpts,
    "kvmm_region_opts": RegionOpts,
    "kvmm_prefix_opts": PrefixOpts,
    "kvmm_pin_opts": PinOpts,
    "kvmm_stats": StatsStruct,
    "kvmm_hash_layout": HashLayout,
    "kvmm_daemon_info": DaemonInfoStruct,
    "kvmm_tier_info": TierInfoStruct,
    "kvmm_tier_stats_reply": TierStatsStruct,
}
