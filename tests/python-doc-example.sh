#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd: the example of
# Documentation/python.md runs unchanged (but for its socket path) and
# prints the prefix and statistics the document shows.  Cases live in
# tests/python-kvmm/cases_api.py.  Skips (77) without python3.
# timeout: 90
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" example
