#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd: kvmmctl revoke: the poll
# fd turns readable, process_revocations() counts the pages, the sequence is
# cut and the views over the revoked blocks are released. Cases live in
# tests/python-kvmm/cases_sessions.py.  Skips (77) without python3.
# timeout: 90
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" revoke
