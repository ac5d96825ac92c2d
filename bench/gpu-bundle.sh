#!/bin/bash
# Bundle what bench/gpu-check.sh runs into one small directory, for a GPU
# machine that has the driver but not this project's build tools or
# libraries (a rented or lent node): the GPU test and bench programs,
# kvmmd, kvmm-calibrate, stripped, and the shared libraries they load that
# such a machine may lack (liburing, libnuma, libbpf, libelf, libcudart).
# libcuda itself is never bundled: the machine's driver provides it.
#
#   bench/gpu-bundle.sh [DIR]        (default build-gpu; KVMM_BUILD=build)
#
# Then, on the GPU machine, from a checkout with DIR copied beside it:
#
#   KVMM_BUILD=DIR KVMM_GPU_CHECK_PREBUILT=1 LD_LIBRARY_PATH=$PWD/DIR/lib \
#       bench/gpu-check.sh
set -eu
cd "$(dirname "$0")/.."
build=${KVMM_BUILD:-build}
out=${1:-build-gpu}

make -s -j"$(nproc)"
[ -x "$build/kernels/gpu-test-msa" ] ||
	{ echo "gpu-bundle: $build has no CUDA kernels (no nvcc at build time)"; exit 1; }
rm -rf "$out"
mkdir -p "$out/tests" "$out/bench" "$out/kernels" "$out/lib"
cp "$build/config.h" "$build/config.mk" "$out/"
progs="kvmmd kvmmctl kvmm-calibrate bench/vmm-cuda-timing
	kernels/gpu-test-copy-merge kernels/gpu-test-msa kernels/gpu-bench-msa
	tests/vmm-cuda-pages tests/vmm-cuda-device-select
	tests/vmm-cuda-errno-table tests/vmm-cuda-without-gpu
	tests/vmm-fault-unwind tests/cache-backend-roundtrip tests/cache-host-numa"
for p in $progs; do
	strip -o "$out/$p" "$build/$p"
done
# Every library a bundled program loads but the C runtime's own; the
# dynamic loader and libc stay the machine's.
for p in $progs; do
	ldd "$build/$p" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
	case $(basename "$lib") in
	libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
		libstdc++.so.* | libgcc_s.so.* | libcuda.so.*) ;;
	*) cp -L "$lib" "$out/lib/" ;;
	esac
done
echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)): $(ls "$out/lib" | tr '\n' ' ')"
