#!/bin/bash
# kvmmd as a systemd service, without systemd running:
#   - readiness: with $NOTIFY_SOCKET (a path, or an abstract '@' name)
#     kvmmd sends READY=1 with its MAINPID once the control socket accepts
#     (kvmmctl status works the moment it arrives) and STOPPING=1 on
#     SIGTERM, then exits 0; a bad $NOTIFY_SOCKET is a WARN line, not a
#     failure; without it nothing is sent; while a host tier is made at
#     start, STATUS= progress that extends the start timeout comes first;
#   - the shipped unit and the per-GPU template (kvmmd@.service: the
#     instance is the GPU, its socket /run/kvmm/<instance>/kvmm.sock) pass
#     `systemd-analyze verify` once their paths are filled in as `make
#     install` fills them, the template's command line with a UUID for %i
#     is accepted, and every option line of the shipped kvmmd.conf is
#     accepted when uncommented;
#   - a --pid-file that cannot be written fails the start (under a
#     missing directory: exit 2, its line and "an option is wrong"; 1
#     until 7 December) and leaves no socket behind.
# timeout: 60
set -u
b=${KVMM_BUILD:-build}
src=${KVMM_SRC:-.}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-sysd-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir"/log* 2>/dev/null; exit 1; }
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }

# One daemon under a notify socket at $1 ('@name': abstract): READY=1
# with the right MAINPID while the control socket answers, STOPPING=1
# after SIGTERM, exit 0.
notify_run() {
	python3 - "$b" "$dir" "$1" <<'PY' || fail "notify ($1)"
import os, signal, socket, subprocess, sys, time
b, d, name = sys.argv[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + name[1:] if name.startswith("@") else name)
s.settimeout(30)
sock = d + "/kvmm.sock"
env = dict(os.environ, NOTIFY_SOCKET=name)
log = open(d + "/log." + name.replace("/", "_"), "w")
p = subprocess.Popen([b + "/kvmmd", "--foreground", "--backend", "host",
                      "--telemetry", "off", "--socket", sock],
                     env=env, stderr=log)
msg = s.recv(4096).decode()
fields = dict(l.split("=", 1) for l in msg.split("\n"))
assert fields["READY"] == "1", msg
assert int(fields["MAINPID"]) == p.pid, (msg, p.pid)
assert fields["STATUS"] == "serving " + sock, msg
# ready means ready: the socket accepts now, not a little later
st = subprocess.run([b + "/kvmmctl", "--socket", sock, "status", "--json"],
                    capture_output=True, text=True)
assert st.returncode == 0, st.stderr
p.send_signal(signal.SIGTERM)
assert s.recv(4096).decode() == "STOPPING=1"
assert p.wait(timeout=30) == 0
assert not os.path.exists(sock)
print("notify", name, "ok:", msg.replace("\n", " "))
PY
}
notify_run "$dir/notify"
notify_run "@kvmm-test-notify-$$"

# While the host tier's memory is made at start: STATUS lines that say how
# far, each extending the start timeout, then READY=1 (reports every 1 ms
# here instead of every second, so a 256 MiB tier makes a few).
python3 - "$b" "$dir" <<'PY' || fail "progress before READY"
import os, signal, socket, subprocess, sys
b, d = sys.argv[1:]
name = d + "/notify-progress"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(name)
s.settimeout(30)
env = dict(os.environ, NOTIFY_SOCKET=name, KVMMD_TEST_SLAB_PROGRESS_MS="1")
log = open(d + "/log.progress", "w")
p = subprocess.Popen([b + "/kvmmd", "--foreground", "--backend", "host",
                      "--telemetry", "off", "--socket", d + "/kvmm-p.sock",
                      "--host-mem", "256M"], env=env, stderr=log)
progress = []
while True:
    msg = s.recv(4096).decode()
    fields = dict(l.split("=", 1) for l in msg.split("\n"))
    if "READY" in fields:
        break
    assert fields["STATUS"].startswith("host tier: touching "), msg
    assert fields["STATUS"].endswith(" of 0.3 GiB"), msg
    assert fields["EXTEND_TIMEOUT_USEC"] == "30000000", msg
    progress.append(float(fields["STATUS"].split()[3]))
assert progress, "no progress message before READY=1"
assert progress == sorted(progress), progress
p.send_signal(signal.SIGTERM)
assert p.wait(timeout=30) == 0
print("progress before READY:", len(progress), "messages, last", progress[-1], "GiB")
PY
grep -q "INFO  kvmmd.*host tier: touching .* of 0.3 GiB" "$dir/log.progress" ||
	fail "no progress line in the log"

# A bad NOTIFY_SOCKET: a WARN line, the daemon serves all the same.
NOTIFY_SOCKET=relative/path "$b/kvmmd" --foreground --backend host \
	--telemetry off --socket "$dir/s2" 2>"$dir/log.bad" &
pid=$!
for _ in $(seq 600); do [ -S "$dir/s2" ] && break; sleep 0.05; done
"$b/kvmmctl" --socket "$dir/s2" status >/dev/null || fail "status with a bad NOTIFY_SOCKET"
kill -TERM $pid
wait $pid || fail "exit status $? with a bad NOTIFY_SOCKET"
grep -q "WARN .*NOTIFY_SOCKET: Invalid argument (systemd is not told that kvmmd is ready)" "$dir/log.bad" ||
	fail "no WARN line for a bad NOTIFY_SOCKET"

# The unit, with its paths filled in as make install does.
sed -e "s|@BINDIR@|$(cd "$b" && pwd)|g" -e "s|@SYSCONFDIR@|$dir/etc|g" \
	"$src/kvmm/kvmmd/systemd/kvmmd.service.in" >"$dir/kvmmd.service"
grep -qF "ExecStart=$(cd "$b" && pwd)/kvmmd --foreground --config $dir/etc/kvmm/kvmmd.conf --policy-state /var/lib/kvmm/policy.state \$KVMMD_OPTS" \
	"$dir/kvmmd.service" || fail "ExecStart: $(grep ExecStart "$dir/kvmmd.service")"
grep -q '^Type=notify$' "$dir/kvmmd.service" || fail "not Type=notify"
grep -qx 'StateDirectory=kvmm' "$dir/kvmmd.service" || fail "StateDirectory"
grep -qx "EnvironmentFile=-$dir/etc/kvmm/kvmmd.env" "$dir/kvmmd.service" || fail "EnvironmentFile"
if command -v systemd-analyze >/dev/null; then
	# it exits 0 over unknown keys and bad values: its lines about the
	# unit are the verdict
	systemd-analyze verify "$dir/kvmmd.service" >"$dir/log.verify" 2>&1 ||
		fail "systemd-analyze verify: $(cat "$dir/log.verify")"
	grep -q "kvmmd.service:" "$dir/log.verify" &&
		fail "systemd-analyze verify: $(cat "$dir/log.verify")"
	echo "systemd-analyze verify: ok"
else
	echo "note: no systemd-analyze here; the unit was not verified"
fi

# The per-GPU template, filled in the same way: instance = the GPU (an
# ordinal or a UUID), its own socket under /run/kvmm/<instance>/, its own
# runtime directory, per-GPU options from an optional environment file.
sed -e "s|@BINDIR@|$(cd "$b" && pwd)|g" -e "s|@SYSCONFDIR@|$dir/etc|g" \
	"$src/kvmm/kvmmd/systemd/kvmmd@.service.in" >"$dir/kvmmd@.service"
exec_start="ExecStart=$(cd "$b" && pwd)/kvmmd --foreground --config $dir/etc/kvmm/kvmmd.conf --backend cuda --cuda-device %i --socket /run/kvmm/%i/kvmm.sock --policy-state /var/lib/kvmm/%i/policy.state --telemetry-pin-root /sys/fs/bpf/kvmm-%i \$KVMMD_OPTS"
grep -qxF "$exec_start" "$dir/kvmmd@.service" ||
	fail "template ExecStart: $(grep ExecStart "$dir/kvmmd@.service")"
grep -qx "EnvironmentFile=-$dir/etc/kvmm/kvmmd@%i.env" "$dir/kvmmd@.service" ||
	fail "template EnvironmentFile: $(grep EnvironmentFile "$dir/kvmmd@.service")"
grep -qx 'RuntimeDirectory=kvmm/%i' "$dir/kvmmd@.service" || fail "template RuntimeDirectory"
grep -qx 'StateDirectory=kvmm/%i' "$dir/kvmmd@.service" || fail "template StateDirectory"
grep -qx 'Type=notify' "$dir/kvmmd@.service" || fail "template not Type=notify"
# the instance's command line as systemd makes it (%i a UUID, the options
# of an env file) is one kvmmd accepts
mkdir -p "$dir/etc/kvmm"
: >"$dir/etc/kvmm/kvmmd.conf"
uuid=GPU-8d3c2b1e-0a1b-4c2d-9e3f-0123456789ab
args=$(sed -n 's/^ExecStart=//p' "$dir/kvmmd@.service" |
	sed -e "s|%i|$uuid|g" -e "s|\$KVMMD_OPTS|--nvme-path /mnt/nvme0/kvmm.slots --host-mem 1G|")
# shellcheck disable=SC2086 # words on purpose, as systemd splits them
$args --help >/dev/null 2>"$dir/log.template" ||
	fail "the template's command line is refused: $(cat "$dir/log.template")"
if command -v systemd-analyze >/dev/null; then
	cp "$dir/kvmmd@.service" "$dir/kvmmd@0.service"
	systemd-analyze verify "$dir/kvmmd@0.service" >"$dir/log.verify2" 2>&1 ||
		fail "systemd-analyze verify kvmmd@0: $(cat "$dir/log.verify2")"
	grep -q "kvmmd@" "$dir/log.verify2" &&
		fail "systemd-analyze verify kvmmd@0: $(cat "$dir/log.verify2")"
	echo "systemd-analyze verify kvmmd@0: ok"
fi

# Every option line of the shipped config, uncommented, is accepted.
sed -n '/^#$/,$p' "$src/kvmm/kvmmd/systemd/kvmmd.conf" | sed -n 's/^# \([a-z]\)/\1/p' >"$dir/all.conf"
[ "$(wc -l <"$dir/all.conf")" -ge 10 ] || fail "too few option lines: $(cat "$dir/all.conf")"
"$b/kvmmd" --config "$dir/all.conf" --help >/dev/null 2>"$dir/log.conf" ||
	fail "shipped config lines refused: $(cat "$dir/log.conf")"
"$b/kvmmd" --config "$src/kvmm/kvmmd/systemd/kvmmd.conf" --help >/dev/null ||
	fail "shipped config refused"

# A pid file that cannot be written fails the start: under a missing
# directory, the operator's to change, exit 2 (RestartPreventExitStatus)
"$b/kvmmd" --foreground --backend host --telemetry off --socket "$dir/s3" \
	--pid-file "$dir/no/such/dir/kvmmd.pid" 2>"$dir/log.pid"
rc=$?
[ $rc = 2 ] || fail "unwritable --pid-file: exit $rc"
grep -q "^kvmmd: --pid-file $dir/no/such/dir/kvmmd.pid: No such file or directory" "$dir/log.pid" ||
	fail "pid file message: $(tail -2 "$dir/log.pid")"
grep -qx "kvmmd: cannot start: an option is wrong (above)" "$dir/log.pid" ||
	fail "pid file message: $(tail -1 "$dir/log.pid")"
[ -e "$dir/s3" ] && fail "the refused start left its socket"
# ... and a writable one holds the pid while it runs, and goes at exit.
"$b/kvmmd" --foreground --backend host --telemetry off --socket "$dir/s4" \
	--pid-file "$dir/kvmmd.pid" 2>"$dir/log.pid2" &
pid=$!
# kvmmd binds its socket first and writes the pid file after (renamed
# into place whole): wait for the file, as an init script would.
for _ in $(seq 600); do [ -s "$dir/kvmmd.pid" ] && break; sleep 0.05; done
[ -S "$dir/s4" ] || fail "the pid file came before the socket"
[ "$(cat "$dir/kvmmd.pid")" = "$pid" ] || fail "pid file holds '$(cat "$dir/kvmmd.pid")', not $pid"
kill -TERM $pid
wait $pid || fail "exit status $?"
[ -e "$dir/kvmmd.pid" ] && fail "pid file left behind"
ls "$dir"/kvmmd.pid.*.tmp 2>/dev/null && fail "a temporary pid file left behind"
echo "ok"
