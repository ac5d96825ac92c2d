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
src=${KVMM_SRC:-.}
build=${KVMM_BUILD:-$src/build}
cd "$src" || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-tsan.XXXXXX")
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
daemon=0

cc=${CC:-cc}
if ! echo 'int main(void){return 0;}' |
	"$cc" -x c -fsanitize=thread -o "$tmp/probe" - 2>/dev/null; then
	echo "skip: $cc has no ThreadSanitizer runtime (-fsanitize=thread)"
	exit 77
fi
libs=$(sed -n 's/^LIBKVMM_LIBS := //p' "$build/config.mk")
cuda_inc=
if grep -q '^HAVE_CUDA_H := 1' "$build/config.mk"; then
	cuda_inc=-I$(sed -n 's/^CUDA_HOME := //p' "$build/config.mk")/include
fi
# (the rings' fences are not modelled by TSan: -Wno-tsan)
# shellcheck disable=SC2086
if ! "$cc" -D_GNU_SOURCE -I. -Ikvmm/include -I"$build" $cuda_inc \
	-include "$build/config.h" -DKVMM_VERSION='"tsan"' \
	-std=gnu11 -O1 -g -pthread -fsanitize=thread -Wno-tsan \
	-o "$tmp/lend-threads" tests/tsan/lend-threads.c \
	kvmm/lib/*.c kvmm/kvmmd/salt.c kvmm/kvmmd/siphash.c vmm/*.c kvmm/policy/*.c $libs -ldl -lm -lrt \
	>"$tmp/cc.log" 2>&1; then
	cat "$tmp/cc.log"
	echo "FAIL: the ThreadSanitizer build failed"
	exit 1
fi

# 32 blocks of 4 pages of 64 KiB
"$build/kvmmd" --foreground --backend host --socket "$tmp/kvmm.sock" \
	--page-size 64K --gpu-mem 64M --telemetry off \
	--quota "$(id -u)=8M" >"$tmp/kvmmd.log" 2>&1 &
daemon=$!
for _ in $(seq 300); do
	[ -S "$tmp/kvmm.sock" ] && break
	sleep 0.1
done

KVMM_SOCKET=$tmp/kvmm.sock TSAN_OPTIONS="exitcode=66 halt_on_error=0" \
	"$tmp/lend-threads"
rc=$?
if [ $rc = 66 ]; then
	echo "FAIL: ThreadSanitizer reported a data race (above)"
	exit 1
fi
[ $rc = 0 ] || { echo "FAIL: exit status $rc"; tail -20 "$tmp/kvmmd.log"; exit 1; }
echo "ok: no race reported"
