#!/bin/bash
# The cuda backend's own code, end to end, without a GPU: build the mock
# libcuda (tests/vmm-cuda-mock/libcuda.c: the Driver API VMM calls on
# memfds, strict about contexts, handle types and sizes, failing the
# process on any leaked allocation, range, mapping, stream or context
# reference) and run the GPU tests, the fault-injection sweep and the
# timing program against it through KVMM_LIBCUDA, and kvmmd end to end
# (tests/cache-backend-roundtrip) through LD_LIBRARY_PATH.
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
	"$src/tests/vmm-cuda-mock/libcuda.c" -o "$mock" || { echo "mock libcuda did not build"; exit 1; }
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
run 0 "fault-injection sweep over the cuda backend" \
	env KVMM_FAULT_BACKEND=cuda "$build/tests/vmm-fault-unwind"
run 0 "kvmmd and a client on the mock: host tier placed by the GPU's PCI address" \
	env KVMM_TEST_GPU_PCI=1 LD_LIBRARY_PATH="$(dirname "$mock")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$build/tests/cache-host-numa"
run 0 "kvmmd on the cuda backend: blocks written, shared, demoted and restored through cuMemcpy" \
	env KVMM_TEST_BACKEND=cuda LD_LIBRARY_PATH="$(dirname "$mock")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$build/tests/cache-backend-roundtrip"
run 77 "no device: the cuda tests skip" \
	env KVMM_MOCK_DEVICES=0 "$build/tests/vmm-cuda-pages"
run 0 "timing program on the mock" \
	"$build/bench/vmm-cuda-timing" --pages 8
grep -q '"bench":"vmm-cuda-timing"' "$build/vmm-cuda-mock/out" ||
	{ echo "FAIL: timing printed no JSON line"; fail=1; }
exit $fail
