#!/bin/bash
# `make bench` (bench/run.sh) runs every benchmark: each build/bench
# program and each bench/*.sh but the runner itself, the GPU check (a GPU
# machine's) and the GPU bundle, which measures nothing: it rebuilt the
# tree, filled build-gpu/ and, on a machine without nvcc, exited 1, so
# `make bench` failed there.  bench/run.sh --list says what it would run.
set -u
cd "${KVMM_SRC:-.}"
B=${KVMM_BUILD:-build}
out=$(KVMM_BUILD=$B bench/run.sh --list) || { echo "FAIL: --list exit $?"; exit 1; }
echo "$out"
[ -n "$out" ] || { echo "FAIL: nothing listed"; exit 1; }
for s in bench/run.sh bench/gpu-check.sh bench/gpu-bundle.sh; do
	if grep -qx "$s" <<<"$out"; then
		echo "FAIL: $s listed"
		exit 1
	fi
done
want=0
for s in bench/*.sh; do
	case $s in bench/run.sh | bench/gpu-check.sh | bench/gpu-bundle.sh) continue ;; esac
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
echo "ok: $want benchmarks listed, the GPU check and bundle left out"
