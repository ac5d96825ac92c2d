#!/bin/bash
# Test runner: runs every test binary in $KVMM_BUILD/tests and every
# tests/*.sh script, each under a timeout, one at a time.
#   exit 0 = pass, 77 = skip (the last line of output is the reason),
#   anything else (or a timeout) = fail.
# Ends with exactly one line "N passed, N failed, N skipped" and exits 1 if
# anything failed.
#
#   tests/run.sh [PATTERN]    only tests whose name contains PATTERN
#
# A test may ask for a longer timeout with a line "timeout: SECONDS" in a
# comment of its source (default 120 s).
set -u
cd "$(dirname "$0")/.."
export KVMM_SRC=$PWD
build=${KVMM_BUILD:-build}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac
export KVMM_BUILD=$build
pattern=${1:-}
logs=$build/test-logs
mkdir -p "$logs"

passed=0 failed=0 skipped=0
failed_names=""

timeout_of() {
	local t
	t=$(grep -m1 -o 'timeout: *[0-9]\+' "$1" 2>/dev/null | grep -o '[0-9]\+')
	echo "${t:-120}"
}

run_one() { # name command source
	local name=$1 cmd=$2 src=$3 t rc start end log
	t=$(timeout_of "$src")
	log=$logs/$name.log
	start=$(date +%s.%N)
	timeout -k 5 "$t" "$cmd" >"$log" 2>&1 </dev/null
	rc=$?
	end=$(date +%s.%N)
	local secs
	secs=$(awk "BEGIN { printf \"%.1f\", $end - $start }")
	case $rc in
	0)
		passed=$((passed + 1))
		printf 'PASS  %-44s %6ss\n' "$name" "$secs" ;;
	77)
		skipped=$((skipped + 1))
		printf 'SKIP  %-44s %s\n' "$name" "$(grep -v '^$' "$log" | tail -n 1)" ;;
	*)
		failed=$((failed + 1))
		failed_names="$failed_names $name"
		[ $rc = 124 ] && echo "(timed out after ${t}s)" >>"$log"
		printf 'FAIL  %-44s rc=%s %6ss\n' "$name" "$rc" "$secs"
		tail -n 40 "$log" | sed 's/^/      | /' ;;
	esac
}

for bin in "$build"/tests/*; do
	[ -f "$bin" ] && [ -x "$bin" ] || continue
	name=$(basename "$bin")
	[ -n "$pattern" ] && [[ $name != *"$pattern"* ]] && continue
	run_one "$name" "$bin" "tests/$name.c"
done
for script in tests/*.sh; do
	[ -f "$script" ] || continue
	name=$(basename "$script" .sh)
	[ "$name" = run ] && continue
	[ -n "$pattern" ] && [[ $name != *"$pattern"* ]] && continue
	run_one "$name" "$PWD/$script" "$script"
done

[ -n "$failed_names" ] && echo "failed:$failed_names (logs in $logs)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
