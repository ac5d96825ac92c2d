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
#
# What a test leaves behind is its own defect, reported here (78 stale
# /tmp/kvmm-test-* directories had piled up unseen).  Each test runs with
# TMPDIR and KVMM_NVME_TEST_DIR set to fresh directories of its own
# (/tmp/kvmm-run.*, /var/tmp/kvmm-run.*: tests/lib/daemon.c's td_start()
# and every test's temporary files honour them), and with KVMM_TEST_TAG
# in its environment, which every process it starts inherits.  After it:
#   - a process still carrying the tag 5 s after the test ended (a
#     kvmmd it never stopped) is listed in the log and killed, and the
#     test fails: a daemon left running holds pages, sockets and files a
#     later test may reuse, and kvmmd's PR_SET_PDEATHSIG should have
#     ended it;
#   - files left in those directories are listed in the log; a test that
#     passed (or skipped) has them removed and is counted as leaked but
#     not failed (they cost disk, not correctness); a failing test's are
#     kept as evidence and named in the summary.
# A process that resets its environment (env -i) or a file put in /tmp by
# a literal path escapes this.
set -u
cd "$(dirname "$0")/.."
export KVMM_SRC=$PWD
build=${KVMM_BUILD:-build}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac
export KVMM_BUILD=$build
pattern=${1:-}
logs=$build/test-logs
mkdir -p "$logs"

# Where each test's own temporary directories go (see above).
nvme_base=${KVMM_NVME_TEST_DIR:-/var/tmp}

passed=0 failed=0 skipped=0
failed_names=""
leaked_names="" kept=""

timeout_of() {
	local t
	t=$(grep -m1 -o 'timeout: *[0-9]\+' "$1" 2>/dev/null | grep -o '[0-9]\+')
	echo "${t:-120}"
}

# The pids of live processes whose environment holds KVMM_TEST_TAG=$1.
tagged_pids() {
	grep -lsxzF -- "KVMM_TEST_TAG=$1" /proc/[0-9]*/environ 2>/dev/null |
		sed 's|^/proc/\([0-9]*\)/environ$|\1|'
}

# Processes the test left running: wait up to 5 s for them to go (a
# daemon that got PR_SET_PDEATHSIG's SIGTERM as the test exited may still
# be shutting down), then list what is left in the log and kill it by
# pid.  Prints how many were left.
left_running() { # tag log
	local tag=$1 log=$2 pids left i
	for i in $(seq 50); do
		pids=$(tagged_pids "$tag")
		[ -z "$pids" ] && break
		sleep 0.1
	done
	if [ -z "$pids" ]; then
		echo 0
		return
	fi
	left=$(echo "$pids" | wc -l)
	{
		echo "---- left running after the test (killed by the runner) ----"
		ps -o pid=,ppid=,etime=,args= -p "$(echo "$pids" | paste -sd,)"
	} >>"$log" 2>&1
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null
	for i in $(seq 20); do
		pids=$(tagged_pids "$tag")
		[ -z "$pids" ] && break
		sleep 0.1
	done
	# shellcheck disable=SC2086
	[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
	echo "$left"
}

run_one() { # name command source
	local name=$1 cmd=$2 src=$3 t rc start end log tag tmp nvme nleft
	local files secs verdict note="" d
	t=$(timeout_of "$src")
	log=$logs/$name.log
	tag=$$.$name
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-run.XXXXXX") &&
		nvme=$(mktemp -d "$nvme_base/kvmm-run.XXXXXX") &&
		chmod 1777 "$tmp" "$nvme" || {
		echo "run.sh: cannot make the test's directories" >&2
		exit 1
	}
	start=$(date +%s.%N)
	TMPDIR=$tmp KVMM_NVME_TEST_DIR=$nvme KVMM_TEST_TAG=$tag \
		timeout -k 5 "$t" "$cmd" >"$log" 2>&1 </dev/null
	rc=$?
	end=$(date +%s.%N)
	secs=$(awk "BEGIN { printf \"%.1f\", $end - $start }")
	[ $rc = 124 ] && echo "(timed out after ${t}s)" >>"$log"
	case $rc in
	0) verdict=PASS ;;
	77) verdict=SKIP ;;
	*) verdict=FAIL ;;
	esac
	nleft=$(left_running "$tag" "$log")
	if [ "$nleft" != 0 ]; then
		note="left $nleft process(es) running"
		if [ $verdict != FAIL ]; then
			echo "runner: FAIL: $note" >>"$log"
			verdict=FAIL
			rc="$rc, $nleft left running"
		fi
	fi
	files=$(find "$tmp" "$nvme" -mindepth 1 -maxdepth 1 | wc -l)
	if [ "$files" != 0 ]; then
		{
			echo "---- left behind in $tmp and $nvme ----"
			find "$tmp" "$nvme" -mindepth 1 -maxdepth 2 | head -n 40
		} >>"$log"
		note="${note:+$note, }left $files file(s)"
	fi
	if [ -n "$note" ] && [ $verdict != FAIL ]; then
		leaked_names="$leaked_names $name"
	fi
	if [ $verdict = FAIL ] && [ "$files" != 0 ]; then
		# the evidence stays; empty ones go
		rmdir "$tmp" "$nvme" 2>/dev/null
		for d in "$tmp" "$nvme"; do
			[ -d "$d" ] && kept="$kept $name:$d"
		done
	else
		rm -rf "$tmp" "$nvme"
	fi
	case $verdict in
	PASS)
		passed=$((passed + 1))
		printf 'PASS  %-44s %6ss%s\n' "$name" "$secs" \
			"${note:+  ($note: see its log)}" ;;
	SKIP)
		skipped=$((skipped + 1))
		printf 'SKIP  %-44s %s%s\n' "$name" \
			"$(grep -v '^$' "$log" | grep -v '^runner: \|^----' |
				tail -n 1)" "${note:+  ($note)}" ;;
	FAIL)
		failed=$((failed + 1))
		failed_names="$failed_names $name"
		printf 'FAIL  %-44s rc=%s %6ss%s\n' "$name" "$rc" "$secs" \
			"${note:+  ($note)}"
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

[ -n "$leaked_names" ] &&
	echo "leaked: $(echo $leaked_names | wc -w) passed or skipped but left files (listed in their logs, removed):$leaked_names"
[ -n "$kept" ] && echo "kept for inspection (remove when done):$kept"
[ -n "$failed_names" ] && echo "failed:$failed_names (logs in $logs)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
