#!/bin/sh
# Run every benchmark once (bench/NAME binaries, then bench/*.sh except the
# GPU check, which needs a GPU machine).  Each prints its own ratio against a
# baseline measured in the same run.
#   bench/run.sh [PATTERN]
set -u
cd "$(dirname "$0")/.."
build=${KVMM_BUILD:-build}
pattern=${1:-}
status=0
for b in "$build"/bench/*; do
	[ -x "$b" ] || continue
	case $(basename "$b") in *"$pattern"*) ;; *) continue ;; esac
	echo "== $(basename "$b")"
	"$b"
	rc=$?
	# 77: the benchmark needs hardware this machine lacks (it said why).
	[ $rc = 0 ] || [ $rc = 77 ] || status=1
done
for s in bench/*.sh; do
	case $s in bench/run.sh | bench/gpu-check.sh) continue ;; esac
	case $(basename "$s") in *"$pattern"*) ;; *) continue ;; esac
	echo "== $s"
	KVMM_BUILD=$build "$s" || status=1
done
exit $status
