#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd: every ctypes struct
# mirror (size, field offsets and sizes) against the C compiler's layout of
# kvmm/include/kvmm/kvmm.h. Cases live in
# tests/python-kvmm/cases_api.py.  Skips (77) without python3.
# timeout: 90
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" layout
