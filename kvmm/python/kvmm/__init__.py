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
method too) every Connection and Region the parent had is closed at once
(the session is the parent's), and using it raises ValueError.  The
child's copy is dropped by libkvmm's disconnect of an inherited
connection, which sends nothing and takes no lock: it closes and unmaps
the child's copies of the socket, the ring and the KV ranges.

When kvmmd dies: every call that talks to it raises KvmmError with errno
ECONNRESET, and goes on doing so (a new kvmmd does not take the connection
over); len(seq), the pointers, the views and daemon_info() still answer
from the library's state, the bytes written still readable.  close() the
connection, connect again and rebuild the regions.

Each C function of kvmm.h has its Python counterpart, named in that
counterpart's docstring (help(kvmm.Sequence.extend) says
kvmm_seq_extend()); Documentation/python.md has the table, and
tests/python-parity.sh checks that none is missing.  ABI_MINOR is the
minor these mirrors follow; Connection.daemon_info()["abi_minor"] the
daemon's, to check before a call a later minor added (the call raises
KvmmError(EOPNOTSUPP) otherwise, without asking).

The package's modules each hold one job (constants, structs, library,
errors, hashing, results, connection, region); what an engine uses is
what this module exports, as when it was one file (kvmm.py).
"""

import ctypes  # noqa: F401 (tests use kvmm.ctypes, as with kvmm.py)

from .constants import (  # noqa: F401
    ABI_MAJOR, ABI_MINOR, BACKEND_CUDA, BACKEND_HOST, BLOCK_GPU_SHARED,
    BLOCK_RECOMPUTE, BLOCK_RELOADED_HOST, BLOCK_RELOADED_NVME, PIN_F_DEMOTE,
    PIN_F_PRIORITY, PIN_F_PRIORITY_ONLY, PIN_F_TTL, PIN_MANY_MAX,
    PIN_TTL_MAX_NS, PREFIX_MAX_BLOCKS, PREFIX_OPEN_EARLY,
    PREFIX_OPEN_SEGMENTS, QUERY_GPU, QUERY_HOST, QUERY_MOVING, QUERY_NVME,
    TIER_STATS_SIZES, WAIT_READY_POLL)
from .structs import (  # noqa: F401
    STRUCTS, ConnectOpts, DaemonInfoStruct, HashLayout, PinOpts, PrefixOpts,
    RegionOpts, StatsStruct, TierInfoStruct, TierStatsStruct)
# _c: the bound C calls (kvmm._c.NAME is kvmm_NAME()), for tests
from .library import _c, library_path  # noqa: F401
from .errors import (  # noqa: F401
    KvmmError, LengthError, PinQuotaError, block_action_string,
    query_tier_string, strerror)
from .hashing import block_hash, hash_chain, hash_seed  # noqa: F401
from .results import PinInfo, PrefixResult, Readiness, Stats  # noqa: F401
from .region import Region, Sequence  # noqa: F401
from .connection import Connection  # noqa: F401

# The exceptions keep the name they had when kvmm was one file (kvmm.py):
# a traceback says kvmm.KvmmError, and one pickled (multiprocessing sends
# a worker's back) names kvmm.KvmmError, which loads in either layout.
for _cls in (KvmmError, PinQuotaError, LengthError):
    _cls.__module__ = __name__
del _cls

__all__ = [
    "KvmmError", "PinQuotaError", "LengthError", "Connection", "Region", "Sequence",
    "PrefixResult", "PinInfo", "Stats", "strerror", "block_action_string",
    "query_tier_string", "library_path",
    "hash_seed", "block_hash", "hash_chain",
    "BLOCK_GPU_SHARED", "BLOCK_RELOADED_HOST", "BLOCK_RELOADED_NVME",
    "BLOCK_RECOMPUTE", "PIN_F_TTL", "PIN_F_PRIORITY", "PIN_F_PRIORITY_ONLY",
    "PIN_F_DEMOTE", "PREFIX_MAX_BLOCKS", "PREFIX_OPEN_SEGMENTS",
    "PREFIX_OPEN_EARLY", "WAIT_READY_POLL", "Readiness",
    "BACKEND_HOST", "BACKEND_CUDA", "ABI_MAJOR", "ABI_MINOR", "QUERY_GPU",
    "QUERY_HOST", "QUERY_NVME", "QUERY_MOVING", "PIN_TTL_MAX_NS",
    "PIN_MANY_MAX", "TIER_STATS_SIZES",
]
