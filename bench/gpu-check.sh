#!/bin/bash
# GPU check: on a machine with a GPU, build, run the cuda backend's tests
# and time the CUDA VMM calls per 2 MiB page, then print one short table
# (plus the kernels' table when bench/gpu-check-kernels.sh exists).
# Without a GPU it builds, says so in one line and exits 77.
#
#   bench/gpu-check.sh            (KVMM_LIBCUDA=PATH to pick a libcuda)
#
# KVMM_GPU_CHECK_PREBUILT=1 skips the build and runs what KVMM_BUILD holds
# (a machine without the build tools: bench/gpu-bundle.sh makes the
# directory to carry there).
#
# Exit: 0 all passed, 1 a build, test or timing failed, 77 no GPU.
set -u
cd "$(dirname "$0")/.."
build=${KVMM_BUILD:-build}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "== gpu-check: building"
if [ "${KVMM_GPU_CHECK_PREBUILT:-0}" = 1 ]; then
	echo "prebuilt: $build"
elif ! make -s -j"$(nproc)" >"$log/make" 2>&1; then
	tail -30 "$log/make"
	echo "gpu-check: build failed"
	exit 1
fi

# The timing program opens the cuda backend first: its skip is the
# authoritative "no GPU" answer (no driver, stub driver, or no device).
echo "== gpu-check: timing CUDA VMM calls per 2 MiB page"
"$build"/bench/vmm-cuda-timing --pages "${KVMM_GPU_CHECK_PAGES:-256}" \
	>"$log/timing" 2>"$log/timing.err"
rc=$?
if [ $rc = 77 ]; then
	why=$(grep -m1 -o 'cuda: unavailable: .*' "$log/timing.err" | sed 's/^cuda: unavailable: //')
	echo "gpu-check: no GPU on this machine, nothing to check (${why:-$(grep -m1 '^skip:' "$log/timing")})"
	exit 77
fi
status=0
[ $rc = 0 ] || { cat "$log/timing.err"; echo "gpu-check: timing failed (rc=$rc)"; status=1; }

# What a page that changes owner costs kvmmd's loop on the GPU: a scrub
# (cuMemsetD8Async, waited for) against a renewal (cuMemCreate, export,
# cuMemRelease: a page crossing cache scopes), per 2 MiB page.
echo "== gpu-check: pool scrub and renewal on the cuda backend (bench/pool-scrub)"
if "$build"/bench/pool-scrub --backend cuda --pages "${KVMM_GPU_CHECK_SCRUB_PAGES:-64}" \
	--rounds 5 >"$log/scrub" 2>"$log/scrub.err"; then
	:
else
	cat "$log/scrub.err"
	echo "gpu-check: pool-scrub on cuda failed" | tee "$log/scrub"
	status=1
fi

echo "== gpu-check: cuda backend tests"
KVMM_BUILD=$build tests/run.sh vmm-cuda | tee "$log/tests"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# Every injected failure unwinds on the real driver too.
if KVMM_FAULT_BACKEND=cuda "$build"/tests/vmm-fault-unwind >"$log/fault" 2>&1; then
	echo "fault sweep over cuda: $(tail -n 1 "$log/fault")" | tee -a "$log/tests.extra"
else
	tail -20 "$log/fault"
	echo "fault sweep over cuda: FAILED" | tee -a "$log/tests.extra"
	status=1
fi

# kvmmd on the cuda backend with clients in other processes: blocks
# written through cuMemcpy, shared zero-copy, demoted to host and NVMe and
# restored byte-identical.
echo "== gpu-check: kvmmd on the cuda backend (cache-backend-roundtrip)"
KVMM_TEST_BACKEND=cuda KVMM_BUILD=$build tests/run.sh cache-backend-roundtrip |
	tee "$log/daemon"
if [ "${PIPESTATUS[0]}" = 0 ]; then
	echo "kvmmd on cuda: $(grep -h 'roundtrip ok' "$build/test-logs/cache-backend-roundtrip.log")" |
		tee -a "$log/tests.extra"
	# the host slab, made and pinned at kvmmd's start
	echo "kvmmd on cuda: $(grep -h '^host tier: .*made in' "$build/test-logs/cache-backend-roundtrip.log")" |
		tee -a "$log/tests.extra"
else
	tail -30 "$build/test-logs/cache-backend-roundtrip.log"
	echo "kvmmd on cuda: FAILED" | tee -a "$log/tests.extra"
	status=1
fi

kernels=""
if [ -f bench/gpu-check-kernels.sh ]; then
	echo "== gpu-check: kernels (bench/gpu-check-kernels.sh)"
	KVMM_BUILD=$build bash bench/gpu-check-kernels.sh | tee "$log/kernels"
	case ${PIPESTATUS[0]} in 0 | 77) ;; *) status=1 ;; esac
	kernels=yes
fi

echo
echo "== gpu-check summary"
echo "tests: $(tail -n 1 "$log/tests")"
cat "$log/tests.extra"
grep -v '^{' "$log/timing"
grep '^{' "$log/timing"
grep -v '^{' "$log/scrub"
grep '^{' "$log/scrub"
if [ -n "$kernels" ]; then
	echo "kernels (last lines of bench/gpu-check-kernels.sh):"
	tail -n 15 "$log/kernels"
fi
exit $status
