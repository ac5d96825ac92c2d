#!/bin/bash
# `make bench` (bench/run.sh) runs every benchmark: each build/bench
# program and each bench/*.sh but the runner itself, the GPU checks (a GPU
# machine's: gpu-check.sh and gpu-check-kernels.sh, which it calls) and
# the GPU bundle, which measures nothing: it rebuilt the tree, filled
# build-gpu/ and, on a machine without nvcc, exited 1, so `make bench`
# failed there.  bench/run.sh --list says what it would run.  A script
# that skips (77, as first-publish.sh without python3 and the replays
# without their trace do) passes as a program that skips does: it failed
# `make bench` before; checked on a copy of the runner with stand-ins.
set -u
cd "${KVMM_SRC:-.}"
B=${KVMM_BUILD:-build}
out=$(KVMM_BUILD=$B bench/run.sh --list) || { echo "FAIL: --list exit $?"; exit 1; }
echo "$out"
[ -n "$out" ] || { echo "FAIL: nothing listed"; exit 1; }
for s in bench/run.sh bench/gpu-check.sh bench/gpu-check-kernels.sh bench/gpu-bundle.sh; do
	if grep -qx "$s" <<<"$out"; then
		echo "FAIL: $s listed"
		exit 1
	fi
done
want=0
for s in bench/*.sh; do
	case $s in bench/run.sh | bench/gpu-check.sh | bench/gpu-check-kernels.sh | bench/gpu-bundle.sh) continue ;; esac
	grep -qx "$s" <<<"$out" || { echo "FAIL: $s not listed"; exit 1; }
	want=$((want + 1))
done
for b in "$B"/bench/*; do
	[ -x "$b" ] || continue
	grep -qx "$b" <<<"$out" || { echo "FAIL: $b not listed"; exit 1; }
	want=$((want + 1))
done
[ "$(wc -l <<<"$out")" = $want ] || { echo "FAIL: $want expected"; exit 1; }
# a pattern still selects
one=$(KVMM_BUILD=$B bench/run.sh --list soak)
[ "$one" = bench/soak.sh ] || { echo "FAIL: --list soak gave '$one'"; exit 1; }

# the exit: 0 when each benchmark exited 0 or 77, 1 when one failed
# (KVMM_BUILD names the stand-ins' build: make check's names the real one)
t=$(mktemp -d /tmp/kvmm-bench-run-XXXXXX)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/bench" "$t/build/bench"
cp bench/run.sh "$t/bench/"
stand_in() { printf '#!/bin/sh\necho "%s"\nexit %d\n' "$2" "$3" >"$1" && chmod +x "$1"; }
stand_in "$t/build/bench/prog-skip" "prog-skip: no GPU" 77
stand_in "$t/build/bench/prog-ok" "prog-ok" 0
stand_in "$t/bench/script-skip.sh" "script-skip: trace absent" 77
stand_in "$t/bench/script-ok.sh" "script-ok" 0
KVMM_BUILD="$t/build" "$t/bench/run.sh" >"$t/log" 2>&1
rc=$?
cat "$t/log"
[ $rc = 0 ] || { echo "FAIL: a script's 77 made bench/run.sh exit $rc"; exit 1; }
grep -qx -- "-- bench/script-skip.sh: exit 77, [0-9]* s" "$t/log" ||
	{ echo "FAIL: no exit line for script-skip.sh"; exit 1; }
stand_in "$t/bench/script-fail.sh" "script-fail" 1
KVMM_BUILD="$t/build" "$t/bench/run.sh" >"$t/log" 2>&1 && { echo "FAIL: a script's exit 1 passed"; exit 1; }
stand_in "$t/bench/script-fail.sh" "script-fail" 0
stand_in "$t/build/bench/prog-fail" "prog-fail" 2
KVMM_BUILD="$t/build" "$t/bench/run.sh" >"$t/log" 2>&1 && { echo "FAIL: a program's exit 2 passed"; exit 1; }
echo "ok: $want benchmarks listed, the GPU checks and bundle left out; 77 skips, 1 and 2 fail"
