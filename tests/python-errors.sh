#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd: every libkvmm error
# raises KvmmError with its errno (extend past max_tokens, bad and closed
# sequence ids, unbacked blocks, pins of uncached hashes...), bad Python
# arguments raise TypeError/ValueError before C, closed regions and
# connections ValueError, released views ValueError; the connection keeps
# working after each. Cases live in tests/python-kvmm/cases_api.py.
# Skips (77) without python3.
# timeout: 90
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" errors
