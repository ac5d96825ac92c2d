# SPDX-License-Identifier: MIT
"""Finding libkvmm (KVMM_LIB, the build tree, make install's LIBDIR, the
system loader) and binding its calls with ctypes: _c.NAME is kvmm_NAME()
with its argument and result types set, or the import fails naming
what is missing."""

import ctypes
import ctypes.util
import os

from .structs import (ConnectOpts, DaemonInfoStruct, HashLayout, PinOpts,
                      PrefixOpts, RegionOpts, StatsStruct, TierStatsStruct)

# 'make install' writes $(LIBDIR)/libkvmm.so.1 here in the installed copy
_INSTALLED_LIB = None


def _candidates():
    """Where to look, in order: (description, path or soname)."""
    env = os.environ.get("KVMM_LIB")
    if env:
        # asked for explicitly: nothing else is tried
        return [("KVMM_LIB", env)]
    # the directory holding the package (kvmm/python in the source tree)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
