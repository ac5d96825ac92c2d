#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Python binding (kvmm/python/kvmm.py) against a real kvmmd.

Run by the tests/python-*.sh wrappers, one case each:
  python-kvmm.py share    a writer process fills and publishes two blocks,
                          this process opens the prefix and reads them
  python-kvmm.py errors   each C error raises its errno, each bad Python
                          argument its TypeError/ValueError; the
                          connection keeps working after every one
  python-kvmm.py layout   every mirrored struct's size and field offsets
                          against the C compiler's
  python-kvmm.py stats    kvmm_get_stats() values after known operations
  python-kvmm.py revoke   an admin revocation: poll_fd readable,
                          process_revocations() count, views released
  python-kvmm.py viewrace a revocation another thread applies while
                          k_view() is being made (forced by hooks) leaves
                          no view over unmapped memory: it is released
                          (ValueError) or covers what is still backed
  python-kvmm.py fork     a child of os.fork() finds the parent's
                          Connection and Region closed (ValueError,
                          no call into libkvmm), leaves 'with' without
                          a hang and connects on its own; the parent's
                          session goes on, and is quarantined when cut
                          off
  python-kvmm.py lost     kvmmd killed: every call that talks to it raises
                          ECONNRESET, the library's state still answers,
                          close() ends it at once
  python-kvmm.py tierstats  Connection.tier_stats() (kvmm_tier_stats(); of
                            one block size, kvmm_tier_stats_size(), ABI 1.21):
                          the counters after a publish and an open, as
                          kvmmctl shows them
  python-kvmm.py olddaemon  against kvmmd playing ABI 1.18: query_prefix
                          and pin_many raise EOPNOTSUPP without a round
                          trip, what 1.18 had works
  python-kvmm.py example  the example of Documentation/python.md runs and
                          prints what the document says
  python-kvmm.py parity   every function, struct and constant of kvmm.h
                          has its Python counterpart: bound, named in
                          its docstring and in python.md's table, the
                          same value (no daemon)
  python-kvmm.py restore  a block in host memory: query_prefix() and pins
                          say where it is, TTL pins end by themselves, an
                          early open follows the plan and reloads the
                          bytes written
  python-kvmm.py hash     hash_seed/block_hash/hash_chain give the golden
                          values of tests/hash-golden.c (and of the byte
                          layout packed here, hashed by libxxhash itself);
                          a writer process publishes under its own chain,
                          this process opens the prefix with its own
The cases live in tests/python-kvmm/ by area: cases_share.py (share,
hash), cases_api.py (errors, layout, stats, tierstats, olddaemon,
example), cases_parity.py (parity), cases_restore.py (restore),
cases_sessions.py (fork, pinquota, revoke, viewrace, lost), with
what they share in kvmm_test.py.
Each starts its own kvmmd (host backend, 64 KiB pages) on a socket in a
temporary directory and stops it (exit status 0) at the end.
"""
import os
import sys

# the case modules' bytecode is not written into the source tree
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "python-kvmm"))
from kvmm_test import writer  # noqa: E402 (re-runs under ASan first)
from cases_api import (case_errors, case_example, case_layout,  # noqa: E402
                       case_olddaemon, case_stats, case_tierstats)
from cases_parity import case_parity  # noqa: E402
from cases_restore import case_restore  # noqa: E402
from cases_sessions import (case_fork, case_lost,  # noqa: E402
                            case_pinquota, case_revoke, case_viewrace)
from cases_share import case_hash, case_share, hash_writer  # noqa: E402

CASES = {"example": case_example, "share": case_share, "errors": case_errors,
         "layout": case_layout, "stats": case_stats, "revoke": case_revoke,
         "viewrace": case_viewrace, "hash": case_hash, "fork": case_fork,
         "pinquota": case_pinquota, "tierstats": case_tierstats,
         "olddaemon": case_olddaemon, "parity": case_parity,
         "restore": case_restore, "lost": case_lost}

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "writer":
        sys.exit(writer(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "hashwriter":
        sys.exit(hash_writer(sys.argv[2]))
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: python-kvmm.py %s" % "|".join(CASES), file=sys.stderr)
        sys.exit(2)
    CASES[sys.argv[1]]()
    print("ok")
