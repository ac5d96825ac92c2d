#!/bin/bash
# libkvmm under ThreadSanitizer: two threads run steps of one connection
# while a third has its sequence revoked and extends it again
# (tests/tsan/step-boundaries.c, built here with libkvmm's sources and
# -fsanitize=thread).  No race may be reported: the step boundaries read
# the revocation ring's head without a lock while kvmm_process_revocations()
# moves it, and count steps from several threads.  Skips (77) when the
# compiler has no ThreadSanitizer runtime.
# timeout: 300
set -u
. "${KVMM_SRC:-.}/tests/lib/tsan.sh"

tsan_build step-boundaries
tsan_daemon
tsan_run "$tmp/step-boundaries" "$tmp/kvmm.sock" "$build/kvmmctl"
