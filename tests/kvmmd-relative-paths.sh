#!/bin/bash
# A daemonized kvmmd started with relative paths, on the command line and
# in a config file, uses them against the directory it was started in,
# not /, where it moves: the socket (kvmmctl with the same relative path
# reaches it), the pid file, the log file, the policy state's lock, the
# NVMe tier; at the stop the socket and pid file go from there.  "cd
# /tmp/x; kvmmd --socket rel.sock" made /rel.sock.  A relative path too
# long once absolute is refused (exit 2), never cut short.
set -u
b=${KVMM_BUILD:-build}
case "$b" in /*) ;; *) b=$PWD/$b ;; esac
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-relpath-XXXXXX")
n=rel-$$
pid=
# (a kvmmd that made its files in / is stopped too)
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; [ -e /$n.pid ] && kill $(cat /$n.pid); rm -f /$n.*; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/$n.log" "$dir/err" 2>/dev/null; exit 1; }
cd "$dir" || exit 1

cat >"$n.conf" <<CONF
pid-file $n.pid
nvme-path $n.nvme
CONF
"$b/kvmmd" --backend host --telemetry off --config "$n.conf" \
	--socket "$n.sock" --log-file "$n.log" --policy-state "$n.state" \
	--host-mem 4M --nvme-size 16M --cache-block-pages 2 2>"$dir/err" ||
	fail "daemonize: exit $?"
for f in "$n.sock" "$n.pid" "$n.log" "$n.state.lock" "$n.nvme"; do
	[ -e "$dir/$f" ] || fail "no $f in the start directory"
	[ -e "/$f" ] && fail "$f made in /"
done
[ -S "$dir/$n.sock" ] || fail "$n.sock is not a socket"
pid=$(cat "$dir/$n.pid")
kill -0 "$pid" || fail "no kvmmd with the pid of $n.pid"
"$b/kvmmctl" --socket "$n.sock" status >"$dir/status" || fail "kvmmctl --socket $n.sock status"
grep -q '^backend *host' "$dir/status" || fail "status: $(cat "$dir/status")"
grep -q "socket $dir/$n.sock\$" "$dir/$n.log" || fail "the log names no absolute socket"
grep -q "tier_nvme: $dir/$n.nvme: " "$dir/$n.log" || fail "the NVMe tier is not the start directory's"
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "kvmmd did not stop"
pid=
[ -e "$dir/$n.sock" ] && fail "socket left behind"
[ -e "$dir/$n.pid" ] && fail "pid file left behind"
grep -q "stopped: 0 pages allocated" "$dir/$n.log" || fail "no last line in $n.log"

# 100 bytes of directory: "s.sock" fits --socket, its absolute path not
deep=$dir/$(printf 'd%.0s' $(seq 100))
mkdir "$deep" && cd "$deep" || exit 1
"$b/kvmmd" --backend host --telemetry off --socket s.sock 2>"$dir/err"
rc=$?
[ $rc = 2 ] || fail "over-long absolute socket path: exit $rc, expected 2"
grep -q "kvmmd: --socket: 's.sock' is too long made absolute" "$dir/err" || fail "message: $(cat "$dir/err")"
[ -e /s.sock ] && fail "made /s.sock"
echo ok
