#!/bin/bash
# A daemonized kvmmd (no --foreground) exits with the status a foreground
# one would (Documentation/admin.md, kvmmd options): 2 for an option the
# start finds bad (an NVMe file that holds something else than a kvmm
# tier without --nvme-format; a --gpu-mem smaller than the backend's
# page; a --pid-file under a missing directory, found once the socket is
# bound: 1 until 7 December), 1 for another failure (another kvmmd
# holds the socket), 0 once the socket accepts; the reason on stderr as
# in the foreground.  The
# parent, which waits for the child's start report, exited 1 for every
# failure: a script could not tell a bad option from a failure to retry.
set -u
b=${KVMM_BUILD:-build}
[ -x "$b/kvmmd" ] || { echo "skip: $b/kvmmd not built"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-dmnstat-XXXXXX")
# the NVMe tier needs O_DIRECT: not on tmpfs
ndir=$(mktemp -d "${KVMM_NVME_TEST_DIR:-/var/tmp}/kvmm-dmnstat-XXXXXX")
sock=$dir/k.sock
cleanup() {
	[ -s "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null
	[ -s "$dir/live.pid" ] && kill "$(cat "$dir/live.pid")" 2>/dev/null
	rm -rf "$dir" "$ndir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# kvmmd in the foreground or daemonized ($1: "" or --foreground): exit
# status in $rc, stderr in $dir/err.$1
kvmmd() {
	local fg=$1
	shift
	# shellcheck disable=SC2086
	timeout 20 "$b/kvmmd" $fg --backend host --telemetry off \
		--socket "$sock" --log-file "$dir/log" "$@" \
		2>"$dir/err$fg" </dev/null
	rc=$?
}
strip() { sed -E 's/^[0-9T:.Z-]+ //; s/kvmmd\[[0-9]+\]/kvmmd[PID]/' "$1"; }
# the same exit status and the same stderr, daemonized or not
same() { # status expected-line option...
	local want=$1 line=$2
	shift 2
	kvmmd --foreground "$@"
	[ $rc = "$want" ] || fail "$* in the foreground: exit $rc, expected $want ($(cat "$dir/err--foreground"))"
	kvmmd "" "$@"
	[ $rc = "$want" ] || fail "$* daemonized: exit $rc, expected $want ($(cat "$dir/err"))"
	grep -qF -- "$line" "$dir/err" || fail "$* daemonized: stderr $(cat "$dir/err")"
	# the log lines' time and pid aside
	strip "$dir/err" >"$dir/a"
	strip "$dir/err--foreground" >"$dir/b"
	cmp -s "$dir/a" "$dir/b" ||
		fail "$*: stderr daemonized differs: $(diff "$dir/a" "$dir/b")"
	[ -e "$sock" ] && fail "$*: left a socket"
	return 0
}

# bad options found at start
head -c 20M /dev/urandom >"$ndir/data"
same 2 "holds something that is not a kvmm NVMe tier" \
	--host-mem 16M --nvme-path "$ndir/data" --nvme-size 16M
same 2 "is smaller than a page" --gpu-mem 1K --page-size 64K
same 2 "kvmmd: --pid-file $dir/none/pid: No such file or directory" \
	--pid-file "$dir/none/pid"
# another failure: a kvmmd serves the socket
"$b/kvmmd" --backend host --telemetry off --socket "$dir/live.sock" \
	--pid-file "$dir/live.pid" 2>"$dir/err.live" </dev/null ||
	fail "the kvmmd on live.sock: exit $? ($(cat "$dir/err.live"))"
same 1 "kvmmd: cannot start: Address already in use" \
	--socket "$dir/live.sock"
kill "$(cat "$dir/live.pid")"
for _ in $(seq 200); do [ -e "$dir/live.sock" ] || break; sleep 0.05; done
[ -e "$dir/live.sock" ] && fail "the kvmmd on live.sock did not stop"
: >"$dir/live.pid"

# a start that works: 0 once the socket accepts
kvmmd "" --pid-file "$dir/pid"
[ $rc = 0 ] || fail "daemonized start: exit $rc ($(cat "$dir/err"))"
[ -S "$sock" ] || fail "daemonized start: no socket"
"$b/kvmmctl" --socket "$sock" status >/dev/null || fail "status"
kill "$(cat "$dir/pid")"
for _ in $(seq 200); do [ -e "$sock" ] || break; sleep 0.05; done
[ -e "$sock" ] && fail "kvmmd did not stop"
: >"$dir/pid"
echo ok
