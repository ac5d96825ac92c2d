#!/bin/bash
# Python binding (kvmm/python/kvmm), real kvmmd killed (SIGKILL) under a
# live session: every call that talks to it raises KvmmError ECONNRESET,
# twice over; lengths, pointers, page ids, views (the bytes written) and
# daemon_info() still answer; close() returns at once and releases the
# views; a new Connection is ECONNREFUSED. Case in
# tests/python-kvmm/cases_sessions.py.  Skips (77) without python3.
# timeout: 60
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" lost
