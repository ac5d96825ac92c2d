#!/bin/sh
# The CUDA kernels (kernels/*.cu) executed on the CPU by the emulator in
# kernels/emu, checked by the GPU test programs against the float64
# reference and the CPU merge/copy (quick mode), and the benchmark program
# run end to end on toy sizes.  Needs no GPU and no nvcc.
build=${KVMM_BUILD:-build}
# A misspelt mode is refused at once (exit 2, a usage line), not taken
# for the long default run (emu-test-msa's full mode is about a minute
# of CPU here, a GPU check's longer); --help is exit 0.
for t in emu-test-copy-merge emu-test-msa emu-bench-msa; do
	[ -x "$build/kernels/$t" ] || { echo "$build/kernels/$t not built"; exit 1; }
	err=$(timeout 20 "$build/kernels/$t" --quik 2>&1 >/dev/null)
	rc=$?
	[ $rc = 2 ] || { echo "$t --quik: exit $rc, not 2"; exit 1; }
	case $err in *usage:*--quick*) ;; *) echo "$t --quik: no usage line: $err"; exit 1 ;; esac
	timeout 20 "$build/kernels/$t" --quick extra >/dev/null 2>&1
	rc=$?
	[ $rc = 2 ] || { echo "$t --quick extra: exit $rc, not 2"; exit 1; }
	out=$(timeout 20 "$build/kernels/$t" --help 2>/dev/null)
	rc=$?
	[ $rc = 0 ] || { echo "$t --help: exit $rc"; exit 1; }
	case $out in *usage:*) ;; *) echo "$t --help: no usage line: $out"; exit 1 ;; esac
done
for t in emu-test-copy-merge emu-test-msa; do
	[ -x "$build/kernels/$t" ] || { echo "$build/kernels/$t not built"; exit 1; }
	"$build/kernels/$t" --quick || { echo "$t failed"; exit 1; }
done
# The benchmark program end to end (toy sizes; the figures mean nothing).
"$build/kernels/emu-bench-msa" --tiny | grep -q '^{"bench":"gpu-kernels"' ||
	{ echo "emu-bench-msa --tiny failed"; exit 1; }
exit 0
