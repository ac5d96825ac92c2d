#!/bin/bash
# `make install` builds only what it installs: in a build directory of
# its own, the commands `make -n install DESTDIR=` would run link kvmmd,
# kvmmctl and libkvmm.so, make libkvmm.pc and install them, and build no
# test (build/tests/), no test helper (tests/lib, libtesthelp.a), no bench
# (build/bench/) and no GPU test program (build/kernels/); a plain
# `make -n` still builds all of those.  A dry run lists every command
# make would run from a clean tree without compiling anything, so this
# takes seconds, not a build.
# timeout: 120
set -u
cd "${KVMM_SRC:-.}" || exit 1
command -v make >/dev/null || { echo "skip: no make"; exit 77; }
d=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-install-only.XXXXXX")
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
b=$d/b

# A make of our own, not a sub-make of `make check`'s jobserver.
dry() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -n BUILD="$b" "$@" \
		>"$d/out" 2>&1 || { cat "$d/out"; fail "make -n $*"; }
}

dry DESTDIR="$d/root" install
for p in kvmmd kvmmctl kvmm-replay libkvmm.so.1; do
	grep -qE -- "-o $b/$p( |\$)" "$d/out" || fail "make install would not link $b/$p"
done
grep -qF ">$b/libkvmm.pc" "$d/out" || fail "make install would not make libkvmm.pc"
grep -qF "install -m 755 $b/libkvmm.so.1 $d/root" "$d/out" ||
	fail "make install would not install libkvmm.so.1"
grep -E "$b/(tests|bench|kernels)/|$b/obj/(tests|bench)/|$b/libtesthelp\.a" \
	"$d/out" >"$d/extra"
if [ -s "$d/extra" ]; then
	grep -oE "$b/(tests|bench|kernels)/[^ ]*|$b/libtesthelp\.a" "$d/extra" |
		sort -u | head -5
	fail "make install would run $(wc -l <"$d/extra") commands for what it does not install (the first 5 outputs above)"
fi
echo "make install: $(grep -cE -- "-o $b/" "$d/out") outputs, none a test or bench"

rm -rf "$b"
dry
for p in tests/metrics-http-values bench/metrics-flood; do
	grep -qE -- "-o $b/$p( |\$)" "$d/out" || fail "make would not build $b/$p"
done
echo "ok: make install builds only what it installs; make builds the tests"
