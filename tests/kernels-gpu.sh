#!/bin/sh
# The GPU kernel tests (build/kernels/gpu-test-*: CUDA MSA, merge and page
# copy against the CPU references).  Skips when nvcc was missing at build
# time or when there is no GPU.   timeout: 300
build=${KVMM_BUILD:-build}
set -- "$build"/kernels/gpu-test-*
[ -x "$1" ] || { echo "CUDA kernels not built (no nvcc)"; exit 77; }
for t in "$@"; do
	out=$("$t" 2>&1)
	rc=$?
	echo "$out"
	[ $rc = 77 ] && { echo "$(echo "$out" | tail -n 1 | sed 's/^skip: //')"; exit 77; }
	[ $rc = 0 ] || { echo "$(basename "$t") failed (rc=$rc)"; exit 1; }
done
exit 0
