#!/bin/bash
# Python binding (kvmm/python/kvmm), no daemon: every function of kvmm.h
# is bound, has a Python counterpart whose docstring names it and a row in
# Documentation/python.md's API table; every struct of kvmm.h is mirrored;
# every public constant (ABI_MINOR included) is the C compiler's value;
# every public method has a docstring. Case in
# tests/python-kvmm/cases_parity.py.  Skips (77) without python3.
# timeout: 60
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" parity
