# shellcheck shell=bash
# Sourced by the libkvmm ThreadSanitizer tests (tests/lib-tsan-*.sh).
# Skips (77) when the compiler has no ThreadSanitizer runtime; otherwise
# sets src, build and a fresh $tmp that is removed on exit, after the
# daemon is stopped, and defines:
#   tsan_build NAME          build tests/tsan/NAME.c with libkvmm's sources
#                            (and what they link against) under
#                            -fsanitize=thread into $tmp/NAME; exit 1 if
#                            that fails; the sources' objects are kept in
#                            $build/tsan for the next test (tsan_objs)
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
daemon=0
# (not kill 0 before a daemon started: that would signal the whole
# process group, the test's runner with it)
trap '[ "$daemon" != 0 ] && kill $daemon 2>/dev/null && wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT

cc=${CC:-cc}
if ! echo 'int main(void){return 0;}' |
	"$cc" -x c -fsanitize=thread -o "$tmp/probe" - 2>/dev/null; then
	echo "skip: $cc has no ThreadSanitizer runtime (-fsanitize=thread)"
	exit 77
fi

# libkvmm's sources and what they link against, compiled once into
# $build/tsan/KEY (KEY: a hash of the compiler, the flags, config.h and
# every source and header under kvmm/, vmm/ and ebpf/), $(nproc) at a
# time: both tests link the same objects, and any change to the tree
# compiles them again.  Sets tsan_objdir.
tsan_objs()
{
	local key new s o
	local -a tsan_srcs

	# libkvmm's sources as the Makefile has them (kvmm/build.mk): a
	# list here lacked kvmm/kvmmd/knob_text.c once it joined (7 December)
	mapfile -t tsan_srcs < <(env -u MAKEFLAGS -u MAKELEVEL make -s \
		--no-print-directory libkvmm-sources)
	if [ "${#tsan_srcs[@]}" -lt 10 ]; then
		echo "FAIL: make libkvmm-sources listed ${#tsan_srcs[@]} sources"
		exit 1
	fi

	key=$({
		echo "$cc ${tsan_flags[*]}"
		"$cc" --version
		cat "$build"/*.h "$build/config.mk"
		find kvmm vmm ebpf -name '*.[ch]' -print0 | sort -z | xargs -0 sha256sum
	} | sha256sum | cut -c1-16)
	tsan_objdir=$build/tsan/$key
	[ -d "$tsan_objdir" ] && return 0
	# another tree's objects go
	for o in "$build"/tsan/*; do
		case $o in */new.*) ;; *) rm -rf "$o" ;; esac
	done
	new=$build/tsan/new.$$
	mkdir -p "$new" || exit 1
	for s in "${tsan_srcs[@]}"; do
		while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
		"$cc" "${tsan_flags[@]}" -c -o "$new/${s//\//_}.o" "$s" \
			>"$new/${s//\//_}.log" 2>&1 &
	done
	wait
	for s in "${tsan_srcs[@]}"; do
		[ -f "$new/${s//\//_}.o" ] && continue
		cat "$new/${s//\//_}.log"
		rm -rf "$new"
		echo "FAIL: the ThreadSanitizer build of $s failed"
		exit 1
	done
	rm -f "$new"/*.log
	# a tree that made the same objects meanwhile keeps its own
	mv -T "$new" "$tsan_objdir" 2>/dev/null || rm -rf "$new"
}

tsan_build()
{
	local libs cuda_inc=

	libs=$(sed -n 's/^LIBKVMM_LIBS := //p' "$build/config.mk")
	if grep -q '^HAVE_CUDA_H := 1' "$build/config.mk"; then
		cuda_inc=-I$(sed -n 's/^CUDA_HOME := //p' "$build/config.mk")/include
	fi
	# (the rings' fences are not modelled by TSan: -Wno-tsan; no race
	# is reported through them in these tests)
	tsan_flags=(-D_GNU_SOURCE -I. -Ikvmm/include -I"$build"
		-include "$build/config.h" -DKVMM_VERSION='"tsan"'
		-std=gnu11 -O1 -g -pthread -fsanitize=thread -Wno-tsan)
	[ -n "$cuda_inc" ] && tsan_flags+=("$cuda_inc")
	tsan_objs
	# shellcheck disable=SC2086
	if ! "$cc" "${tsan_flags[@]}" -o "$tmp/$1" "tests/tsan/$1.c" \
		"$tsan_objdir"/*.o $libs -ldl -lm -lrt >"$tmp/cc.log" 2>&1; then
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
