#!/bin/bash
# A daemonized kvmmd keeps its log: with --log-file PATH the start-up
# lines, a WARN and the port --metrics-listen 0 picked land in PATH (and,
# until the socket accepts, on the starter's stderr too); SIGHUP reopens
# PATH (logrotate moved it: later lines go to the new file, the daemon
# lives on); a log file that cannot be opened fails the start (exit 2
# for a missing directory, naming it and "an option is wrong": exit 1
# until 7 December); without --log-file a daemon ignores SIGHUP.  It sent stdout
# and stderr to /dev/null once ready, and logged nowhere.
set -u
b=${KVMM_BUILD:-build}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-logfile-XXXXXX")
sock=$dir/kvmm.sock
log=$dir/kvmmd.log
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$log" 2>/dev/null; exit 1; }
stopped() { # pid: gone within 5 s
	for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
	return 1
}

# a NOTIFY_SOCKET kvmmd cannot use is a WARN at start
NOTIFY_SOCKET=$dir/no-systemd "$b/kvmmd" --backend host --telemetry off \
	--socket "$sock" --pid-file "$dir/pid" --log-file "$log" \
	--metrics-listen 127.0.0.1:0 2>"$dir/starter" || fail "daemonize: exit $?"
pid=$(cat "$dir/pid")
grep -q "INFO  kvmmd\[$pid\]: kvmmd .*: backend host.*socket $sock\$" "$log" || fail "no start-up line"
grep -q "WARN  kvmmd\[$pid\]: NOTIFY_SOCKET: " "$log" || fail "no WARN"
port=$(sed -n 's|.*metrics: serving http://127.0.0.1:\([0-9]*\)/metrics$|\1|p' "$log")
[ -n "$port" ] && [ "$port" != 0 ] || fail "the metrics port is not logged"
python3 - "$port" <<'PY' || fail "nothing serves the logged port $port"
import sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read()
assert b"kvmm_" in body, body[:200]
PY
grep -q "NOTIFY_SOCKET: " "$dir/starter" || fail "the starter's stderr lost the start-up lines: $(cat "$dir/starter")"
"$b/kvmmctl" --socket "$sock" status >/dev/null || fail "status"

# logrotate: move the file, SIGHUP, and the next lines go to a new one
mv "$log" "$log.1"
kill -HUP "$pid"
sleep 0.2
kill -0 "$pid" 2>/dev/null || fail "SIGHUP stopped kvmmd"
for _ in $(seq 100); do [ -e "$log" ] && break; sleep 0.05; done
[ -e "$log" ] || fail "SIGHUP did not reopen $log"
kill -TERM "$pid"
stopped "$pid" || fail "kvmmd did not stop"
pid=
grep -q "signal 15: shutting down" "$log" || fail "no stop line in the reopened log"
grep -q "stopped: 0 pages allocated" "$log" || fail "no last line in the reopened log"
grep -q "signal 15" "$log.1" && fail "stop line in the rotated log"
[ "$(stat -c %a "$log")" = 640 ] || fail "log mode $(stat -c %a "$log")"

# a log file kvmmd cannot open stops the start, before it forks
"$b/kvmmd" --backend host --telemetry off --socket "$sock" \
	--log-file "$dir/nodir/kvmmd.log" 2>"$dir/err"
rc=$?
[ $rc = 2 ] || fail "unopenable log file: exit $rc, expected 2"
grep -qF "kvmmd: --log-file $dir/nodir/kvmmd.log: No such file or directory" "$dir/err" || fail "message: $(cat "$dir/err")"
grep -qxF "kvmmd: cannot start: an option is wrong (above)" "$dir/err" || fail "no rule line: $(cat "$dir/err")"
[ -e "$sock" ] && fail "left a socket"

# --log-file in the foreground too: the file gets the lines
"$b/kvmmd" --foreground --backend host --telemetry off --socket "$sock" \
	--log-file "$dir/fg.log" 2>"$dir/fg.err" &
pid=$!
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "foreground: no socket"
kill -TERM "$pid"
wait "$pid" || fail "foreground: exit $?"
pid=
grep -q "signal 15: shutting down" "$dir/fg.log" || fail "foreground: no stop line in the log file"
grep -q "signal 15" "$dir/fg.err" && fail "foreground: the stop line went to stderr, not only the log file"

# no --log-file: syslog, and a stray SIGHUP does not stop the daemon
"$b/kvmmd" --backend host --telemetry off --socket "$sock" \
	--pid-file "$dir/pid" 2>/dev/null || fail "daemonize without --log-file"
pid=$(cat "$dir/pid")
kill -HUP "$pid"
sleep 0.2
kill -0 "$pid" 2>/dev/null || fail "SIGHUP stopped a kvmmd without --log-file"
"$b/kvmmctl" --socket "$sock" status >/dev/null || fail "status after SIGHUP"
kill -TERM "$pid"
stopped "$pid" || fail "kvmmd did not stop"
pid=
echo ok
