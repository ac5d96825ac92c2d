#!/bin/bash
# kvmmctl --timeout: no command hangs on a kvmmd that does not answer.
# Against a SIGSTOPped kvmmd `--timeout 1 status` (and sessions, metrics)
# fails within seconds, exit 1, with the line naming the command, the
# socket and the wait; SIGCONT and it answers again, the timed-out
# connections gone; `--timeout 0` waits for ever (through the stop, then
# answered).  Against a socket whose listen backlog is full (the connect
# itself waits), one that accepts and never answers, and one that sends
# half a reply (a HELLO reply announcing fds that never come): the same
# line, exit 1 (each hung for ever before).  Bad values are usage
# errors, exit 2.  The longer default of cache-drop, whose reply waits
# for NVMe writes: tests/kvmmctl-timeout-waits.c.
set -u
b=${KVMM_BUILD:-build}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-ctl-timeout-XXXXXX")
sock=$dir/kvmm.sock
pid=
fake=
cleanup() {
	[ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill "$pid" 2>/dev/null
	[ -n "$fake" ] && kill "$fake" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null; exit 1; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# expect STATUS LINE MAX_MS ARGS...: kvmmctl ARGS exits STATUS within
# MAX_MS (a hang is cut at 60 s: exit 124) with LINE in its output
expect() {
	local st=$1 want=$2 max=$3 rc t0 ms
	shift 3
	t0=$(now_ms)
	timeout 60 "$b/kvmmctl" "$@" >"$dir/out" 2>"$dir/err"
	rc=$?
	ms=$(($(now_ms) - t0))
	[ $rc = "$st" ] || fail "kvmmctl $*: exit $rc after $ms ms, expected $st ($(cat "$dir/err"))"
	grep -qxF -- "$want" "$dir/err" "$dir/out" ||
		fail "kvmmctl $*: no line '$want' in: $(cat "$dir/err" "$dir/out")"
	[ "$ms" -le "$max" ] || fail "kvmmctl $*: $ms ms, more than $max"
	echo "kvmmctl $*: exit $rc in $ms ms"
}

# --- usage: exit 2, naming the word, before any connect ---
range="not a number of seconds (0 to 86400; 0 waits for ever)"
for v in -1 x 1e9 "" 2.5 86401 " 1" 4294967296; do
	expect 2 "kvmmctl: --timeout '$v': $range" 5000 --socket "$sock" --timeout "$v" status
done
expect 2 "kvmmctl: --timeout 'x': $range" 5000 --timeout=x status
expect 2 "kvmmctl: --timeout '': $range" 5000 --timeout= status
expect 2 "kvmmctl: --timeout needs SECONDS" 5000 status --timeout
"$b/kvmmctl" --help | grep -q '^usage: kvmmctl \[--socket PATH\] \[--timeout SECONDS\]' ||
	fail "--help: no --timeout in the usage line"
"$b/kvmmctl" --help | grep -q '^  --timeout SECONDS  wait at most this long' ||
	fail "--help: --timeout not explained"

# --- a stopped kvmmd ---
"$b/kvmmd" --foreground --telemetry off --socket "$sock" --page-size 128K \
	--gpu-mem 32M 2>"$dir/log" &
pid=$!
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "no socket"
expect 0 "backend      host (host)" 15000 --socket "$sock" --timeout 1 status

kill -STOP "$pid"
# the connect succeeds (kvmmd's backlog has room), its HELLO is not
# answered; the late answers must not be read by anything
expect 1 "kvmmctl: status: no answer from $sock in 1 s (kvmmd stopped or busy?; --timeout)" 15000 --socket "$sock" --timeout 1 status
expect 1 "kvmmctl: sessions: no answer from $sock in 2 s (kvmmd stopped or busy?; --timeout)" 15000 --socket "$sock" --timeout=2 sessions
expect 1 "kvmmctl: metrics: no answer from $sock in 1 s (kvmmd stopped or busy?; --timeout)" 15000 --timeout 1 --socket "$sock" metrics
# 0: no bound, as before: still waiting 2 s later, answered after SIGCONT
"$b/kvmmctl" --socket "$sock" --timeout 0 --json status >"$dir/forever" 2>&1 &
waiter=$!
sleep 2
kill -0 "$waiter" 2>/dev/null || fail "--timeout 0 gave up on a stopped kvmmd: $(cat "$dir/forever")"
kill -CONT "$pid"
wait "$waiter" || fail "--timeout 0: exit $? after SIGCONT: $(cat "$dir/forever")"
grep -q '"backend":"host"' "$dir/forever" || fail "--timeout 0: $(cat "$dir/forever")"
echo "--timeout 0: waited through the stop, answered after SIGCONT"

# answered again; the timed-out connections hung up and kvmmd ended
# their sessions (sessions lists kvmmctl's own alone)
expect 0 "backend      host (host)" 15000 --socket "$sock" --timeout 1 status
n=
for _ in $(seq 200); do
	n=$("$b/kvmmctl" --socket "$sock" --timeout 5 --json sessions |
		python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') ||
		fail "sessions after SIGCONT"
	[ "$n" = 1 ] && break
	sleep 0.05
done
[ "$n" = 1 ] || fail "$n sessions after SIGCONT, expected kvmmctl's alone"
kill "$pid"
wait "$pid"
pid=

# --- sockets that are not a working kvmmd ---
cat >"$dir/fake.py" <<'PY'
import socket, struct, sys, time
path, mode = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(path)
s.listen(0)  # one connection queued at most: the next connect waits
held = []
if mode == "backlog":
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(path)  # takes the one place, never accepted
    held.append(c)
open(path + ".ready", "w").close()
if mode == "backlog":
    time.sleep(3600)
while True:
    a, _ = s.accept()
    held.append(a)
    if mode == "partial":
        # the HELLO's reply header, saying KVMM_CMD_FDS messages follow
        # (KVMM_MSG_F_REPLY | KVMM_MSG_F_MORE_FDS): none ever does
        size, cmd, ver, flags, mid, status = struct.unpack("<IHBBIi", a.recv(65536)[:16])
        a.send(struct.pack("<IHBBIi", 16, cmd, ver, 0x01 | 0x02, mid, 0))
PY
for mode in backlog silent partial; do
	fsock=$dir/$mode.sock
	python3 "$dir/fake.py" "$fsock" "$mode" &
	fake=$!
	for _ in $(seq 200); do [ -e "$fsock.ready" ] && break; sleep 0.05; done
	[ -e "$fsock.ready" ] || fail "$mode: the fake server did not start"
	expect 1 "kvmmctl: status: no answer from $fsock in 1 s (kvmmd stopped or busy?; --timeout)" 15000 --socket "$fsock" --timeout 1 status
	expect 1 "kvmmctl: tenants: no answer from $fsock in 1 s (kvmmd stopped or busy?; --timeout)" 15000 --socket "$fsock" --timeout 1 tenants
	kill "$fake"
	wait "$fake" 2>/dev/null
	fake=
done
echo "PASS"
