#!/bin/bash
# What a normal stop (SIGTERM) leaves of the --nvme-path file (tiers.md,
# NVMe tier; admin.md, --nvme-path): a file this run's claim made goes
# when no tier was ever written into it, a file with a tier stays for the
# next start, and a file that was there is never touched.  Until 7
# December a kvmmd without --cache-block-pages whose tier never opened (no
# client published) left the empty file its claim made, which the next
# start without --nvme-size refused ("does not exist or is empty"), while
# with a named size the tier was written at start and kept.
#   - no size named, nothing published: the file the claim made is gone,
#     with the INFO line; a start after it needs --nvme-size as before;
#   - an empty file that was there, no size named: still there, empty;
#   - a size named: the tier written at start, kept at its --nvme-size,
#     and a start without --nvme-size opens it (the file is a tier);
#   - through a dangling symbolic link: the file made where it leads
#     goes, the link stays, at a stop and at a refused start (the link
#     was removed, the file left);
#   - a daemonized start and its stop: the same.
set -u
b=${KVMM_BUILD:-build}
[ -x "$b/kvmmd" ] || { echo "skip: $b/kvmmd not built"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-nvmestop-XXXXXX")
# the NVMe tier needs O_DIRECT: not on tmpfs before Linux 6.6
ndir=$(mktemp -d "${KVMM_NVME_TEST_DIR:-/var/tmp}/kvmm-nvmestop-XXXXXX")
trap 'rm -rf "$dir" "$ndir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sock=$dir/k.sock

if ! dd if=/dev/zero of="$ndir/probe" bs=4096 count=1 oflag=direct 2>/dev/null; then
	echo "skip: no O_DIRECT in ${KVMM_NVME_TEST_DIR:-/var/tmp}"
	exit 77
fi
rm -f "$ndir/probe"

# run_stop what option...: start in the foreground, wait for the socket,
# stop with SIGTERM; exit 0 expected, the log in $dir/log
run_stop() {
	local what=$1 pid rc
	shift
	"$b/kvmmd" --foreground --backend host --telemetry off \
		--socket "$sock" "$@" 2>"$dir/log" </dev/null &
	pid=$!
	for _ in $(seq 400); do [ -S "$sock" ] && break; sleep 0.05; done
	[ -S "$sock" ] || { kill $pid 2>/dev/null; fail "$what: no socket: $(cat "$dir/log")"; }
	kill $pid
	wait $pid
	rc=$?
	[ $rc = 0 ] || fail "$what: exit $rc after SIGTERM: $(cat "$dir/log")"
}

# no size named: the claim made an empty file, no tier opened
run_stop "made, no size named" --host-mem 16M --nvme-path "$ndir/a" --nvme-size 4M
[ -e "$ndir/a" ] && fail "a normal stop left the empty NVMe file its claim made ($(stat -c %s "$ndir/a") bytes)"
grep -qF "cache: no NVMe tier was written this run: removed $ndir/a, which it made" "$dir/log" ||
	fail "made, no size named: no line says the file went: $(cat "$dir/log")"

# an empty file that was there: untouched
: >"$ndir/empty"
run_stop "empty, there before" --host-mem 16M --nvme-path "$ndir/empty" --nvme-size 4M
[ -f "$ndir/empty" ] || fail "a normal stop removed an empty file that was there"
[ "$(stat -c %s "$ndir/empty")" = 0 ] || fail "the empty file that was there grew"
grep -qF "removed" "$dir/log" && fail "empty, there before: $(grep -F removed "$dir/log")"

# a size named: the tier is written at start and stays, a tier the next
# start opens at its own size
run_stop "made, a size named" --host-mem 16M --nvme-path "$ndir/b" --nvme-size 4M \
	--cache-block-pages 4
[ -f "$ndir/b" ] || fail "a normal stop removed the tier written at start"
[ "$(stat -c %s "$ndir/b")" = 4194304 ] || fail "the tier's size: $(stat -c %s "$ndir/b")"
run_stop "the tier again, no --nvme-size" --host-mem 16M --nvme-path "$ndir/b" \
	--cache-block-pages 4
grep -qF "removed" "$dir/log" && fail "a tier written: $(grep -F removed "$dir/log")"
[ "$(stat -c %s "$ndir/b")" = 4194304 ] || fail "the tier's size after a restart: $(stat -c %s "$ndir/b")"

# through a symbolic link that was there (dangling): the file the claim
# made where it leads goes, the link stays (unlink of the path removed
# the operator's link and left the file), at a stop and at a refused start
ln -s "$ndir/target" "$ndir/link"
run_stop "made through a link" --host-mem 16M --nvme-path "$ndir/link" --nvme-size 4M
[ -L "$ndir/link" ] || fail "a normal stop removed the symbolic link --nvme-path named"
[ -e "$ndir/target" ] && fail "a normal stop left the file made through the link"
timeout 20 "$b/kvmmd" --foreground --backend host --telemetry off --socket "$sock" \
	--host-mem 16M --nvme-path "$ndir/link" --nvme-size 4M --cache-block-pages 4 \
	--pid-file "$dir/nodir/pid" 2>"$dir/log" </dev/null
rc=$?
[ $rc = 2 ] || fail "a start refused for its --pid-file (no such directory): exit $rc: $(cat "$dir/log")"
[ -L "$ndir/link" ] || fail "a refused start removed the symbolic link --nvme-path named"
[ -e "$ndir/target" ] && fail "a refused start left the file made through the link"

# daemonized: the same stop path
"$b/kvmmd" --backend host --telemetry off --socket "$sock" --host-mem 16M \
	--nvme-path "$ndir/c" --nvme-size 4M --pid-file "$dir/pid" \
	--log-file "$dir/dlog" </dev/null 2>"$dir/derr" ||
	fail "daemonized start: exit $?: $(cat "$dir/derr")"
[ -f "$ndir/c" ] || fail "daemonized: no file made at start"
pid=$(cat "$dir/pid")
kill "$pid"
for _ in $(seq 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "daemonized kvmmd did not stop"
[ -e "$ndir/c" ] && fail "daemonized: the stop left the empty file its claim made"
echo ok
