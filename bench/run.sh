#!/bin/sh
# Run every benchmark once (bench/NAME binaries, then bench/*.sh except the
# GPU check, which needs a GPU machine, and the GPU bundle, which packages
# programs for one and measures nothing).  Each prints its own ratio
# against a baseline measured in the same run.
#   bench/run.sh [PATTERN]
#   bench/run.sh --list [PATTERN]   what it would run, one a line
set -u
cd "$(dirname "$0")/.."
build=${KVMM_BUILD:-build}
list=0
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
pattern=${1:-}
status=0
for b in "$build"/bench/*; do
	[ -x "$b" ] || continue
	case $(basename "$b") in *"$pattern"*) ;; *) continue ;; esac
	[ $list = 1 ] && { echo "$b"; continue; }
	echo "== $(basename "$b")"
	"$b"
	rc=$?
	# 77: the benchmark needs hardware this machine lacks (it said why).
	[ $rc = 0 ] || [ $rc = 77 ] || status=1
done
for s in bench/*.sh; do
	# gpu-bundle.sh is not a benchmark: it builds, then copies programs
	# into build-gpu/ and fails where no CUDA kernels were built, which
	# failed `make bench` on every machine without nvcc.
	case $s in bench/run.sh | bench/gpu-check.sh | bench/gpu-bundle.sh) continue ;; esac
	case $(basename "$s") in *"$pattern"*) ;; *) continue ;; esac
	[ $list = 1 ] && { echo "$s"; continue; }
	echo "== $s"
	KVMM_BUILD=$build "$s" || status=1
done
exit $status
