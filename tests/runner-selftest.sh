#!/bin/bash
# The runner catches what a test leaves: tests/run.sh, copied into a
# scratch tree, runs tiny fake tests (a pass, a skip, failures, one whose
# failure line the runner shows first though 60 lines follow it, a timeout,
# a daemon that escapes with env -i and setsid, files in TMPDIR, under a
# literal /tmp or /var/tmp path and in /sys/fs/bpf, a TMPDIR deleted while
# its test runs), and each verdict and note on its output is checked; then
# tests/runner/clean-dirs.sh (make clean-test-dirs) on an ended, a running
# and an older runner's suite directory.
# timeout: 60
set -u
src=${KVMM_SRC:-$PWD}
b=${KVMM_BUILD:-build}
reaper=$b/tests/runner/reaper
[ -x "$reaper" ] || {
	echo "no $reaper: make builds it"
	exit 1
}
s=$(mktemp -d "${TMPDIR:-/tmp}/runner-selftest.XXXXXX") || exit 1
id=$$
lit=/tmp/kvmm-selftest-$id
sleeper=""
cleanup() {
	[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null
	rm -rf "$s" "$lit".* /var/tmp/kvmm-selftest-"$id".* \
		/sys/fs/bpf/kvmm-selftest-"$id"-pin
}
trap cleanup EXIT
fails=0
expect() { # what grep-pattern
	if ! grep -q -- "$2" "$s/out"; then
		echo "FAIL: $1: no line matching '$2'"
		fails=$((fails + 1))
	fi
}

mkdir -p "$s/tree/tests" "$s/tree/build/tests/runner" "$s/tmp" "$s/nvme"
cp "$src/tests/run.sh" "$s/tree/tests/"
ln -s "$(cd "$(dirname "$reaper")" && pwd)/reaper" \
	"$s/tree/build/tests/runner/reaper"
t=$s/tree/tests
printf '#!/bin/bash\nexit 0\n' >"$t/a-pass.sh"
printf '#!/bin/bash\necho no widget here\nexit 77\n' >"$t/b-skip.sh"
printf '#!/bin/bash\ntouch %s.kept\necho boom\nexit 3\n' "$lit" >"$t/c-fail.sh"
# a daemon that drops the tag and leaves the process group
printf '#!/bin/bash\nenv -i setsid sleep 60 </dev/null >/dev/null 2>&1 &\nexit 0\n' \
	>"$t/d-env-i.sh"
printf '#!/bin/bash\ntouch "$TMPDIR/left"\nexit 0\n' >"$t/e-tmpdir-file.sh"
printf '#!/bin/bash\ntouch %s.file\nexit 0\n' "$lit" >"$t/f-literal-tmp.sh"
printf '#!/bin/bash\nmkdir /var/tmp/kvmm-selftest-%s.d\nexit 0\n' "$id" \
	>"$t/g-literal-var-tmp.sh"
# a pin root whose name ends in no pid, so no BPF test's sweep of dead
# runs' roots (tests/lib/bpf_pins.h) takes it first (bpffs refuses dots)
printf '#!/bin/bash\nmkdir /sys/fs/bpf/kvmm-selftest-%s-pin || { echo no bpffs; exit 77; }\nexit 0\n' \
	"$id" >"$t/h-bpf-pin.sh"
printf '#!/bin/bash\nrm -rf "$TMPDIR"\necho "connect: No such file or directory"\nexit 1\n' \
	>"$t/i-tmpdir-gone.sh"
printf '#!/bin/bash\n# timeout: 1\nsleep 30\n' >"$t/j-timeout.sh"
# a failure followed by more than the 40 lines the runner's tail shows
printf '#!/bin/bash\necho start\necho "tests/k.c:12: assertion failed: x == 1"\nseq 1 60\nexit 1\n' \
	>"$t/k-fail-early.sh"
chmod +x "$t"/*.sh

(cd "$s/tree" && TMPDIR=$s/tmp KVMM_NVME_TEST_DIR=$s/nvme \
	KVMM_TEST_GRACE=0.5 KVMM_BUILD=$s/tree/build tests/run.sh) >"$s/out" 2>&1
rc=$?
sed 's/^/  | /' "$s/out"
[ $rc = 1 ] || {
	echo "FAIL: run.sh exited $rc with failed tests, not 1"
	fails=$((fails + 1))
}

expect pass '^PASS  a-pass  *[0-9.]*s$'
expect skip '^SKIP  b-skip  *no widget here$'
expect fail '^FAIL  c-fail  *rc=3 '
expect "env -i daemon" '^FAIL  d-env-i  *rc=0, 1 left running .*(left 1 process(es) running)'
expect "its log names it" '^      | pid [0-9]*, parent [0-9]*: sleep 60'
sleeper=$(sed -n 's/^pid \([0-9]*\), parent.*sleep 60.*/\1/p' \
	"$s/tree/build/test-logs/d-env-i.log")
if [ -n "$sleeper" ] && kill -0 "$sleeper" 2>/dev/null; then
	echo "FAIL: the env -i daemon $sleeper still runs"
	fails=$((fails + 1))
fi
expect "file in TMPDIR" '^PASS  e-tmpdir-file .*(left 1 file(s): see its log)'
expect "TMPDIR deleted" '^FAIL  i-tmpdir-gone .*rc=1 .*(its TMPDIR was deleted while it ran)'
expect timeout '^FAIL  j-timeout  *rc=124 '
expect "failure line first" '^      ! tests/k.c:12: assertion failed: x == 1$'
expect "runner's failure line first" '^      ! runner: FAIL: left 1 process(es) running$'

if grep -q '^run.sh: not watched for what tests leave there: /tmp ' "$s/out"; then
	# not root, or a kernel or file system without what fanotify needs
	# (a container without CAP_SYS_ADMIN, /tmp on a file system with no
	# file handles): the runner says so, and the files stay.  That is
	# the machine's limit, not the runner's failure, so it is only said.
	echo "note: $(grep '^run.sh: not watched' "$s/out")"
	expect "literal /tmp" '^PASS  f-literal-tmp  *[0-9.]*s$'
	leaked=1
else
	expect "literal /tmp" '^PASS  f-literal-tmp .*(left 1 file(s) in /tmp or /var/tmp: see its log)'
	expect "literal /var/tmp" '^PASS  g-literal-var-tmp .*(left 1 file(s) in /tmp or /var/tmp: see its log)'
	expect "failing test's file kept" "^kept for inspection (remove when done): c-fail:$lit.kept\$"
	for f in "$lit.file" /var/tmp/kvmm-selftest-"$id".d; do
		if [ -e "$f" ]; then
			echo "FAIL: $f was not removed"
			fails=$((fails + 1))
		fi
	done
	[ -e "$lit.kept" ] || {
		echo "FAIL: the failing test's $lit.kept was not kept"
		fails=$((fails + 1))
	}
	leaked=3
	if grep -q '^PASS  h-bpf-pin' "$s/out"; then
		expect "BPF pin" '^PASS  h-bpf-pin .*(left 1 BPF pin(s): see its log)'
		[ -e /sys/fs/bpf/kvmm-selftest-$id-pin ] && {
			echo "FAIL: the BPF pin was not removed"
			fails=$((fails + 1))
		}
		leaked=4
	fi
fi
expect "leaked line" "^leaked: $leaked passed or skipped but left files"
expect "failed line" '^failed: c-fail d-env-i i-tmpdir-gone j-timeout k-fail-early '
last=$(tail -n 1 "$s/out")
case $last in
"5 passed, 5 failed, 1 skipped" | "4 passed, 5 failed, 2 skipped") ;;
*)
	echo "FAIL: last line '$last'"
	fails=$((fails + 1))
	;;
esac
left=$(find "$s/tmp" "$s/nvme" -mindepth 1)
[ -z "$left" ] || {
	echo "FAIL: the suite's directories stayed: $left"
	fails=$((fails + 1))
}

# clean-test-dirs: an ended suite goes, a running one (its lock held
# here) and an older runner's (no lock file) stay
c=$s/clean
mkdir -p "$c/kvmm-run.ended/1" "$c/kvmm-run.running/1" "$c/kvmm-run.older"
: >"$c/kvmm-run.ended/lock"
: >"$c/kvmm-run.running/lock"
exec 7<"$c/kvmm-run.running/lock"
flock -n 7 || exit 1
"$src/tests/runner/clean-dirs.sh" "$c" >"$s/out"
exec 7<&-
cat "$s/out"
expect "clean-test-dirs counts" '^clean-test-dirs: removed 1, left 1 of running suites and 1 with no lock file'
[ ! -e "$c/kvmm-run.ended" ] && [ -d "$c/kvmm-run.running/1" ] &&
	[ -d "$c/kvmm-run.older" ] || {
	echo "FAIL: clean-test-dirs left: $(ls "$c")"
	fails=$((fails + 1))
}

[ $fails = 0 ] || exit 1
echo "runner: all checks passed"
