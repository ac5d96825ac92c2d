#!/bin/bash
# kvmmd's option values that were accepted and should not have been:
# each is refused before anything starts, exit 2, one line naming the
# option and the reason (Documentation/admin.md, kvmmd options).  Every
# kvmmd here runs under a timeout: one that hung (a FIFO as
# --policy-state) fails the test instead of blocking it.
set -u
b=${KVMM_BUILD:-build}
[ -x "$b/kvmmd" ] || { echo "skip: $b/kvmmd not built"; exit 77; }
dir=$(mktemp -d /tmp/kvmm-opterr-XXXXXX)
sock=$dir/kvmm.sock
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

bad() { # expected-text option...
	local want=$1 rc
	shift
	timeout 10 "$b/kvmmd" --foreground --backend host --telemetry off \
		--socket "$sock" "$@" 2>"$dir/err" </dev/null
	rc=$?
	[ $rc = 2 ] || fail "$*: exit $rc, expected 2 ($(cat "$dir/err"))"
	grep -qF -- "$want" "$dir/err" || fail "$*: message $(cat "$dir/err")"
	[ "$(wc -l <"$dir/err")" = 1 ] || fail "$*: not one line: $(cat "$dir/err")"
	[ -e "$sock" ] && fail "$*: left a socket"
	return 0
}

# --policy-state that is no regular file: a FIFO blocked the start (and
# SIGTERM), a directory or a link the saves cannot keep
mkfifo "$dir/fifo"
mkdir "$dir/statedir"
ln -s "$dir/elsewhere" "$dir/link"
bad "kvmmd: --policy-state: $dir/fifo is a FIFO, not a regular file" --policy-state "$dir/fifo"
bad "kvmmd: --policy-state: $dir/statedir is a directory, not a regular file" --policy-state "$dir/statedir"
bad "kvmmd: --policy-state: /dev/null is a device, not a regular file" --policy-state /dev/null
bad "kvmmd: --policy-state: $dir/link is a symbolic link: a save renames" --policy-state "$dir/link"
mkfifo "$dir/s.tmp"
bad "kvmmd: --policy-state: $dir/s.tmp (each save writes it) is a FIFO" --policy-state "$dir/s"
echo ok
