#!/bin/bash
# Python binding (kvmm/python/kvmm.py), real kvmmd: kvmm.hash_seed(),
# block_hash(), hash_chain() give the golden values of tests/hash-golden.c
# (also computed from the documented byte layout with libxxhash alone);
# bad token ids are ValueError/TypeError; Region.hash_seed() and a writer
# process's published blocks found by this process's own chain. Cases live
# in tests/python-kvmm/cases_share.py.  Skips (77) without python3.
# timeout: 90
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 not installed"; exit 77; }
exec python3 "${KVMM_SRC:-.}/tests/python-kvmm.py" hash
