#!/bin/bash
# Python binding (kvmm/python/kvmm), real kvmmd whose GPU tier holds 2
# blocks: of 3 blocks published one goes to host memory; query_prefix()
# and pin()/pin_many() tiers say where each is, a TTL pin expires at the
# daemon's CLOCK_MONOTONIC + ttl_ns and its record ends by itself,
# priority-only and demotable pins replace a record; an early prefix open
# follows the plan the query predicts (reloaded-host), wait_ready() finds
# nothing failed, and every layer's K and V are the bytes written. Case in
# tests/python-kvmm/cases_restore.py.  Skips (77) without python3.
# timeout: 60
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" restore
