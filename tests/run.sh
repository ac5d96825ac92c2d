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
# /tmp/kvmm-test-* directories had piled up unseen).  The suite gets a
# directory of its own, /tmp/kvmm-run.XXXXXX (and the same name under
# /var/tmp, or under the KVMM_NVME_TEST_DIR given), with a lock file the
# runner holds while it runs (`make clean-test-dirs` removes only suites
# whose lock is free).  Each test runs with TMPDIR and KVMM_NVME_TEST_DIR
# set to fresh directories N in them (tests/lib/daemon.c's td_start() and
# every test's temporary files honour them), with KVMM_TEST_TAG in its
# environment, and under build/tests/runner/reaper (tests/runner/reaper.c),
# a child subreaper that keeps every process the test starts below it and
# watches /tmp, /var/tmp and /sys/fs/bpf for entries its processes make.
# After the test:
#   - a process still running 5 s after it ended (a kvmmd it never
#     stopped, whether it double-forked or cleared its environment with
#     env -i), or one outside that tree still carrying the tag, is listed
#     in the log and killed, and the test fails: a daemon left running
#     holds pages, sockets and files a later test may reuse, and kvmmd's
#     PR_SET_PDEATHSIG should have ended it;
#   - files left in its directories, entries its processes made directly
#     in /tmp or /var/tmp (a literal path), and BPF pins it left in
#     /sys/fs/bpf are listed in the log; a test that passed (or skipped)
#     has them removed and is counted as leaked but not failed (they cost
#     disk or locked memory, not correctness); a failing test's are kept
#     as evidence and named in the summary;
#   - a TMPDIR that is gone (someone's rm -rf /tmp/kvmm-run.*) is said so
#     on its line, since what the test then prints (a failed connect())
#     does not.
# Entries in /tmp, /var/tmp and /sys/fs/bpf are only watched as root
# (fanotify reports no other process's pid without CAP_SYS_ADMIN); the
# runner says so once when they are not.
set -u
cd "$(dirname "$0")/.." || exit 1
export KVMM_SRC=$PWD
build=${KVMM_BUILD:-build}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac
export KVMM_BUILD=$build
pattern=${1:-}
logs=$build/test-logs
mkdir -p "$logs"
reaper=$build/tests/runner/reaper
# How long a test's processes get to end after it (seconds; the
# runner's self-test shortens it).
grace=${KVMM_TEST_GRACE:-5}
grace_steps=$(awk "BEGIN { print int($grace * 10) + 1 }") # of 0.1 s

# Where the suite's directories go (see above).
tmp_base=${TMPDIR:-/tmp}
nvme_base=${KVMM_NVME_TEST_DIR:-/var/tmp}

passed=0 failed=0 skipped=0
fail_line='^(FAIL[: ]|runner: FAIL|[^ :]+\.(c|h):[0-9]+: )'
failed_names=""
leaked_names="" kept=""
said_unwatched=""
suite="" nvme_suite="" ntests=0

# The watched directories: where a literal path would put a file.
watch_args=()
for d in /tmp /var/tmp "$nvme_base" /sys/fs/bpf; do
	[ -d "$d" ] || continue
	case " ${watch_args[*]} " in *" $d "*) continue ;; esac
	watch_args+=(-w "$d")
done

# Makes the suite's two directories and takes their locks (fds 8 and 9,
# which no test inherits).  The lock file is locked before it gets its
# name, so `make clean-test-dirs` never finds one unlocked in a suite
# that is starting.
make_suite() {
	suite=$(mktemp -d "$tmp_base/kvmm-run.XXXXXX") &&
		nvme_suite=$nvme_base/${suite##*/} &&
		{ [ "$nvme_suite" = "$suite" ] || mkdir "$nvme_suite"; } &&
		chmod 755 "$suite" "$nvme_suite" &&
		exec 9>"$suite/lock.new" && flock -n 9 &&
		mv "$suite/lock.new" "$suite/lock" || return 1
	[ "$nvme_suite" = "$suite" ] && return 0
	exec 8>"$nvme_suite/lock.new" && flock -n 8 &&
		mv "$nvme_suite/lock.new" "$nvme_suite/lock"
}

# At the end: the suite's directories go unless they hold kept evidence
# (their lock files then stay, free, for clean-test-dirs).
end_suite() {
	rm -f "$logs"/*.reaper
	[ -n "$suite" ] || return
	rmdir "$suite"/[0-9]* "$nvme_suite"/[0-9]* 2>/dev/null
	for d in "$suite" "$nvme_suite"; do
		[ -n "$(find "$d" -mindepth 1 -maxdepth 1 ! -name lock 2>/dev/null)" ] &&
			continue
		rm -f "$d/lock"
		rmdir "$d" 2>/dev/null
	done
}
trap end_suite EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM

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

# Processes outside the reaper's tree that still carry the tag (one
# started through another daemon): wait up to $grace s for them to go,
# then list what is left in the log and kill it by pid.  Prints how many
# were left.
left_running() { # tag log
	local tag=$1 log=$2 pids left _
	for _ in $(seq "$grace_steps"); do
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
	for _ in $(seq 20); do
		pids=$(tagged_pids "$tag")
		[ -z "$pids" ] && break
		sleep 0.1
	done
	# shellcheck disable=SC2086
	[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
	echo "$left"
}

# Runs the test under the reaper (or, without one, as it is: the
# processes are then found by their tag alone).
launch() { # report timeout command
	if [ -x "$reaper" ]; then
		"$reaper" -g "$grace" "${watch_args[@]}" -r "$1" -- \
			timeout -k 5 "$2" "$3"
	else
		timeout -k 5 "$2" "$3"
	fi
}

run_one() { # name command source
	local name=$1 cmd=$2 src=$3 t rc start end log tag tmp nvme nleft
	local files secs verdict note="" d report npins=0 nmade=0
	local -a made=()
	local kind path pid what gone="" unwatched="" why=""
	t=$(timeout_of "$src")
	log=$logs/$name.log
	report=$logs/$name.reaper
	tag=$$.$name
	if [ ! -d "$suite" ] || [ ! -d "$nvme_suite" ]; then
		[ -n "$suite" ] &&
			echo "run.sh: the suite's $suite or $nvme_suite was deleted while it ran; making new ones"
		make_suite || {
			echo "run.sh: cannot make the suite's directories in $tmp_base and $nvme_base" >&2
			exit 1
		}
	fi
	ntests=$((ntests + 1))
	tmp=$suite/$ntests nvme=$nvme_suite/$ntests
	mkdir "$tmp" "$nvme" && chmod 1777 "$tmp" "$nvme" || {
		echo "run.sh: cannot make the test's directories" >&2
		exit 1
	}
	: >"$report"
	start=${EPOCHREALTIME/[.,]/}
	TMPDIR=$tmp KVMM_NVME_TEST_DIR=$nvme KVMM_TEST_TAG=$tag \
		launch "$report" "$t" "$cmd" >"$log" 2>&1 </dev/null 8>&- 9>&-
	rc=$?
	end=${EPOCHREALTIME/[.,]/} # microseconds, without a fork
	secs=$(((end - start + 50000) / 100000))
	secs=$((secs / 10)).$((secs % 10))
	[ $rc = 124 ] && echo "(timed out after ${t}s)" >>"$log"
	case $rc in
	0) verdict=PASS ;;
	77) verdict=SKIP ;;
	*) verdict=FAIL ;;
	esac
	for d in "$tmp" "$nvme"; do
		[ -d "$d" ] || gone="$gone $d"
	done
	if [ -n "$gone" ]; then
		echo "runner: its TMPDIR or KVMM_NVME_TEST_DIR was deleted while it ran:$gone" >>"$log"
		note="its TMPDIR was deleted while it ran"
	fi
	# what the reaper found: processes it killed, entries made outside
	nleft=0
	while IFS=$'\t' read -r kind path pid what; do
		case $kind in
		left)
			[ $nleft = 0 ] &&
				echo "---- left running after the test (killed by the runner) ----" >>"$log"
			echo "pid $path, parent $pid: $what" >>"$log"
			nleft=$((nleft + 1)) ;;
		made)
			[ ${#made[@]} = 0 ] &&
				echo "---- made outside its directories ----" >>"$log"
			echo "$path (by pid $pid, $what)" >>"$log"
			made+=("$path")
			case $path in
			/sys/fs/bpf/*) npins=$((npins + 1)) ;;
			*) nmade=$((nmade + 1)) ;;
			esac ;;
		unwatched)
			unwatched="$unwatched $path"
			why=$pid ;;
		esac
	done <"$report"
	if [ -n "$unwatched" ] && [ "$unwatched" != "$said_unwatched" ]; then
		said_unwatched=$unwatched
		echo "run.sh: not watched for what tests leave there:$unwatched ($why)"
	fi
	rm -f "$report"
	nleft=$((nleft + $(left_running "$tag" "$log")))
	if [ "$nleft" != 0 ]; then
		note="${note:+$note, }left $nleft process(es) running"
		if [ $verdict != FAIL ]; then
			echo "runner: FAIL: left $nleft process(es) running" >>"$log"
			verdict=FAIL
			rc="$rc, $nleft left running"
		fi
	fi
	files=$(find "$tmp" "$nvme" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	if [ "$files" != 0 ]; then
		{
			echo "---- left behind in $tmp and $nvme ----"
			find "$tmp" "$nvme" -mindepth 1 -maxdepth 2 2>/dev/null | head -n 40
		} >>"$log"
		note="${note:+$note, }left $files file(s)"
	fi
	[ "$nmade" != 0 ] &&
		note="${note:+$note, }left $nmade file(s) in /tmp or /var/tmp"
	[ "$npins" != 0 ] && note="${note:+$note, }left $npins BPF pin(s)"
	if [ "$files$nmade$npins" != 000 ] && [ $verdict != FAIL ]; then
		leaked_names="$leaked_names $name"
	fi
	if [ $verdict = FAIL ] && [ "$files$nmade$npins" != 000 ]; then
		# the evidence stays; empty ones go
		rmdir "$tmp" "$nvme" 2>/dev/null
		for d in "$tmp" "$nvme" "${made[@]}"; do
			[ -e "$d" ] && kept="$kept $name:$d"
		done
	else
		rm -rf "$tmp" "$nvme" "${made[@]}"
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
		# the failure's own lines first (a t_fail()'s file:line, a
		# script's FAIL:, the runner's), so that a reader shown only
		# the head of this block (a CI summary) sees why
		grep -m 3 -E "$fail_line" "$log" | sed 's/^/      ! /'
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
