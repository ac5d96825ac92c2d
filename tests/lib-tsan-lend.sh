#!/bin/bash
# libkvmm's lending under ThreadSanitizer: four threads of one connection
# grow a sequence each against a quota of exactly the blocks they need,
# so their extends take back the blocks mapped ahead of the others' while
# those extend on the ring and the map-ahead thread runs
# (tests/tsan/lend-threads.c, built here with libkvmm's sources and
# -fsanitize=thread; tests/lib-mapahead-lend-threads.c is the plain
# build).  Then the map-ahead thread answering kvmmd's requests for the
# blocks ahead of one connection (ABI 1.20) while that connection's
# engine thread extends over the ring and ends steps, for an extend of
# another connection of the process (tests/tsan/give-ahead.c; the plain
# build is tests/lib-mapahead-lend-procs.c).  No race may be reported.
# Skips (77) when the compiler has no ThreadSanitizer runtime.
# timeout: 300
set -u
. "${KVMM_SRC:-.}/tests/lib/tsan.sh"

tsan_build lend-threads
tsan_build give-ahead
# 32 blocks of 4 pages of 64 KiB
tsan_daemon --quota "$(id -u)=8M"
KVMM_SOCKET=$tmp/kvmm.sock tsan_run "$tmp/lend-threads"
KVMM_SOCKET=$tmp/kvmm.sock tsan_run "$tmp/give-ahead"
