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

The package's modules each hold one job (constants, structs, library,
errors, hashing, results, connection, region); what an engine uses is
what this module exports, as when it was one file (kvmm.py).
"""

import ctypes  # noqa: F401 (tests use kvmm.ctypes, as with kvmm.py)

from .constants import (  # noqa: F401
    BACKEND_CUDA, BACKEND_HOST, BLOCK_GPU_SHARED, BLOCK_RECOMPUTE,
    BLOCK_RELOADED_HOST, BLOCK_RELOADED_NVME, PIN_F_DEMOTE, PIN_F_PRIORITY,
    PIN_F_PRIORITY_ONLY, PIN_F_TTL, PREFIX_MAX_BLOCKS, PREFIX_OPEN_EARLY,
    PREFIX_OPEN_SEGMENTS, WAIT_READY_POLL)
from .structs import (  # noqa: F401
    STRUCTS, ConnectOpts, DaemonInfoStruct, HashLayout, PinOpts, PrefixOpts,
    RegionOpts, StatsStruct, TierInfoStruct, TierStatsStruct)
# _c: the bound C calls (kvmm._c.NAME is kvmm_NAME()), for tests
from .library import _c, library_path  # noqa: F401
from .errors import (  # noqa: F401
    KvmmError, LengthError, PinQuotaError, block_action_string, strerror)
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
    "library_path",
    "hash_seed", "block_hash", "hash_chain",
    "BLOCK_GPU_SHARED", "BLOCK_RELOADED_HOST", "BLOCK_RELOADED_NVME",
    "BLOCK_RECOMPUTE", "PIN_F_TTL", "PIN_F_PRIORITY", "PIN_F_PRIORITY_ONLY",
    "PIN_F_DEMOTE", "PREFIX_MAX_BLOCKS", "PREFIX_OPEN_SEGMENTS",
    "PREFIX_OPEN_EARLY", "WAIT_READY_POLL", "Readiness",
    "BACKEND_HOST", "BACKEND_CUDA",
]
