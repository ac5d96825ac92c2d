# SPDX-License-Identifier: MIT
"""kvmm: the Python binding of libkvmm (Documentation/python.md).

A thin layer over the C client API (kvmm/include/kvmm/kvmm.h), with the
standard library only: ctypes calls build/libkvmm.so.1 (or KVMM_LIB, or
the system's), structs are mirrored field for field (tests/python-layout.sh
compares them with the C compiler's layout), and every call checks its
result: a negative errno becomes KvmmError (an OSError carrying that errno
and kvmm_strerror()'s text), so nothing fails silently.

Arguments are checked here only for what C cannot see: a wrong type is a
TypeError, a value that does not fit the C parameter (a negative length, a
hash over 64 bits, a name longer than the daemon keeps) a ValueError, and
a connection or region already closed a ValueError, as for a closed file
(libkvmm has freed it: calling C would use freed memory).  Everything about
the daemon's state (sequence ids, lengths, cached hashes) is left to
libkvmm and comes back as its errno.

On the host backend a sequence's K or V bytes of one layer are offered as
a memoryview over the mapped range: writable over the sequence's own
blocks, read-only over cached blocks a prefix open shared (libkvmm maps
those read-only: a write through a writable view would kill the process
with SIGSEGV; through the read-only one it raises TypeError).  The binding releases such a
view when the range behind it may go away (close, truncate, the end of a
step or revocation processing that shortened the sequence, region destroy,
disconnect): using it then raises ValueError instead of touching unmapped
memory.  Slices of a view and objects built on it (numpy.frombuffer) are
not tracked: drop them by then.  On the cuda backend the pointers are
device addresses (ints, k_ptr()/v_ptr()) for torch or cupy; no view.

close() of a Connection or Region must not race other calls on it (the
C object is freed); other calls may come from several threads at once
(libkvmm locks; ctypes drops the GIL during each call).

Connect after fork: in a child of os.fork() (multiprocessing's fork start
method too) every Connection and Region the parent had is closed at once,
without a call into libkvmm (the session is the parent's; libkvmm would
only answer ECHILD), and using it raises ValueError.  Its C memory is left
to the child's exit.
"""

import array
import contextlib
import ctypes
import ctypes.util
import dataclasses
import errno as _errno
import operator
import os
import sys
import threading
import weakref

__all__ = [
    "KvmmError", "PinQuotaError", "LengthError", "Connection", "Region", "Sequence",
    "PrefixResult", "PinInfo", "Stats", "strerror", "block_action_string",
    "library_path",
    "hash_seed", "block_hash", "hash_chain",
    "BLOCK_GPU_SHARED", "BLOCK_RELOADED_HOST", "BLOCK_RELOADED_NVME",
    "BLOCK_RECOMPUTE", "PIN_F_TTL", "PIN_F_PRIORITY", "PIN_F_PRIORITY_ONLY",
    "PIN_F_DEMOTE", "PREFIX_MAX_BLOCKS", "PREFIX_OPEN_SEGMENTS",
    "PREFIX_OPEN_EARLY", "WAIT_READY_POLL", "Readiness",
    "BACKEND_HOST", "BACKEND_CUDA",
]

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

# 'make install' writes $(LIBDIR)/libkvmm.so.1 here in the installed copy
_INSTALLED_LIB = None

_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1


# ---- struct mirrors (kvmm.h) -----------------------------------------------

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


# ---- finding and binding the library ---------------------------------------

def _candidates():
    """Where to look, in order: (description, path or soname)."""
    env = os.environ.get("KVMM_LIB")
    if env:
        # asked for explicitly: nothing else is tried
        return [("KVMM_LIB", env)]
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.join(os.path.dirname(os.path.dirname(here)), "build",
                         "libkvmm.so.1")
    out = []
    # Each place is tried (and named in the ImportError) even when its
    # file is missing: a library that is not where make install put it
    # is what the message must say.  The build tree only from a source
    # tree's copy, or where an installed copy happens to have one.
    if not _INSTALLED_LIB or os.path.exists(build):
        out.append(("the build tree", build))
    if _INSTALLED_LIB:
        out.append(("make install's LIBDIR", _INSTALLED_LIB))
    found = ctypes.util.find_library("kvmm")
    if found:
        out.append(("the system loader", found))
    out.append(("the system loader", "libkvmm.so.1"))
    return out


def _load():
    tried = []
    for where, path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s): %s" % (path, where, e))
    raise ImportError(
        "kvmm: libkvmm.so.1 not found; set KVMM_LIB to its path, build it "
        "with 'make' next to this module, or install it ('make install'). "
        "Tried: " + "; ".join(tried))


_lib, _lib_path = _load()

_vp = ctypes.c_void_p
_u32 = ctypes.c_uint32
_u64 = ctypes.c_uint64
_int = ctypes.c_int
_P = ctypes.POINTER

# name: (restype, argtypes)
_PROTOS = {
    "kvmm_connect": (_int, [_P(ConnectOpts), _P(_vp)]),
    "kvmm_disconnect": (None, [_vp]),
    "kvmm_region_create": (_int, [_vp, _P(RegionOpts), _P(_vp)]),
    "kvmm_region_destroy": (_int, [_vp]),
    "kvmm_region_tokens_per_block": (_u32, [_vp]),
    "kvmm_seq_open": (_int, [_vp, _P(_u32)]),
    "kvmm_seq_extend": (_int, [_vp, _u32, _u32]),
    "kvmm_seq_truncate": (_int, [_vp, _u32, _u32]),
    "kvmm_seq_close": (_int, [_vp, _u32]),
    "kvmm_seq_len": (ctypes.c_int64, [_vp, _u32]),
    "kvmm_seq_k_ptr": (_u64, [_vp, _u32, _u32]),
    "kvmm_seq_v_ptr": (_u64, [_vp, _u32, _u32]),
    "kvmm_seq_block_pages": (_int, [_vp, _u32, _u32, _P(_u32), _u32]),
    "kvmm_seq_block_readonly": (_int, [_vp, _u32, _u32]),
    "kvmm_seq_block_unshare": (_int, [_vp, _u32, _u32]),
    "kvmm_block_publish": (_int, [_vp, _u32, _u32, _u32, _u64, _P(_u64)]),
    "kvmm_seq_open_prefix": (_int, [_vp, _P(_u64), _u32, _P(_u32),
                                    _P(_u32)]),
    "kvmm_seq_open_prefix_opts": (_int, [_vp, _P(_u64), _u32, _P(_u32),
                                         _P(_u32), _P(PrefixOpts)]),
    "kvmm_block_action_string": (ctypes.c_char_p, [ctypes.c_uint8]),
    "kvmm_prefix_query": (_int, [_vp, _P(_u64), _u32, _P(ctypes.c_uint8),
                                 _u32]),
    "kvmm_query_tier_string": (ctypes.c_char_p, [ctypes.c_uint8]),
    "kvmm_seq_wait_ready": (_int, [_vp, _u32, _u32, _u32, _P(_u32), _u32,
                                   _P(_u32)]),
    "kvmm_block_pin": (_int, [_vp, _u64, _P(PinOpts)]),
    "kvmm_block_unpin": (_int, [_vp, _u64]),
    "kvmm_block_pin_many": (_int, [_vp, _P(_u64), _u32, _P(PinOpts),
                                   _P(ctypes.c_int32)]),
    "kvmm_step_begin": (_int, [_vp]),
    "kvmm_step_end": (_int, [_vp]),
    "kvmm_poll_fd": (_int, [_vp]),
    "kvmm_process_revocations": (_int, [_vp]),
    "kvmm_nop": (_int, [_vp, _int]),
    "kvmm_get_stats": (_int, [_vp, _P(StatsStruct)]),
    "kvmm_get_daemon_info": (_int, [_vp, _P(DaemonInfoStruct)]),
    "kvmm_tier_stats": (_int, [_vp, _P(TierStatsStruct), ctypes.c_size_t]),
    "kvmm_tier_stats_size": (_int, [_vp, _u32, _P(TierStatsStruct),
                                    ctypes.c_size_t]),
    "kvmm_strerror": (ctypes.c_char_p, [_int]),
    "kvmm_hash_seed": (_int, [_P(HashLayout), _P(_u64)]),
    "kvmm_region_hash_seed": (_int, [_vp, ctypes.c_char_p, _P(_u64)]),
    "kvmm_block_hash": (_int, [_u64, _u64, _u64, _P(_u32), ctypes.c_size_t,
                               _P(_u64)]),
    "kvmm_hash_chain": (_int, [_u64, _u64, _P(_u32), ctypes.c_size_t, _u32,
                               _P(_u64), ctypes.c_size_t]),
}


class _Funcs:
    pass


_c = _Funcs()

# Connections open in this process, closed in a forked child before it
# runs anything else (Connection._forget_inherited()).
_live_connections = weakref.WeakSet()


def _after_fork_in_child():
    for conn in list(_live_connections):
        conn._forget_inherited()
    _live_connections.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
for _name, (_res, _args) in _PROTOS.items():
    try:
        _f = getattr(_lib, _name)
    except AttributeError:
        raise ImportError("kvmm: %s has no %s (an older libkvmm?)"
                          % (_lib_path, _name)) from None
    _f.restype = _res
    _f.argtypes = _args
    setattr(_c, _name[len("kvmm_"):], _f)
del _name, _res, _args, _f


def library_path():
    """The path (or soname) libkvmm was loaded from."""
    return _lib_path


# ---- errors and argument checks --------------------------------------------

def strerror(err):
    """kvmm_strerror(): the text for an errno (either sign)."""
    err = _int_arg("err", err, -(1 << 31), (1 << 31) - 1)
    return _c.strerror(err).decode("utf-8", "replace")


def block_action_string(action):
    """kvmm_block_action_string(): "gpu-shared", ... or "unknown"."""
    action = _int_arg("action", action, 0, 255)
    return _c.block_action_string(action).decode("ascii", "replace")


class KvmmError(OSError):
    """A libkvmm call failed: .errno is the positive errno, .strerror
    kvmm_strerror()'s text, .function the C function."""

    def __init__(self, err, function, detail=None):
        text = strerror(err)
        if detail:
            text = "%s (%s)" % (text, detail)
        super().__init__(err, text)
        self.function = function
        self.detail = detail

    def __reduce__(self):  # pickling (multiprocessing) keeps every field
        return (KvmmError, (self.errno, self.function, self.detail))

    def __str__(self):
        return "[Errno %d] %s: %s" % (self.errno, self.function,
                                      self.strerror)


class PinQuotaError(KvmmError):
    """Connection.pin()'s EDQUOT: the connection holds its quota of pins.
    .pins is how many it holds, .pin_quota how many it may (what the
    daemon's refusal says; both 0 from a daemon older than ABI 1.13).
    Nothing was pinned: unpin one before pinning another."""

    def __init__(self, function, pins, pin_quota):
        if pin_quota:
            detail = "pin quota: %d of %d pins held" % (pins, pin_quota)
        else:
            detail = "pin quota"
        super().__init__(_errno.EDQUOT, function, detail)
        self.pins = pins
        self.pin_quota = pin_quota

    def __reduce__(self):
        return (PinQuotaError, (self.function, self.pins, self.pin_quota))


class LengthError(KvmmError, ValueError):
    """Sequence.extend(n)'s EINVAL when n is no length to grow to: n
    is the new length (\"grow to\", not \"grow by\"), so less than the
    sequence has, or more than the region's max_tokens.  Both a KvmmError
    (errno EINVAL, as before) and a ValueError.  Nothing changed."""

    def __init__(self, function, message):
        super().__init__(_errno.EINVAL, function, message)
        self.message = message

    def __reduce__(self):
        return (LengthError, (self.function, self.message))

    def __str__(self):
        return self.message


def _check(rc, function):
    if rc < 0:
        raise KvmmError(-rc, function)
    return rc


def _int_arg(name, v, lo, hi):
    # ints and what converts to one exactly (numpy integers), never bools
    # or floats
    if isinstance(v, bool):
        raise TypeError("%s must be an int, not bool" % name)
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError("%s must be an int, not %s"
                        % (name, type(v).__name__)) from None
    if v < lo or v > hi:
        raise ValueError("%s=%d is out of range [%d, %d]" % (name, v, lo, hi))
    return v


def _u32_arg(name, v):
    return _int_arg(name, v, 0, _U32_MAX)


def _u64_arg(name, v):
    return _int_arg(name, v, 0, _U64_MAX)


def _bytes_arg(name, v, max_len=None):
    """A str/bytes/PathLike argument as NUL-free bytes, or None."""
    if v is None:
        return None
    if isinstance(v, str) or isinstance(v, os.PathLike):
        b = os.fsencode(v)
    elif isinstance(v, bytes):
        b = v
    else:
        raise TypeError("%s must be str, bytes or a path, not %s"
                        % (name, type(v).__name__))
    if b"\0" in b:
        raise ValueError("%s contains a NUL byte" % name)
    if max_len is not None and len(b) > max_len:
        raise ValueError("%s is %d bytes; at most %d are kept"
                         % (name, len(b), max_len))
    return b


def _hash_array(name, hashes):
    if isinstance(hashes, (str, bytes)) or not hasattr(hashes, "__iter__"):
        raise TypeError("%s must be a sequence of ints" % name)
    hs = [_u64_arg("%s[%d]" % (name, i), h) for i, h in enumerate(hashes)]
    return (ctypes.c_uint64 * max(len(hs), 1))(*hs), len(hs)


def _token_array(tokens):
    """A sequence of token ids (ints of 32 bits) as a ctypes uint32 array
    and its length."""
    if isinstance(tokens, (str, bytes, bytearray)) or \
            not hasattr(tokens, "__iter__"):
        raise TypeError("tokens must be a sequence of ints, not %s"
                        % type(tokens).__name__)
    ts = list(tokens)
    n = len(ts)
    if not all(type(t) is int for t in ts):
        # bools, floats, numpy integers: one by one
        ts = [_u32_arg("tokens[%d]" % i, t) for i, t in enumerate(ts)]
    try:
        # plain ints (the usual prompt): array checks the range in C
        arr = array.array("I", ts or [0])
    except OverflowError:
        for i, t in enumerate(ts):
            _u32_arg("tokens[%d]" % i, t)
        raise
    if arr.itemsize != 4:  # (unsigned int is 32 bits wherever libkvmm is)
        return (ctypes.c_uint32 * max(n, 1))(*ts), n
    return (ctypes.c_uint32 * len(arr)).from_buffer(arr), n


def _model_arg(model):
    """A model name as the bytes hashed into the seed: str as UTF-8."""
    if isinstance(model, str):
        model = model.encode("utf-8")
    elif model is not None and not isinstance(model, bytes):
        raise TypeError("model must be str, bytes or None, not %s"
                        % type(model).__name__)
    return _bytes_arg("model", model)


# ---- block identity (kvmm_hash_*) ------------------------------------------

def hash_seed(layers, kv_heads, head_dim, dtype_bytes, tokens_per_block,
              model=None):
    """kvmm_hash_seed(): the seed of a model's KV layout (an int).  model:
    str (hashed as UTF-8), bytes or None (no name).  Region.hash_seed()
    takes the layout from a region."""
    lay = HashLayout()
    lay.size = ctypes.sizeof(lay)
    lay.model = _model_arg(model)
    lay.layers = _u32_arg("layers", layers)
    lay.kv_heads = _u32_arg("kv_heads", kv_heads)
    lay.head_dim = _u32_arg("head_dim", head_dim)
    lay.dtype_bytes = _u32_arg("dtype_bytes", dtype_bytes)
    lay.tokens_per_block = _u32_arg("tokens_per_block", tokens_per_block)
    seed = ctypes.c_uint64()
    _check(_c.hash_seed(ctypes.byref(lay), ctypes.byref(seed)),
           "kvmm_hash_seed")
    return seed.value


def block_hash(seed, parent, tokens, salt=0):
    """kvmm_block_hash(): the hash of one block of tokens whose previous
    block's hash is parent (0 for block 0)."""
    seed = _u64_arg("seed", seed)
    parent = _u64_arg("parent", parent)
    salt = _u64_arg("salt", salt)
    arr, n = _token_array(tokens)
    h = ctypes.c_uint64()
    _check(_c.block_hash(seed, parent, salt, arr, n, ctypes.byref(h)),
           "kvmm_block_hash")
    return h.value


def hash_chain(seed, tokens, tokens_per_block, salt=0):
    """kvmm_hash_chain(): the hashes of the full blocks of tokens (a list
    of ints, len(tokens) // tokens_per_block of them; a partial tail block
    is not hashed), for Region.publish() and Region.open_prefix()."""
    seed = _u64_arg("seed", seed)
    salt = _u64_arg("salt", salt)
    tpb = _u32_arg("tokens_per_block", tokens_per_block)
    arr, n = _token_array(tokens)
    nblocks = n // tpb if tpb else 0
    out = (ctypes.c_uint64 * max(nblocks, 1))()
    got = _check(_c.hash_chain(seed, salt, arr, n, tpb, out, nblocks),
                 "kvmm_hash_chain")
    return list(out[:got])


# ---- result objects --------------------------------------------------------

def _backend_name(kind):
    return _BACKEND_NAMES.get(kind, "unknown")


@dataclasses.dataclass(frozen=True)
class Stats:
    """struct kvmm_stats (kvmm_get_stats()).  .backend is the backend's
    name ("host", "cuda"), as Connection.backend; .backend_id the C
    field's number (BACKEND_HOST, BACKEND_CUDA)."""
    session_id: int
    backend: str
    page_size: int
    extends: int
    extend_waits: int
    pages_imported: int
    pages_mapped: int
    pages_revoked: int
    map_ahead_blocks: int
    cmds_ring: int
    cmds_socket: int
    pages_held: int
    blocks_lent: int
    extends_lent: int
    map_ahead_backoffs: int
    blocks_lent_on_request: int
    blocks_unshared: int
    backend_id: int = dataclasses.field(default=0, repr=False,
                                        compare=False)

    @property
    def backend_name(self):
        """The same as .backend (it was the name of a number)."""
        return self.backend

    def as_dict(self):
        """The C fields, in C order (backend as its name)."""
        d = dataclasses.asdict(self)
        del d["backend_id"]
        return d


@dataclasses.dataclass(frozen=True)
class PinInfo:
    """The out fields of struct kvmm_pin_opts after kvmm_block_pin()."""
    tier: int  # 0 GPU, 1 host, 2 NVMe
    pins: int  # this connection's pins now
    pin_quota: int
    expires_ns: int  # TTL pins: the daemon's CLOCK_MONOTONIC, else 0


@dataclasses.dataclass(frozen=True)
class PrefixResult:
    """What Region.open_prefix() opened: the sequence and its cached
    prefix length in blocks.  With plan=True also the per-block actions
    (kvmm_block_action_string() names, and their codes) and the counts
    of struct kvmm_prefix_opts; None without."""
    seq: "Sequence"
    nr_blocks: int
    actions: list = None
    action_codes: list = None
    shared: int = None
    reloaded_host: int = None
    reloaded_nvme: int = None
    recompute: int = None


@dataclasses.dataclass(frozen=True)
class Readiness:
    """What Region.wait_ready() found below upto_block: the blocks whose
    reload failed (to recompute, ascending) and, for a poll, how many
    still load (0 after a wait)."""
    failed: list
    pending: int


# ---- connection ------------------------------------------------------------

def _pin_opts(ttl_ns, priority, priority_only, demote):
    """struct kvmm_pin_opts for pin() and pin_many()."""
    o = PinOpts()
    o.size = ctypes.sizeof(o)
    if ttl_ns is not None:
        o.flags |= PIN_F_TTL
        o.ttl_ns = _u64_arg("ttl_ns", ttl_ns)
    if priority is not None:
        o.flags |= PIN_F_PRIORITY
        o.priority = _int_arg("priority", priority, -(1 << 31),
                              (1 << 31) - 1)
    if priority_only:
        o.flags |= PIN_F_PRIORITY_ONLY
    if demote:
        o.flags |= PIN_F_DEMOTE
    return o


class Connection:
    """kvmm_connect() .. kvmm_disconnect(); a context manager.

    socket_path: None for $KVMM_SOCKET or /run/kvmm/kvmm.sock.
    map_ahead_blocks: None for libkvmm's default (1); 0 turns it off.
    """

    def __init__(self, socket_path=None, name=None, *, map_ahead_blocks=None,
                 sq_entries=0, spin_us=0):
        self._forked = False
        o = ConnectOpts()
        o.size = ctypes.sizeof(o)
        o.socket_path = _bytes_arg("socket_path", socket_path)
        o.name = _bytes_arg("name", name, _NAME_MAX)
        if map_ahead_blocks is not None:
            o.map_ahead_blocks = _u32_arg("map_ahead_blocks",
                                          map_ahead_blocks)
            o.map_ahead_set = 1
        o.sq_entries = _u32_arg("sq_entries", sq_entries)
        o.spin_us = _u32_arg("spin_us", spin_us)
        h = ctypes.c_void_p()
        self._h = None
        self._regions = []
        _check(_c.connect(ctypes.byref(o), ctypes.byref(h)), "kvmm_connect")
        self._h = h
        _live_connections.add(self)
        try:
            st = self.stats()
        except BaseException:
            self.close()
            raise
        self.session_id = st.session_id
        self.backend = st.backend_name
        self.page_size = st.page_size

    # -- life cycle
    @property
    def closed(self):
        return self._h is None

    def _handle(self):
        if self._h is None:
            if getattr(self, "_forked", False):
                raise ValueError("kvmm connection was inherited through "
                                 "fork(): connect again in this process")
            raise ValueError("kvmm connection is closed")
        return self._h

    def _forget_inherited(self):
        """In a forked child: closed, without a lock another thread of the
        parent may have held.  libkvmm's disconnect of an inherited
        connection (kc_conn_drop_inherited()) takes no lock and sends
        nothing: it frees this process's memory and closes and unmaps its
        copies.  Without it a worker kept the parent's session socket open,
        so a dead engine's session and pages lived as long as the worker,
        and the worker could still write the parent's KV through a buffer
        taken before the fork."""
        for r in self._regions:
            r._forget_inherited()
        self._regions = []
        h, self._h = self._h, None
        self._forked = True
        if h is not None:
            _c.disconnect(h)

    def close(self):
        """kvmm_disconnect(): unmaps everything; every Region and view of
        this connection becomes unusable.  A second close does nothing."""
        if self._h is None:
            return
        for r in self._regions:
            r._forget()
        self._regions = []
        h, self._h = self._h, None
        _c.disconnect(h)

    disconnect = close

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        # a Connection dropped without close(): say goodbye (as a file does)
        try:
            if getattr(self, "_h", None) is not None and _c is not None:
                self.close()
        except Exception:
            pass

    def __repr__(self):
        if self._h is None:
            return "<kvmm.Connection closed>"
        return "<kvmm.Connection session %d, %s backend>" % (
            self.session_id, self.backend)

    # -- regions
    def region(self, layers, kv_heads, head_dim, dtype_bytes, max_seqs,
               max_tokens, salt=0):
        """kvmm_region_create(): a Region (a context manager)."""
        o = RegionOpts()
        o.size = ctypes.sizeof(o)
        o.layers = _u32_arg("layers", layers)
        o.kv_heads = _u32_arg("kv_heads", kv_heads)
        o.head_dim = _u32_arg("head_dim", head_dim)
        o.dtype_bytes = _u32_arg("dtype_bytes", dtype_bytes)
        o.max_seqs = _u32_arg("max_seqs", max_seqs)
        o.max_tokens = _u32_arg("max_tokens", max_tokens)
        o.salt = _u64_arg("salt", salt)
        h = ctypes.c_void_p()
        _check(_c.region_create(self._handle(), ctypes.byref(o),
                                ctypes.byref(h)), "kvmm_region_create")
        r = Region(self, h, o)
        self._regions.append(r)
        return r

    create_region = region

    # -- steps and revocations
    def step_begin(self):
        try:
            _check(_c.step_begin(self._handle()), "kvmm_step_begin")
        finally:
            self._revalidate_views()

    def step_end(self):
        try:
            _check(_c.step_end(self._handle()), "kvmm_step_end")
        finally:
            self._revalidate_views()

    @contextlib.contextmanager
    def step(self):
        """step_begin(), the body, step_end() (also when the body raises;
        the body's exception wins)."""
        self.step_begin()
        try:
            yield self
        except BaseException:
            try:
                self.step_end()
            except KvmmError:
                pass
            raise
        self.step_end()

    def poll_fd(self):
        """kvmm_poll_fd(): readable when the daemon posted revocations
        (poll it, then process_revocations())."""
        return _check(_c.poll_fd(self._handle()), "kvmm_poll_fd")

    fileno = poll_fd

    def process_revocations(self):
        """kvmm_process_revocations(): mappings given back now (one per
        revocation entry: a page mapped twice counts twice)."""
        try:
            return _check(_c.process_revocations(self._handle()),
                          "kvmm_process_revocations")
        finally:
            self._revalidate_views()

    def _revalidate_views(self):
        for r in self._regions:
            r._revalidate_views()

    # -- misc
    def nop(self, via_socket=False):
        """kvmm_nop(): one round trip through the ring (or the socket)."""
        if not isinstance(via_socket, bool):
            raise TypeError("via_socket must be a bool")
        _check(_c.nop(self._handle(), int(via_socket)), "kvmm_nop")

    def stats(self):
        """kvmm_get_stats() as a Stats (frozen dataclass; .as_dict())."""
        st = StatsStruct()
        st.size = ctypes.sizeof(st)
        _check(_c.get_stats(self._handle(), ctypes.byref(st)),
               "kvmm_get_stats")
        if st.size != ctypes.sizeof(st):
            # libkvmm copies min(its size, ours) and says how much
            raise KvmmError(_errno.EPROTO, "kvmm_get_stats",
                            "libkvmm's struct kvmm_stats is %d bytes, this "
                            "binding's %d" % (st.size, ctypes.sizeof(st)))
        v = {f: getattr(st, f) for f, _ in StatsStruct._fields_[1:]}
        v["backend_id"] = v["backend"]
        v["backend"] = _backend_name(v["backend"])
        return Stats(**v)

    get_stats = stats

    def daemon_info(self):
        """kvmm_get_daemon_info(): what the daemon said at connect, as a
        dict: abi_major, abi_minor (check it before using a feature a
        later minor added), backend (its name, "host" or "cuda", as
        Connection.backend), backend_id (the C field's number),
        revoke_timeout_ms, page_size, pages_total, quota_pages, gpu_uuid
        (16 bytes)."""
        d = DaemonInfoStruct()
        d.size = ctypes.sizeof(d)
        _check(_c.get_daemon_info(self._handle(), ctypes.byref(d)),
               "kvmm_get_daemon_info")
        info = {f: bytes(getattr(d, f)) if f == "gpu_uuid" else getattr(d, f)
                for f, _ in DaemonInfoStruct._fields_[1:]}
        info["backend_id"] = info["backend"]
        info["backend"] = _backend_name(info["backend"])
        return info

    def tier_stats(self, block_pages=0):
        """kvmm_tier_stats() (ABI 1.19's public call; TIER_STATS, which
        any session may send): kvmmd's block cache counters as a dict, the
        C fields by name in C order ("size": the bytes the daemon sent,
        fields past them read 0) and "tiers" a list of three dicts (GPU,
        host, NVMe) of struct kvmm_tier_info's fields.  The daemon's, not
        this connection's: every engine of the kvmmd together.

        block_pages (ABI 1.21, kvmm_tier_stats_size()): 0, every block
        size's cache summed; N, the cache of blocks of N pages alone
        (ENOENT: no such size cached; EOPNOTSUPP: a daemon before 1.21,
        nothing sent).  "sizes" lists the sizes cached (nr_sizes of
        them; empty from a daemon before 1.21)."""
        st = TierStatsStruct()
        _check(_c.tier_stats_size(self._handle(),
                                  _u32_arg("block_pages", block_pages),
                                  ctypes.byref(st), ctypes.sizeof(st)),
               "kvmm_tier_stats_size" if block_pages else "kvmm_tier_stats")
        out = {}
        for f, _ in TierStatsStruct._fields_:
            if f == "tiers":
                out[f] = [{t: getattr(ti, t)
                           for t, _ in TierInfoStruct._fields_}
                          for ti in st.tiers]
            elif f == "sizes":
                out[f] = [st.sizes[i] for i in range(min(st.nr_sizes, 4))]
            else:
                out[f] = getattr(st, f)
        return out

    # -- pins
    def pin(self, hash, *, ttl_ns=None, priority=None, priority_only=False,
            demote=False):
        """kvmm_block_pin(): ttl_ns sets KVMM_PIN_F_TTL, priority
        KVMM_PIN_F_PRIORITY (with priority_only: only that), demote
        KVMM_PIN_F_DEMOTE.  Returns a PinInfo.  At the connection's
        quota of pins: PinQuotaError (a KvmmError, EDQUOT) with .pins and
        .pin_quota."""
        o = _pin_opts(ttl_ns, priority, priority_only, demote)
        hash = _u64_arg("hash", hash)
        rc = _c.block_pin(self._handle(), hash, ctypes.byref(o))
        if rc == -_errno.EDQUOT:
            # libkvmm fills pins and pin_quota from the refusal (ABI
            # 1.13): the caller needs them to decide what to unpin
            raise PinQuotaError("kvmm_block_pin", o.pins, o.pin_quota)
        _check(rc, "kvmm_block_pin")
        return PinInfo(o.tier, o.pins, o.pin_quota, o.expires_ns)

    def pin_many(self, hashes, *, ttl_ns=None, priority=None,
                 priority_only=False, demote=False):
        """kvmm_block_pin_many() (ABI 1.19): pin() of each hash, in order,
        in one round trip, with the same options.  Returns a list with
        one entry per hash: its tier (0 GPU, 1 host, 2 NVMe) when pinned,
        else the negative errno its own pin() would have had (-ENOENT not
        cached, -EDQUOT past the quota).  KvmmError for the whole call
        (bad options; EOPNOTSUPP from a daemon before 1.19)."""
        hashes = [_u64_arg("hash", h) for h in hashes]
        n = len(hashes)
        o = _pin_opts(ttl_ns, priority, priority_only, demote)
        arr = (_u64 * max(n, 1))(*hashes)
        res = (ctypes.c_int32 * max(n, 1))()
        _check(_c.block_pin_many(self._handle(), arr, n, ctypes.byref(o),
                                 res), "kvmm_block_pin_many")
        return list(res[:n])

    def unpin(self, hash):
        """kvmm_block_unpin()."""
        _check(_c.block_unpin(self._handle(), _u64_arg("hash", hash)),
               "kvmm_block_unpin")


# ---- regions and sequences -------------------------------------------------

class Region:
    """kvmm_region_create() .. kvmm_region_destroy(); a context manager.

    Methods taking a sequence id mirror the C calls; Sequence objects
    (open_seq(), open_prefix(), seq()) call them for one id.
    """

    def __init__(self, conn, handle, o):
        self.conn = conn
        self._h = handle
        self.layers = o.layers
        self.kv_heads = o.kv_heads
        self.head_dim = o.head_dim
        self.dtype_bytes = o.dtype_bytes
        self.max_seqs = o.max_seqs
        self.max_tokens = o.max_tokens
        self.salt = o.salt
        self.tokens_per_block = _c.region_tokens_per_block(handle)
        # bytes of one token in one layer's K (or V)
        self.token_bytes = o.kv_heads * o.head_dim * o.dtype_bytes
        self.pages_per_block = 2 * o.layers
        # views handed out: seq -> [most tokens any covers, [[tokens,
        # memoryview], ...]], under _views_lock
        self._views = {}
        self._views_lock = threading.Lock()

    @property
    def destroyed(self):
        return self._h is None

    def _handle(self):
        if self._h is None:
            raise ValueError("kvmm region is destroyed")
        self.conn._handle()  # (a closed connection clears _h too)
        return self._h

    def _forget(self):
        with self._views_lock:
            for seq in list(self._views):
                self._release_views_locked(seq, -1)
        self._h = None

    def _forget_inherited(self):
        # _views_lock is as the parent's threads left it: a fresh one
        self._views_lock = threading.Lock()
        for seq in list(self._views):
            self._release_views_locked(seq, -1)
        self._h = None

    def destroy(self):
        """kvmm_region_destroy(): closes its sequences, unmaps its ranges.
        A second destroy does nothing."""
        if self._h is None:
            return
        h = self._handle()
        self._forget()
        if self in self.conn._regions:
            self.conn._regions.remove(self)
        _check(_c.region_destroy(h), "kvmm_region_destroy")

    close = destroy

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False

    def __repr__(self):
        return "<kvmm.Region %s%d layers, %d tokens per block>" % (
            "destroyed, " if self._h is None else "", self.layers,
            self.tokens_per_block)

    # -- sequences by id (the C calls)
    def seq(self, seq_id):
        """A Sequence object for an id (no call: libkvmm checks it on use)."""
        return Sequence(self, _u32_arg("seq_id", seq_id))

    def open_seq(self):
        """kvmm_seq_open(): a new, empty Sequence."""
        s = ctypes.c_uint32()
        _check(_c.seq_open(self._handle(), ctypes.byref(s)), "kvmm_seq_open")
        return Sequence(self, s.value)

    def seq_extend(self, seq, new_len):
        h = self._handle()
        seq = _u32_arg("seq", seq)
        new_len = _u32_arg("new_len", new_len)
        try:
            rc = _c.seq_extend(h, seq, new_len)
            if rc == -_errno.EINVAL:
                self._extend_einval(seq, new_len)
            _check(rc, "kvmm_seq_extend")
        finally:
            # an extend that finds its blocks revoked applies the pending
            # revocations of every sequence of the connection
            self.conn._revalidate_views()

    def _extend_einval(self, seq, new_len):
        # what is wrong with new_len, when it is that (a bare EINVAL sent
        # extend(len(tokens) - len(seq)) callers looking elsewhere)
        if new_len > self.max_tokens:
            raise LengthError(
                "kvmm_seq_extend",
                "extend(n) grows to n tokens: %d is more than the "
                "region's max_tokens (%d)" % (new_len, self.max_tokens))
        have = _c.seq_len(self._handle(), seq)
        if have > new_len:
            raise LengthError(
                "kvmm_seq_extend",
                "extend(n) grows to n tokens; the sequence already has %d "
                "(n = %d: truncate() shortens)" % (have, new_len))

    def seq_truncate(self, seq, new_len):
        h = self._handle()
        seq = _u32_arg("seq", seq)
        new_len = _u32_arg("new_len", new_len)
        try:
            _check(_c.seq_truncate(h, seq, new_len), "kvmm_seq_truncate")
        finally:
            # libkvmm unmaps before asking the daemon: error or not, the
            # length says what is still mapped
            self._revalidate_views(seq)

    def seq_close(self, seq):
        h = self._handle()
        seq = _u32_arg("seq", seq)
        try:
            _check(_c.seq_close(h, seq), "kvmm_seq_close")
        finally:
            self._revalidate_views(seq)

    def seq_len(self, seq):
        """kvmm_seq_len(): length in tokens."""
        return _check(_c.seq_len(self._handle(), _u32_arg("seq", seq)),
                      "kvmm_seq_len")

    def _ptr(self, fn, name, seq, layer):
        p = fn(self._handle(), _u32_arg("seq", seq),
               _u32_arg("layer", layer))
        if not p:
            raise KvmmError(_errno.EINVAL, name,
                            "sequence %d or layer %d out of range"
                            % (seq, layer))
        return p

    def k_ptr(self, seq, layer):
        """kvmm_seq_k_ptr(): the address of the sequence's K in layer (a
        host address, or a CUdeviceptr on the cuda backend)."""
        return self._ptr(_c.seq_k_ptr, "kvmm_seq_k_ptr", seq, layer)

    def v_ptr(self, seq, layer):
        """kvmm_seq_v_ptr(): as k_ptr(), for V."""
        return self._ptr(_c.seq_v_ptr, "kvmm_seq_v_ptr", seq, layer)

    def _view(self, which, seq, layer, tokens, start):
        seq = _u32_arg("seq", seq)
        layer = _u32_arg("layer", layer)
        start = _u32_arg("start", start)
        if self.conn.backend != "host":
            raise KvmmError(_errno.EOPNOTSUPP, "%s_view" % which,
                            "the %s backend's pointers are device addresses:"
                            " use %s_ptr() with torch or cupy"
                            % (self.conn.backend, which))
        if tokens is not None:
            tokens = _u32_arg("tokens", tokens)
        # the address never changes: taken before the lock
        if which == "k":
            p = self.k_ptr(seq, layer)
        else:
            p = self.v_ptr(seq, layer)
        # The length is read and the view registered under one hold of
        # _views_lock: a revocation another thread applies in between
        # revalidates after it (it takes the lock), so it finds this view
        # and releases it.  Read before the lock, a revocation applied
        # there checked the views already registered and left this one
        # over unmapped memory.
        with self._views_lock:
            length = self.seq_len(seq)
            if start > length:
                raise ValueError("start=%d is past the sequence's length "
                                 "%d" % (start, length))
            if tokens is None:
                tokens = length - start
            if start + tokens > length:
                raise ValueError("start + tokens = %d is past the "
                                 "sequence's length %d (extend it first)"
                                 % (start + tokens, length))
            n = tokens * self.token_bytes
            mv = memoryview((ctypes.c_ubyte * n).from_address(
                p + start * self.token_bytes)).cast("B")
            # A cached block a prefix open shared is mapped read-only
            # (writing it would fault): a view over any of it is
            # read-only, so that a write raises TypeError instead
            tpb = self.tokens_per_block
            h = self._handle()
            for b in range(start // tpb, (start + tokens + tpb - 1) // tpb):
                if _c.seq_block_readonly(h, seq, b) == 1:
                    mv = mv.toreadonly()
                    break
            ent = self._views.setdefault(seq, [0, []])
            # views nobody but this list holds are gone: forget them
            # (2: the list's reference and getrefcount's argument)
            ent[1] = [v for v in ent[1] if sys.getrefcount(v[1]) > 2]
            ent[1].append([start + tokens, mv])
            ent[0] = max(v[0] for v in ent[1])
        return mv

    def k_view(self, seq, layer, tokens=None, start=0):
        """Tokens [start, start + tokens) (tokens default: to the end) of
        the sequence's K in layer as a memoryview (host backend only; see
        the module documentation for how long it stays valid): writable
        over the sequence's own blocks, read-only when it covers a cached
        block a prefix open shared (block_readonly())."""
        return self._view("k", seq, layer, tokens, start)

    def v_view(self, seq, layer, tokens=None, start=0):
        """As k_view(), for V."""
        return self._view("v", seq, layer, tokens, start)

    def block_readonly(self, seq, block):
        """kvmm_seq_block_readonly(): True for a cached block a prefix
        open shared (mapped read-only), False for the sequence's own."""
        return bool(_check(_c.seq_block_readonly(
            self._handle(), _u32_arg("seq", seq), _u32_arg("block", block)),
            "kvmm_seq_block_readonly"))

    def block_unshare(self, seq, block):
        """kvmm_seq_block_unshare() (ABI 1.20): make a read-only block
        (a cached block a prefix open shared) the sequence's own: kvmmd
        copies it into fresh pages, mapped read-write at the same
        addresses, so block_readonly() is False and a view taken after
        this is writable (one taken before stays read-only: take it
        again).  The cache's copy, which other readers get, is unchanged.
        Nothing to do for a block that is the sequence's own already.
        Raises EDQUOT (the uid's quota, the block stays shared),
        EOPNOTSUPP (a daemon before 1.20), ENODATA (not backed)."""
        _check(_c.seq_block_unshare(self._handle(), _u32_arg("seq", seq),
                                    _u32_arg("block", block)),
               "kvmm_seq_block_unshare")

    def _release_views_locked(self, seq, length):
        """Release the views of seq that reach past length tokens."""
        ent = self._views.get(seq)
        if ent is None or ent[0] <= length:
            return
        keep = []
        for v in ent[1]:
            if v[0] <= length:
                keep.append(v)
                continue
            try:
                v[1].release()
            except BufferError:
                pass  # exported (numpy...): documented, nothing to do
        if keep:
            self._views[seq] = [max(v[0] for v in keep), keep]
        else:
            del self._views[seq]

    def _revalidate_views(self, only=None):
        """Release the views (of sequence only, or all) that reach past
        their sequence's length now: closed, truncated, revoked."""
        h = self._h
        if h is None:
            return
        # _views is looked at under the lock only: a view being made
        # (_view) is registered before the lock is free
        with self._views_lock:
            for seq in [only] if only is not None else list(self._views):
                if seq in self._views:
                    # -errno (closed) is below every view
                    self._release_views_locked(seq, _c.seq_len(h, seq))

    def hash_seed(self, model=None):
        """kvmm_region_hash_seed(): the seed of this region's layout
        (layers, kv_heads, head_dim, dtype_bytes, tokens_per_block) and
        model (str as UTF-8, bytes or None), for hash_chain()."""
        h = self._handle()
        seed = ctypes.c_uint64()
        _check(_c.region_hash_seed(h, _model_arg(model), ctypes.byref(seed)),
               "kvmm_region_hash_seed")
        return seed.value

    def block_pages(self, seq, block):
        """kvmm_seq_block_pages(): the daemon page ids of one block (layer
        0 K, layer 0 V, ...), a list of pages_per_block ints."""
        ids = (ctypes.c_uint32 * self.pages_per_block)()
        n = _check(_c.seq_block_pages(self._handle(), _u32_arg("seq", seq),
                                      _u32_arg("block", block), ids,
                                      self.pages_per_block),
                   "kvmm_seq_block_pages")
        return list(ids[:n])

    def publish(self, seq, first_block, hashes, parent_hash=0):
        """kvmm_block_publish(): publish blocks first_block.. under hashes
        (one per block); returns how many of them the cache now holds."""
        h = self._handle()
        seq = _u32_arg("seq", seq)
        first_block = _u32_arg("first_block", first_block)
        parent_hash = _u64_arg("parent_hash", parent_hash)
        arr, n = _hash_array("hashes", hashes)
        return _check(_c.block_publish(h, seq, first_block, n, parent_hash,
                                       arr), "kvmm_block_publish")

    def wait_ready(self, seq, upto_block, poll=False):
        """kvmm_seq_wait_ready() (ABI 1.8): after an early open, wait until
        no block below upto_block still loads (poll=True: do not wait); a
        Readiness with the blocks whose reload failed."""
        if not isinstance(poll, bool):
            raise TypeError("poll must be a bool")
        upto = _u32_arg("upto_block", upto_block)
        cap = max(min(upto, PREFIX_MAX_BLOCKS), 1)
        failed = (ctypes.c_uint32 * cap)()
        pending = ctypes.c_uint32()
        n = _check(_c.seq_wait_ready(self._handle(), _u32_arg("seq", seq),
                                     upto, WAIT_READY_POLL if poll else 0,
                                     failed, cap, ctypes.byref(pending)),
                   "kvmm_seq_wait_ready")
        return Readiness(list(failed[:min(n, cap)]), pending.value)

    def query_prefix(self, hashes):
        """kvmm_prefix_query() (ABI 1.19): the tiers of the longest cached
        prefix of hashes, one name a block ("gpu", "host", "nvme",
        "moving"); [] when the first block is not cached.  Opens nothing
        and changes nothing (no restore, pin or policy use)."""
        h = self._handle()
        arr, n = _hash_array("hashes", hashes)
        tiers = (ctypes.c_uint8 * max(n, 1))()
        nr = _check(_c.prefix_query(h, arr, n, tiers, 0), "kvmm_prefix_query")
        return [_c.query_tier_string(t).decode("ascii", "replace")
                for t in tiers[:nr]]

    def open_prefix(self, hashes, plan=False, segments=False, early=False):
        """kvmm_seq_open_prefix(), or with plan=True
        kvmm_seq_open_prefix_opts() with per-block actions: a
        PrefixResult.  segments=True (implies plan=True) sets
        PREFIX_OPEN_SEGMENTS: blocks cached after a hole are reused, each
        hole a "recompute" block.  early=True (implies plan=True) sets
        PREFIX_OPEN_EARLY (ABI 1.8): it returns before the reloads are done;
        wait_ready() says when they are."""
        h = self._handle()
        if not isinstance(plan, bool):
            raise TypeError("plan must be a bool")
        if not isinstance(segments, bool):
            raise TypeError("segments must be a bool")
        if not isinstance(early, bool):
            raise TypeError("early must be a bool")
        plan = plan or segments or early
        arr, n = _hash_array("hashes", hashes)
        seq = ctypes.c_uint32()
        nr = ctypes.c_uint32()
        if not plan:
            _check(_c.seq_open_prefix(h, arr, n, ctypes.byref(seq),
                                      ctypes.byref(nr)),
                   "kvmm_seq_open_prefix")
            return PrefixResult(Sequence(self, seq.value), nr.value)
        acts = (ctypes.c_uint8 * max(n, 1))()
        o = PrefixOpts()
        o.size = ctypes.sizeof(o)
        o.flags = ((PREFIX_OPEN_SEGMENTS if segments else 0) |
                   (PREFIX_OPEN_EARLY if early else 0))
        o.actions = ctypes.cast(acts, ctypes.POINTER(ctypes.c_uint8))
        _check(_c.seq_open_prefix_opts(h, arr, n, ctypes.byref(seq),
                                       ctypes.byref(nr), ctypes.byref(o)),
               "kvmm_seq_open_prefix_opts")
        codes = list(acts[:nr.value])
        return PrefixResult(Sequence(self, seq.value), nr.value,
                            [block_action_string(a) for a in codes], codes,
                            o.shared, o.reloaded_host, o.reloaded_nvme,
                            o.recompute)


class Sequence:
    """One sequence of a Region, by id; a context manager that closes it.

    len(seq) is kvmm_seq_len(); the methods are Region's for this id.
    """

    def __init__(self, region, seq_id):
        self.region = region
        self.id = seq_id
        self._closed = False

    def extend(self, new_len):
        self.region.seq_extend(self.id, new_len)

    def truncate(self, new_len):
        self.region.seq_truncate(self.id, new_len)

    def close(self):
        """kvmm_seq_close(); closing an already closed sequence raises the
        errno libkvmm gives (EINVAL)."""
        self.region.seq_close(self.id)
        self._closed = True

    def __len__(self):
        return self.region.seq_len(self.id)

    @property
    def length(self):
        return self.region.seq_len(self.id)

    def k_ptr(self, layer):
        return self.region.k_ptr(self.id, layer)

    def v_ptr(self, layer):
        return self.region.v_ptr(self.id, layer)

    def k_view(self, layer, tokens=None, start=0):
        return self.region.k_view(self.id, layer, tokens, start)

    def v_view(self, layer, tokens=None, start=0):
        return self.region.v_view(self.id, layer, tokens, start)

    def block_readonly(self, block):
        return self.region.block_readonly(self.id, block)

    def block_unshare(self, block):
        return self.region.block_unshare(self.id, block)

    def block_pages(self, block):
        return self.region.block_pages(self.id, block)

    def wait_ready(self, upto_block, poll=False):
        return self.region.wait_ready(self.id, upto_block, poll)

    def publish(self, first_block, hashes, parent_hash=0):
        return self.region.publish(self.id, first_block, hashes, parent_hash)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # only if still open through this object and its region
        if not self._closed and not self.region.destroyed:
            self.close()
        return False

    def __repr__(self):
        return "<kvmm.Sequence %d%s>" % (self.id,
                                         " closed" if self._closed else "")
