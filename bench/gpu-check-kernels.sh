#!/bin/bash
# GPU check for kernels/: build, run the GPU correctness tests (CUDA MSA,
# merge and page copy against the CPU references on fresh random data),
# time MSA (decode bandwidth against a device copy of the same bytes,
# slowdown with 2/4/8/16 segments against 1, merge cost) and measure a
# cost-model profile, then print a short table.  Under 8 minutes on an
# H100/H200.  Called by bench/gpu-check.sh; runs on its own too:
#
#   bench/gpu-check-kernels.sh          (KVMM_BUILD=DIR for another build)
#
# Exit: 0 passed (or nothing to check: no nvcc / no GPU, said in one
# line), 1 a build, test or timing failed.
set -u
cd "$(dirname "$0")/.."
build=${KVMM_BUILD:-build}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "== gpu-check-kernels: building"
if [ "${KVMM_GPU_CHECK_PREBUILT:-0}" = 1 ]; then
	echo "prebuilt: $build"
elif ! make -s -j"$(nproc)" all >"$log/make" 2>&1; then
	tail -30 "$log/make"
	echo "gpu-check-kernels: build failed"
	exit 1
fi
if [ ! -x "$build/kernels/gpu-test-msa" ]; then
	echo "gpu-check-kernels: CUDA kernels not built (no nvcc); nothing to check"
	exit 0
fi
"$build/kernels/gpu-test-copy-merge" >"$log/copy" 2>&1
rc=$?
if [ $rc = 77 ]; then
	echo "gpu-check-kernels: no GPU on this machine ($(tail -n 1 "$log/copy" | sed 's/^skip: //')); nothing to check"
	exit 0
fi
status=0
head -n 1 "$log/copy"
summary=""
note() { summary="$summary$1"$'\n'; }

echo "== gpu-check-kernels: correctness"
for t in gpu-test-copy-merge gpu-test-msa; do
	timeout 240 "$build/kernels/$t" >"$log/$t" 2>&1
	rc=$?
	tail -n 3 "$log/$t"
	if [ $rc = 0 ]; then
		note "PASS  $t"
	else
		tail -n 20 "$log/$t"
		note "FAIL  $t (rc=$rc)"
		status=1
	fi
done

echo "== gpu-check-kernels: timing"
timeout 180 "$build/kernels/gpu-bench-msa" >"$log/bench" 2>&1
rc=$?
cat "$log/bench"
[ $rc = 0 ] || { note "FAIL  gpu-bench-msa (rc=$rc)"; status=1; }

echo "== gpu-check-kernels: calibration (kvmm-calibrate --quick)"
prof=$build/kernels/calibrated.profile
if timeout 120 "$build/kvmm-calibrate" --quick --out "$prof" >"$log/cal" 2>&1; then
	cat "$log/cal"
	note "profile: $prof ($(grep -E '^(gpu_bandwidth|host_bandwidth|msa_alpha)' "$prof" | tr '\n' ' '))"
else
	tail -n 5 "$log/cal"
	note "FAIL  kvmm-calibrate"
	status=1
fi

echo
echo "== gpu-check-kernels summary"
printf '%s' "$summary"
sed -n '/^MSA on this GPU/,/^targets/p' "$log/bench"
grep '^{' "$log/bench"
exit $status
