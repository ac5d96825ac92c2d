#!/bin/sh
# Run every benchmark once (bench/NAME binaries, then bench/*.sh except the
# GPU checks, which need a GPU machine, and the GPU bundle, which packages
# programs for one and measures nothing).  Each prints its own ratio
# against a baseline measured in the same run.  Exit 0 when every one
# exited 0 or 77 (it needs hardware or a file this machine lacks, and
# said why), 1 otherwise.
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
# One benchmark: its output, then its exit and wall time, so a whole run's
# log says which ones took the time (Documentation/performance.md).
# 77: it needs hardware or a file this machine lacks (it said why): first
# the programs' GPU and root checks, then first-publish.sh without
# python3 and the replays without the trace, which failed `make bench`
# before scripts were judged as the programs are.
run_one() {
	echo "== $1"
	t0=$(date +%s)
	KVMM_BUILD=$build "$1"
	rc=$?
	echo "-- $1: exit $rc, $(($(date +%s) - t0)) s"
	[ $rc = 0 ] || [ $rc = 77 ] || status=1
}
for b in "$build"/bench/*; do
	[ -x "$b" ] || continue
	case $(basename "$b") in *"$pattern"*) ;; *) continue ;; esac
	[ $list = 1 ] && { echo "$b"; continue; }
	run_one "$b"
done
for s in bench/*.sh; do
	# gpu-bundle.sh is not a benchmark: it builds, then copies programs
	# into build-gpu/ and fails where no CUDA kernels were built, which
	# failed `make bench` on every machine without nvcc.
	# gpu-check-kernels.sh is gpu-check.sh's second half (gpu-check.sh
	# calls it): a GPU check with its own table and no JSON line, which
	# here ran `make all` and said "nothing to check".
	case $s in
	bench/run.sh | bench/gpu-check.sh | bench/gpu-check-kernels.sh | bench/gpu-bundle.sh)
		continue
		;;
	esac
	case $(basename "$s") in *"$pattern"*) ;; *) continue ;; esac
	[ $list = 1 ] && { echo "$s"; continue; }
	run_one "$s"
done
exit $status
