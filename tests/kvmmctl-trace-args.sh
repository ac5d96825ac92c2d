#!/bin/bash
# kvmmctl trace refuses option values out of range with exit 2 and a
# line that names the option, what it took and what it takes (they
# used to exit 2 without a word); no daemon and no BPF needed: the
# arguments are checked before any pin is opened.
set -u
b=${KVMM_BUILD:-build}
err=$(mktemp "${TMPDIR:-/tmp}/kvmm-trace-args-XXXXXX")
trap 'rm -f "$err"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

refused() { # expected-line args...
	local want=$1 rc
	shift
	"$b/kvmmctl" trace "$@" >/dev/null 2>"$err"
	rc=$?
	[ $rc = 2 ] || fail "trace $*: exit $rc, expected 2"
	grep -qF "$want" "$err" || fail "trace $*: message '$(cat "$err")'"
	echo "trace $*: $(cat "$err")"
}

refused "kvmmctl: trace: --interval '0': milliseconds between refreshes (1 to 4294967295)" --interval 0
refused "kvmmctl: trace: --top '0': blocks to list (1 to 100000)" --top 0
refused "kvmmctl: trace: --top '100001': blocks to list (1 to 100000)" --top 100001
# a word that is no number gets the option's line alone (a vaguer
# "'x' is not a number" came first); a sign, or no digit, said only
# "'-1' is not a number" before the option's line existed
refused "kvmmctl: trace: --count 'x': refreshes, 0 for no end (0 to 4294967295)" --count x
grep -q "is not a number" "$err" && fail "trace --count x: a second line: $(cat "$err")"
refused "kvmmctl: trace: --count '-1': refreshes, 0 for no end (0 to 4294967295)" --count -1
refused "kvmmctl: trace: --interval '-5': milliseconds between refreshes (1 to 4294967295)" --interval -5
refused "usage: kvmmctl [--json] trace" --top
# in range, they pass the checks: the trace then fails on the missing
# pins (exit 1), not on its arguments
"$b/kvmmctl" trace --once --interval 1 --top 100000 --count 0 \
	--pin-root /nonexistent/kvmm >/dev/null 2>"$err"
rc=$?
[ $rc = 1 ] || fail "in-range values: exit $rc ($(cat "$err"))"
# which says where it looked, in a line that starts as every other
# kvmmctl error does (it started "trace:")
grep -qF "kvmmctl: trace: cannot read the telemetry maps under /nonexistent/kvmm: No such file or directory" "$err" ||
	fail "missing pins: $(cat "$err")"
echo ok
