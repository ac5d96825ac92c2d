#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd with --pin-quota 2: a
# pin past the connection's quota raises PinQuotaError (a KvmmError,
# EDQUOT) carrying the pins held and the quota from the daemon's refusal,
# with "pin quota" in its message, and survives pickling; nothing was
# pinned, and an unpin makes room; pin_many() (ABI 1.19) gives one result
# a hash, in order (tier, -ENOENT, -EDQUOT, -EINVAL). Cases live in
# tests/python-kvmm/cases_sessions.py.
# Skips (77) without python3.
# timeout: 90
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" pinquota
