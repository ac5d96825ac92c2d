#!/bin/bash
# build/bench/ipc starts its kvmmd and measures on a machine of two CPUs
# or more.  It pinned itself to the last CPU before starting kvmmd with
# --cpu 0, so kvmmd inherited a one-CPU mask, refused CPU 0 (kvmmd checks
# --cpu against its affinity) and the benchmark, `make bench B=ipc` and
# `make bench` failed everywhere.  Counts are tiny: this checks that it
# runs and prints its ratio, not how fast it is.
set -u
B=${KVMM_BUILD:-build}
IPC=$B/bench/ipc
[ -x "$IPC" ] || { echo "skip: $IPC not built"; exit 77; }
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] ||
	{ echo "skip: one CPU online, ipc does not pin"; exit 77; }
out=$("$IPC" --ring 200 --socket 200 --batched 512 --batch 8 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL: ipc exit $rc"; exit 1; }
grep -q '"pinned":true' <<<"$out" || { echo "FAIL: ipc did not pin"; exit 1; }
grep -qE '^ring/socket p50 ratio: [0-9.]+' <<<"$out" ||
	{ echo "FAIL: no ratio line"; exit 1; }
echo "ok"
