#!/bin/bash
# timeout: 90
# A connection kvmmctl could not make is said in exactly one line on
# stderr, naming the command, the socket and why, with exit 1 and
# nothing on stdout, by every command alike (metrics, status, sessions,
# tenants here): no file at the path, a directory, a socket nobody
# listens on (left by a SIGKILLed kvmmd), a stream socket, a program
# that answers the HELLO with garbage or hangs up, and a SIGSTOPped
# kvmmd past --timeout.  Until 7 December metrics added "kvmmctl:
# metrics: is kvmmd running?" after the connect's own line: two lines,
# the second one wrong after a timeout of a kvmmd that was running; and
# the other lines named the socket but not the command.
set -u
b=${KVMM_BUILD:-build}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-ctl-connect-XXXXXX")
sock=$dir/kvmm.sock
pid=
fakes=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	# shellcheck disable=SC2086
	[ -n "$fakes" ] && kill $fakes 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null; exit 1; }

cmds="metrics status sessions tenants"

# each_cmd SOCKET WHY [ARGS...]: every command of $cmds against SOCKET
# exits 1 with nothing on stdout and, on stderr, the one line
# "kvmmctl: CMD: WHY"
each_cmd() {
	local s=$1 why=$2 c rc want
	shift 2
	for c in $cmds; do
		want="kvmmctl: $c: $why"
		timeout 60 "$b/kvmmctl" --socket "$s" "$@" "$c" >"$dir/out" 2>"$dir/err"
		rc=$?
		[ $rc = 1 ] || fail "$c on $s: exit $rc, expected 1 ($(cat "$dir/err"))"
		[ -s "$dir/out" ] && fail "$c on $s printed on stdout: $(head -3 "$dir/out")"
		[ "$(wc -l <"$dir/err")" = 1 ] ||
			fail "$c on $s: $(wc -l <"$dir/err") lines on stderr, expected 1: $(cat "$dir/err")"
		[ "$(cat "$dir/err")" = "$want" ] ||
			fail "$c on $s: stderr '$(cat "$dir/err")', expected '$want'"
	done
	echo "$why: one line from each of $cmds"
}

# --- no kvmmd at all ---
each_cmd "$dir/none.sock" "$dir/none.sock: no such socket (is kvmmd running? with another --socket?)"
mkdir "$dir/walk"
each_cmd "$dir/walk" "$dir/walk: not a socket (a directory): give kvmmd's --socket"

# --- sockets some other program holds ---
cat >"$dir/fake.py" <<'PY'
import socket, sys
path, mode = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX,
                  socket.SOCK_STREAM if mode == "stream" else socket.SOCK_SEQPACKET)
s.bind(path)
s.listen(8)
open(path + ".ready", "w").close()
while True:
    a, _ = s.accept()
    if mode == "garbage":
        a.recv(65536)  # the HELLO
        a.send(b"HTTP/1.0 400 Bad Request\r\n\r\n")
    a.close()
PY
for mode in stream garbage hangup; do
	python3 "$dir/fake.py" "$dir/$mode.sock" "$mode" &
	fakes="$fakes $!"
done
for mode in stream garbage hangup; do
	for _ in $(seq 200); do [ -e "$dir/$mode.sock.ready" ] && break; sleep 0.05; done
	[ -e "$dir/$mode.sock.ready" ] || fail "$mode: the fake server did not start"
done
each_cmd "$dir/stream.sock" "$dir/stream.sock: not kvmmd's socket (a stream or datagram socket; kvmmd's is a seqpacket one): give kvmmd's --socket"
each_cmd "$dir/garbage.sock" "$dir/garbage.sock: protocol error talking to kvmmd at the HELLO (is it kvmmd's socket?)"
each_cmd "$dir/hangup.sock" "$dir/hangup.sock: connection to kvmmd lost at the HELLO (is it kvmmd's socket?)"

# --- a kvmmd that is running but stopped: the timeout's line alone ---
"$b/kvmmd" --foreground --telemetry off --socket "$sock" --page-size 128K \
	--gpu-mem 32M 2>"$dir/log" &
pid=$!
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "no socket"
"$b/kvmmctl" --socket "$sock" metrics >"$dir/out" 2>"$dir/err" ||
	fail "metrics on a running kvmmd: $(cat "$dir/err")"
[ -s "$dir/err" ] && fail "metrics on a running kvmmd said: $(cat "$dir/err")"
grep -q '^kvmm_up 1$' "$dir/out" || fail "metrics: no kvmm_up 1: $(head -5 "$dir/out")"
kill -STOP "$pid"
each_cmd "$sock" "no answer from $sock in 1 s (kvmmd stopped or busy?; --timeout)" --timeout 1

# --- killed: its socket is left, nobody listens ---
# bash's "Killed" line goes to the script's own stderr
exec 3>&2 2>/dev/null
kill -KILL "$pid"
wait "$pid"
exec 2>&3 3>&-
pid=
[ -S "$sock" ] || fail "a SIGKILLed kvmmd left no socket: nothing to test"
each_cmd "$sock" "$sock: connection refused (nobody listens on it: is kvmmd running? a killed one leaves its socket behind)"
echo ok
