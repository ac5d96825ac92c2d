#!/bin/sh
# The CUDA kernels (kernels/*.cu) executed on the CPU by the emulator in
# kernels/emu, checked by the GPU test programs against the float64
# reference and the CPU merge/copy (quick mode), and the benchmark program
# run end to end on toy sizes.  Needs no GPU and no nvcc.
build=${KVMM_BUILD:-build}
for t in emu-test-copy-merge emu-test-msa; do
	[ -x "$build/kernels/$t" ] || { echo "$build/kernels/$t not built"; exit 1; }
	"$build/kernels/$t" --quick || { echo "$t failed"; exit 1; }
done
# The benchmark program end to end (toy sizes; the figures mean nothing).
"$build/kernels/emu-bench-msa" --tiny | grep -q '^{"bench":"gpu-kernels"' ||
	{ echo "emu-bench-msa --tiny failed"; exit 1; }
exit 0
