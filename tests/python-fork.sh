#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd: a child of os.fork()
# finds the parent's Connection and Region closed without a call into
# libkvmm, leaves 'with' without hanging, connects on its own; the parent's
# session goes on and is quarantined when cut off. Cases live in
# tests/python-kvmm/cases_sessions.py.  Skips (77) without python3.
# timeout: 90
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" fork
