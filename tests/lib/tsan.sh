# shellcheck shell=bash
# Sourced by the libkvmm ThreadSanitizer tests (tests/lib-tsan-*.sh).
# Skips (77) when the compiler has no ThreadSanitizer runtime; otherwise
# sets src, build and a fresh $tmp that is removed on exit, after the
# daemon is stopped, and defines:
#   tsan_build NAME          build tests/tsan/NAME.c with libkvmm's sources
#                            (and what they link against) under
#                            -fsanitize=thread into $tmp/NAME; exit 1 if
#                            that fails
#   tsan_daemon ARGS         kvmmd --backend host --socket $tmp/kvmm.sock
#                            --page-size 64K --gpu-mem 64M --telemetry off
#                            ARGS in the foreground (log $tmp/kvmmd.log,
#                            pid $daemon), waiting up to 30 s for its socket
#   tsan_run PROGRAM ARGS    run it with TSan's exit status for a race (66):
#                            FAIL on a race or any other failure, else says
#                            no race was reported
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

tsan_build()
{
	local libs cuda_inc=

	libs=$(sed -n 's/^LIBKVMM_LIBS := //p' "$build/config.mk")
	if grep -q '^HAVE_CUDA_H := 1' "$build/config.mk"; then
		cuda_inc=-I$(sed -n 's/^CUDA_HOME := //p' "$build/config.mk")/include
	fi
	# (the rings' fences are not modelled by TSan: -Wno-tsan; no race
	# is reported through them in these tests)
	# shellcheck disable=SC2086
	if ! "$cc" -D_GNU_SOURCE -I. -Ikvmm/include -I"$build" $cuda_inc \
		-include "$build/config.h" -DKVMM_VERSION='"tsan"' \
		-std=gnu11 -O1 -g -pthread -fsanitize=thread -Wno-tsan \
		-o "$tmp/$1" "tests/tsan/$1.c" \
		kvmm/lib/*.c kvmm/kvmmd/salt.c kvmm/kvmmd/siphash.c vmm/*.c \
		kvmm/policy/*.c $libs -ldl -lm -lrt >"$tmp/cc.log" 2>&1; then
		cat "$tmp/cc.log"
		echo "FAIL: the ThreadSanitizer build failed"
		exit 1
	fi
}

tsan_daemon()
{
	"$build/kvmmd" --foreground --backend host --socket "$tmp/kvmm.sock" \
		--page-size 64K --gpu-mem 64M --telemetry off "$@" \
		>"$tmp/kvmmd.log" 2>&1 &
	daemon=$!
	for _ in $(seq 300); do
		[ -S "$tmp/kvmm.sock" ] && return 0
		sleep 0.1
	done
	tail -20 "$tmp/kvmmd.log"
	echo "FAIL: kvmmd made no socket in 30 s"
	exit 1
}

tsan_run()
{
	local rc

	TSAN_OPTIONS="exitcode=66 halt_on_error=0" "$@"
	rc=$?
	if [ $rc = 66 ]; then
		echo "FAIL: ThreadSanitizer reported a data race (above)"
		exit 1
	fi
	[ $rc = 0 ] || {
		echo "FAIL: exit status $rc"
		tail -20 "$tmp/kvmmd.log"
		exit 1
	}
	echo "ok: no race reported"
}
