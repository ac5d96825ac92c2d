#!/bin/bash
# Python binding (kvmm/python/kvmm.py) against a kvmmd playing ABI 1.18
# (KVMMD_TEST_ABI_MINOR=18): Region.query_prefix() and Connection.pin_many()
# raise EOPNOTSUPP without a round trip; prefix opens, single pins and
# tier_stats() work as with 1.18; against one playing 1.24 tier_stats()
# lists the size cached without its weight (ABI 1.25). Cases live in
# tests/python-kvmm/cases_api.py.
# Skips (77) without python3.
# timeout: 60
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" olddaemon
