#!/bin/bash
# libkvmm's lending under ThreadSanitizer: four threads of one connection
# grow a sequence each against a quota of exactly the blocks they need,
# so their extends take back the blocks mapped ahead of the others' while
# those extend on the ring and the map-ahead thread runs
# (tests/tsan/lend-threads.c, built here with libkvmm's sources and
# -fsanitize=thread; tests/lib-mapahead-lend-threads.c is the plain
# build).  No race may be reported.  Skips (77) when the compiler has no
# ThreadSanitizer runtime.
# timeout: 300
set -u
. "${KVMM_SRC:-.}/tests/lib/tsan.sh"

tsan_build lend-threads
# 32 blocks of 4 pages of 64 KiB
tsan_daemon --quota "$(id -u)=8M"
KVMM_SOCKET=$tmp/kvmm.sock tsan_run "$tmp/lend-threads"
