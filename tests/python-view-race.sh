#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd: a revocation applied by
# another thread while k_view() is being made never leaves a view over
# unmapped memory (it used to: reading it was SIGSEGV).  Cases live in
# tests/python-kvmm/cases_sessions.py.  Skips (77) without python3.
# timeout: 90
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" viewrace
