#!/bin/bash
# The cuda backend's own code, end to end, without a GPU: build the mock
# libcuda (tests/vmm-cuda-mock/*.c: the Driver API VMM calls on
# memfds, strict about contexts, handle types and sizes, failing the
# process on any leaked allocation, range, mapping, stream or context
# reference) and run the GPU tests, the fault-injection sweep and the
# timing program against it through KVMM_LIBCUDA, and kvmmd end to end
# (tests/cache-backend-roundtrip, tests/cache-restore-inprogress) through
# LD_LIBRARY_PATH.
# timeout: 120
set -u
build=${KVMM_BUILD:?}
src=${KVMM_SRC:-.}
grep -q '^#define HAVE_CUDA_H 1' "$build/config.h" 2>/dev/null ||
	{ echo "built without cuda.h"; exit 77; }
cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
[ -f "$cuda_inc/cuda.h" ] || { echo "no cuda.h in $cuda_inc"; exit 77; }
command -v "${CC:-cc}" >/dev/null 2>&1 ||
	{ echo "no C compiler (${CC:-cc}) to build the mock libcuda"; exit 77; }
mock=$build/vmm-cuda-mock/libcuda.so.1
mkdir -p "$(dirname "$mock")"
${CC:-cc} -std=gnu11 -O1 -g -Wall -Wextra -Werror -Wno-unused-parameter \
	-D_GNU_SOURCE -I"$cuda_inc" -shared -fPIC -pthread \
	"$src"/tests/vmm-cuda-mock/*.c -o "$mock" || { echo "mock libcuda did not build"; exit 1; }
export KVMM_LIBCUDA=$mock
fail=0

run() { # expected-rc description command...
	local want=$1 what=$2 rc
	shift 2
	"$@" >"$build/vmm-cuda-mock/out" 2>&1
	rc=$?
	if [ "$rc" != "$want" ]; then
		echo "FAIL: $what: rc=$rc, expected $want"
		tail -20 "$build/vmm-cuda-mock/out"
		fail=1
	else
		echo "ok: $what"
	fi
}

run 0 "vmm-cuda-pages on the mock" "$build/tests/vmm-cuda-pages"
run 0 "vmm-cuda-device-select on the mock" "$build/tests/vmm-cuda-device-select"
run 0 "vmm-cuda-synchronize on the mock: a context that cannot be entered is tried again, never taken for a finished wait" \
	"$build/tests/vmm-cuda-synchronize"
run 0 "vmm-cuda-page-size on the mock: a page size that is not a power of two is refused at open" \
	"$build/tests/vmm-cuda-page-size"
run 0 "fault-injection sweep over the cuda backend" \
	env KVMM_FAULT_BACKEND=cuda "$build/tests/vmm-fault-unwind"
run 0 "pool pages zeroed for a new owner through cuMemsetD8Async, waited for" \
	env KVMM_FAULT_BACKEND=cuda "$build/tests/vmm-pool-scrub"
run 0 "pool pages seen by another domain swapped for new allocations (cuMemCreate, export, cuMemRelease)" \
	env KVMM_FAULT_BACKEND=cuda "$build/tests/vmm-pool-renew"
run 0 "no read-only page fd on cuda (an importer sets its own access): the pool says -EOPNOTSUPP, kvmmd sends the exported fd" \
	env KVMM_FAULT_BACKEND=cuda "$build/tests/vmm-pool-page-fd-readonly"
run 0 "kvmmd and a client on the mock: host tier placed by the GPU's PCI address" \
	env KVMM_TEST_GPU_PCI=1 LD_LIBRARY_PATH="$(dirname "$mock")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$build/tests/cache-host-numa"
run 0 "kvmmd on the cuda backend: blocks written, shared, demoted and restored through cuMemcpy, one unshared through cuMemcpyDtoD" \
	env KVMM_TEST_BACKEND=cuda LD_LIBRARY_PATH="$(dirname "$mock")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$build/tests/cache-backend-roundtrip"
run 0 "kvmmd on the cuda backend: a reload whose wait gives up (-EINPROGRESS) is revoked from the early open, its pages never reused" \
	env LD_LIBRARY_PATH="$(dirname "$mock")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$build/tests/cache-restore-inprogress"
run 0 "a client of kvmmd on the second GPU opens that GPU (the HELLO reply's UUID)" \
	env KVMM_MOCK_DEVICES=2 LD_LIBRARY_PATH="$(dirname "$mock")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$build/tests/daemon-gpu-uuid"
# kvmmd --cuda-device by UUID (as a unit per GPU names it): the second of
# two mock GPUs is the one served; an unknown UUID stops the start
mockenv=(env KVMM_MOCK_DEVICES=2 LD_LIBRARY_PATH="$(dirname "$mock")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
uuid1=GPU-10111213-1415-1617-1819-1a1b1c1d1e1f
ddir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-mockdev-XXXXXX")
"${mockenv[@]}" "$build/kvmmd" --foreground --backend cuda --telemetry off \
	--gpu-mem 64M --socket "$ddir/s" --cuda-device "$uuid1" 2>"$ddir/log" &
dpid=$!
for _ in $(seq 200); do [ -S "$ddir/s" ] && break; sleep 0.05; done
if "$build/kvmmctl" --socket "$ddir/s" status --json 2>/dev/null | grep -q "$uuid1"; then
	echo "ok: kvmmd --cuda-device $uuid1 serves that GPU"
else
	echo "FAIL: kvmmd --cuda-device $uuid1"; tail -5 "$ddir/log"; fail=1
fi
kill $dpid; wait $dpid || { echo "FAIL: kvmmd on the mock exited $?"; fail=1; }
"${mockenv[@]}" "$build/kvmmd" --foreground --backend cuda --telemetry off \
	--gpu-mem 64M --socket "$ddir/s2" \
	--cuda-device GPU-99999999-1415-1617-1819-1a1b1c1d1e1f 2>"$ddir/log2"
rc=$?
if [ $rc = 1 ] && grep -q "no device with UUID GPU-99999999" "$ddir/log2"; then
	echo "ok: an unknown --cuda-device UUID stops the start"
else
	echo "FAIL: unknown UUID: rc=$rc"; tail -5 "$ddir/log2"; fail=1
fi
rm -rf "$ddir"
run 77 "no device: the cuda tests skip" \
	env KVMM_MOCK_DEVICES=0 "$build/tests/vmm-cuda-pages"
run 0 "timing program on the mock" \
	"$build/bench/vmm-cuda-timing" --pages 8
grep -q '"bench":"vmm-cuda-timing"' "$build/vmm-cuda-mock/out" ||
	{ echo "FAIL: timing printed no JSON line"; fail=1; }
run 0 "pool-scrub on the mock: scrub and renewal of cuda pages timed" \
	"$build/bench/pool-scrub" --backend cuda --pages 8 --rounds 2
grep -q '"bench":"pool-scrub","backend":"cuda"' "$build/vmm-cuda-mock/out" ||
	{ echo "FAIL: pool-scrub printed no cuda JSON line"; fail=1; }
exit $fail
