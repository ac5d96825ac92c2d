#!/bin/bash
# A daemonized kvmmd without --log-file logs to syslog: facility daemon,
# "kvmmd[PID]", its levels as priorities (INFO <30>, WARN <28>), from the
# start-up lines to the last one at the stop.  It sent them to /dev/null.
# /dev/log is faked in a mount namespace of the test's own (a tmpfs over
# /dev with /dev/null and the like bound into it), so no syslogd runs
# and the machine's /dev is left alone; skipped where namespaces are not
# allowed.
set -u
b=${KVMM_BUILD:-build}
case "$b" in /*) ;; *) b=$PWD/$b ;; esac
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-syslog-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/syslog" "$dir/err" 2>/dev/null; exit 1; }

if ! unshare -rm true 2>/dev/null; then
	echo "SKIP: no user and mount namespace (unshare -rm) to fake /dev/log in"
	exit 77
fi

cat >"$dir/inner.sh" <<'INNER'
set -eu
dir=$1 b=$2
mkdir "$dir/dev"
mount --rbind /dev "$dir/dev"
mount -t tmpfs tmpfs /dev
for n in null zero random urandom; do
	touch /dev/$n
	mount --bind "$dir/dev/$n" /dev/$n
done
mkdir /dev/shm
mount --bind "$dir/dev/shm" /dev/shm
# syslogd's end of /dev/log: one datagram a message
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
open(sys.argv[1] + "/listening", "w").close()
with open(sys.argv[1] + "/syslog", "ab", 0) as f:
    while True:
        f.write(s.recv(65536).rstrip(b"\n") + b"\n")
' "$dir" &
syslogd=$!
for _ in $(seq 200); do [ -e "$dir/listening" ] && break; sleep 0.05; done
[ -e "$dir/listening" ] || { echo "no fake syslogd"; exit 1; }
NOTIFY_SOCKET=$dir/no-systemd "$b/kvmmd" --backend host --telemetry off \
	--socket "$dir/kvmm.sock" --pid-file "$dir/pid" 2>"$dir/err"
pid=$(cat "$dir/pid")
"$b/kvmmctl" --socket "$dir/kvmm.sock" status >/dev/null
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
# its datagrams are queued on /dev/log by now: wait until the fake
# syslogd has written the last one (a fixed 0.2 s may not do on a loaded
# machine), then stop it
for _ in $(seq 200); do
	grep -q "stopped: 0 pages allocated" "$dir/syslog" && break
	sleep 0.05
done
kill "$syslogd"
echo "$pid" >"$dir/daemon-pid"
INNER
unshare -rm bash "$dir/inner.sh" "$dir" "$b" || fail "in the namespace: exit $?"
pid=$(cat "$dir/daemon-pid")
cat "$dir/syslog"
# <facility daemon (3) * 8 + priority>, syslog's time, ident[pid]
grep -Eq "^<30>[A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8} kvmmd\[$pid\]: kvmmd .*: backend host" "$dir/syslog" || fail "no start-up line at INFO"
grep -Eq "^<28>.* kvmmd\[$pid\]: NOTIFY_SOCKET: " "$dir/syslog" || fail "no WARN"
grep -Eq "^<30>.* kvmmd\[$pid\]: stopped: 0 pages allocated" "$dir/syslog" || fail "no last line"
# syslog adds the time and level: not kvmm's own prefix too
grep -q "INFO  kvmmd" "$dir/syslog" && fail "kvmm's own prefix in syslog"
echo ok
