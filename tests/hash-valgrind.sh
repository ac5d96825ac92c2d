#!/bin/bash
# Block hashes read no uninitialised memory: hash-golden's hashes (the
# policy library's and libkvmm's) under valgrind memcheck.  An
# XXH3_state_t on the stack was reset with a seed without
# XXH3_INITSTATE(), so reset_withSeed() compared the stale seed in it
# with the one asked for and kept the stale secret when they matched:
# the same tokens could hash differently.
set -u
B=${KVMM_BUILD:-build}
T=$B/tests/hash-golden
[ -x "$T" ] || { echo "skip: $T not built"; exit 77; }
command -v valgrind >/dev/null || { echo "skip: valgrind missing (make deps)"; exit 77; }
# a sanitizer build has its own shadow memory: valgrind cannot run it
if nm "$T" 2>/dev/null | grep -q __asan_init; then
	echo "skip: $T is an ASan build"; exit 77
fi
valgrind -q --error-exitcode=99 --track-origins=yes "$T" >/dev/null 2>&1 &&
	{ echo "ok: no uninitialised read"; exit 0; }
rc=$?
valgrind -q --track-origins=yes "$T" 2>&1 | head -30
echo "FAIL: valgrind memcheck exit $rc"
exit 1
