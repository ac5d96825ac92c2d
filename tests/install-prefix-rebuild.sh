#!/bin/bash
# The install paths compiled into objects follow PREFIX: in a build
# directory of its own, objects built with PREFIX=P1 hold P1's profile
# directory (cost_model.o: what kvmmd, kvmm-replay and kvmm-calibrate
# search) and LIBDIR (telemetry_bpf.o: BPF telemetry's default libkvmm),
# and libkvmm.pc says prefix=P1; a second make with the same paths
# rebuilds none of them; a make with PREFIX=P2 (as `make install
# PREFIX=/usr` after a plain `make`) rebuilds them with P2's paths and
# none of P1's, and LIBDIR= on its own moves libdir= and telemetry's.
# timeout: 240
set -u
src=${KVMM_SRC:-.}
cd "$src" || exit 1
d=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-prefix.XXXXXX")
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
b=$d/b
cost=$b/obj/kvmm/policy/cost_model.o
tel=$b/obj/ebpf/telemetry_bpf.o
pc=$b/libkvmm.pc

# A make of our own, not a sub-make of `make check`'s jobserver.
mk() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s BUILD="$b" "$@" \
		"$cost" "$tel" "$pc" >>"$d/make.log" 2>&1 ||
		{ cat "$d/make.log"; fail "make $*"; }
}
has() { grep -aqF "$2" "$1"; }
mtimes() { stat -c %Y.%y "$cost" "$tel" "$pc"; }

mk PREFIX="$d/p1"
bpf=0
grep -q '^#define HAVE_BPF 1' "$b/config.h" && bpf=1
has "$cost" "$d/p1/share/kvmm/profiles" || fail "cost_model.o: no $d/p1/share/kvmm/profiles"
[ $bpf = 0 ] || has "$tel" "$d/p1/lib" || fail "telemetry_bpf.o: no $d/p1/lib"
grep -qx "prefix=$d/p1" "$pc" || { cat "$pc"; fail ".pc: not prefix=$d/p1"; }

before=$(mtimes)
sleep 1.1
mk PREFIX="$d/p1"
[ "$(mtimes)" = "$before" ] || fail "the same PREFIX rebuilt something"

mk PREFIX="$d/p2"
has "$cost" "$d/p2/share/kvmm/profiles" || fail "PREFIX=p2: cost_model.o not rebuilt with p2's profiles"
has "$cost" "$d/p1/" && fail "PREFIX=p2: cost_model.o still holds p1"
if [ $bpf = 1 ]; then
	has "$tel" "$d/p2/lib" || fail "PREFIX=p2: telemetry_bpf.o not rebuilt with p2's LIBDIR"
	has "$tel" "$d/p1/" && fail "PREFIX=p2: telemetry_bpf.o still holds p1"
fi
grep -qx "prefix=$d/p2" "$pc" && grep -qx "libdir=$d/p2/lib" "$pc" ||
	{ cat "$pc"; fail ".pc not rewritten for PREFIX=p2"; }

mk PREFIX="$d/p2" LIBDIR="$d/p2/lib64"
grep -qx "libdir=$d/p2/lib64" "$pc" || { cat "$pc"; fail ".pc: not libdir=$d/p2/lib64"; }
[ $bpf = 0 ] || has "$tel" "$d/p2/lib64" || fail "LIBDIR=lib64: telemetry_bpf.o not rebuilt"
echo "ok: objects and libkvmm.pc follow PREFIX and LIBDIR (bpf $bpf)"
