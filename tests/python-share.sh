#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd: a Python process writes
# known bytes into two blocks and publishes them; a second Python process
# opens the prefix (plain and with the action plan) and reads the same bytes
# on the same pages, then unshares one (copy-on-write, ABI 1.20: writable,
# the cache's copy unchanged); the shared and daemon counts are asserted. Cases live
# in tests/python-kvmm/cases_share.py.  Skips (77) without python3.
# timeout: 90
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" share
