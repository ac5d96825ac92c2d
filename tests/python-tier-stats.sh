#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd: Connection.tier_stats()
# (kvmm_tier_stats()) after a publish and a prefix open, the same numbers as
# kvmmctl --json status. Cases live in
# tests/python-kvmm/cases_api.py.  Skips (77) without python3.
# timeout: 60
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" tierstats
