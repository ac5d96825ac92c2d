#!/bin/bash
# timeout: 90
# Starts refused by the rule of Documentation/admin.md ("The rule for a
# refused start"): exit 2 with the option's own line and "kvmmd: cannot
# start: an option is wrong (above)" when the operator must change an
# option, exit 1 with "kvmmd: cannot start: REASON" when the same start
# may work later.  Until 7 December these broke it:
#   - --pid-file and --log-file naming a directory, a path under a
#     missing directory or under a file, a symlink loop (and, as root in
#     a mount namespace of its own, a read-only file system) exited 1;
#     a --log-file FIFO with no reader still exits 1 (one may come);
#   - --policy-state under a missing directory (or a file, or with a
#     link at FILE.lock) only warned "nothing will be saved" and ran a
#     whole life saving nothing; another kvmmd holding FILE.lock still
#     exits 1;
#   - a --profile that is no profile was not read under --telemetry off;
#   - a config line "gpu-mem = = 1M" was read as "gpu-mem 1M", and
#     "foreground =" as "foreground".
# Each good value still starts (the socket answers kvmmctl status).
set -u
b=${KVMM_BUILD:-build}
[ -x "$b/kvmmd" ] || { echo "skip: $b/kvmmd not built"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-startref-XXXXXX")
sock=$dir/k.sock
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
rule="kvmmd: cannot start: an option is wrong (above)"

# kvmmd in the foreground with option...: exit status in $rc, stderr in
# $dir/err
run() {
	timeout 20 "$b/kvmmd" --foreground --backend host --gpu-mem 64M \
		--telemetry off --socket "$sock" "$@" 2>"$dir/err" </dev/null
	rc=$?
}

# refused expected-exit expected-line option...: the start exits so,
# with that line on stderr, the rule's second line for exit 2 (and only
# then), and no socket left
refused() {
	local want=$1 line=$2
	shift 2
	run "$@"
	[ "$rc" = "$want" ] || fail "$*: exit $rc, expected $want ($(cat "$dir/err"))"
	grep -qF -- "$line" "$dir/err" || fail "$*: no '$line' in: $(cat "$dir/err")"
	if [ "$want" = 2 ]; then
		grep -qxF "$rule" "$dir/err" || fail "$*: no '$rule': $(cat "$dir/err")"
	else
		grep -qxF "$rule" "$dir/err" && fail "$*: exit 1 but '$rule'"
		grep -q "^kvmmd: cannot start: " "$dir/err" ||
			fail "$*: no 'kvmmd: cannot start: ' line: $(cat "$dir/err")"
	fi
	grep -q "nothing will be saved" "$dir/err" && fail "$*: still the old WARN"
	[ -e "$sock" ] && fail "$*: left a socket"
	return 0
}

# starts option...: kvmmd starts, serves kvmmctl status, stops with 0;
# left running (in $pid) with --keep
starts() {
	local keep=
	[ "$1" = --keep ] && { keep=1; shift; }
	"$b/kvmmd" --foreground --backend host --gpu-mem 64M --telemetry off \
		--socket "$sock" "$@" 2>"$dir/err.ok" </dev/null &
	pid=$!
	for _ in $(seq 400); do [ -S "$sock" ] && break; sleep 0.05; done
	[ -S "$sock" ] || fail "$*: no socket ($(cat "$dir/err.ok"))"
	"$b/kvmmctl" --socket "$sock" status >"$dir/status" ||
		fail "$*: kvmmctl status"
	[ -n "$keep" ] && return 0
	kill -TERM "$pid"
	wait "$pid" || fail "$*: exit $? at the stop ($(cat "$dir/err.ok"))"
	pid=
}

mkdir "$dir/adir"
: >"$dir/afile"
ln -s loop "$dir/loop"
mkfifo "$dir/fifo"
cat >"$dir/bad.profile" <<'EOF'
this is no profile
EOF

# --pid-file: the paths the operator must change, then a good one
refused 2 "kvmmd: --pid-file $dir/adir: Is a directory" --pid-file "$dir/adir"
[ "$(ls -A "$dir/adir")" = "" ] || fail "--pid-file a directory: it holds $(ls -A "$dir/adir")"
for f in "$dir"/*.tmp; do
	[ -e "$f" ] && fail "--pid-file a directory: left $f"
done
refused 2 "kvmmd: --pid-file $dir/none/pid: No such file or directory" \
	--pid-file "$dir/none/pid"
refused 2 "kvmmd: --pid-file $dir/afile/pid: Not a directory" \
	--pid-file "$dir/afile/pid"
refused 2 "kvmmd: --pid-file $dir/loop/pid: Too many levels of symbolic links" \
	--pid-file "$dir/loop/pid"
starts --keep --pid-file "$dir/pid"
[ "$(cat "$dir/pid")" = "$pid" ] || fail "--pid-file holds '$(cat "$dir/pid")', not $pid"
kill -TERM "$pid"
wait "$pid" || fail "--pid-file: exit $?"
pid=
[ -e "$dir/pid" ] && fail "--pid-file left at the stop"
echo "--pid-file: 4 refusals (exit 2), a good one starts"

# --log-file: the same, and a FIFO with no reader (one may come): exit 1
refused 2 "kvmmd: --log-file $dir/adir: Is a directory" --log-file "$dir/adir"
refused 2 "kvmmd: --log-file $dir/none/log: No such file or directory" \
	--log-file "$dir/none/log"
refused 2 "kvmmd: --log-file $dir/afile/log: Not a directory" \
	--log-file "$dir/afile/log"
refused 2 "kvmmd: --log-file $dir/loop/log: Too many levels of symbolic links" \
	--log-file "$dir/loop/log"
refused 1 "kvmmd: cannot start: --log-file $dir/fifo: No such device or address" \
	--log-file "$dir/fifo"
starts --log-file "$dir/log"
grep -q "signal 15: shutting down" "$dir/log" || fail "--log-file: no stop line in $dir/log"
echo "--log-file: 4 refusals (exit 2), a FIFO (exit 1), a good one starts"

# --policy-state: FILE.lock not to be had refuses the start
refused 2 "policy state $dir/none/ps: cannot lock $dir/none/ps.lock: No such file or directory" \
	--policy-state "$dir/none/ps"
refused 2 "policy state $dir/afile/ps: cannot lock $dir/afile/ps.lock: Not a directory" \
	--policy-state "$dir/afile/ps"
ln -s "$dir/elsewhere" "$dir/linked.lock"
refused 2 "policy state $dir/linked: cannot lock $dir/linked.lock: Too many levels of symbolic links" \
	--policy-state "$dir/linked"
[ -e "$dir/elsewhere" ] && fail "--policy-state: the lock followed the link"
starts --keep --cache-block-pages 4 --policy-state "$dir/ps"
[ -e "$dir/ps.lock" ] || fail "--policy-state: no $dir/ps.lock while it runs"
grep -q "policy state $dir/ps: none yet" "$dir/err.ok" ||
	fail "--policy-state: no 'none yet' line: $(cat "$dir/err.ok")"
# another kvmmd holds FILE.lock: exit 1, as before (it may stop); on a
# socket of its own, so that the lock refuses it, not the socket
sock=$dir/k2.sock refused 1 "policy state $dir/ps: another kvmmd keeps its state there" \
	--policy-state "$dir/ps"
kill -TERM "$pid"
wait "$pid" || fail "--policy-state: exit $?"
pid=
echo "--policy-state: 3 refusals (exit 2), another kvmmd's (exit 1), a good one starts"

# --profile under --telemetry off: read, refused as with telemetry on
refused 2 "--profile no-such-profile-kvmm: unknown profile 'no-such-profile-kvmm'" \
	--profile no-such-profile-kvmm
refused 2 "--profile $dir/bad.profile: " --profile "$dir/bad.profile"
refused 2 "--profile no-such-profile-kvmm: unknown profile" \
	--telemetry shm --profile no-such-profile-kvmm
starts --profile h200-llama3-8b
grep -q "cost model: h200-llama3-8b, not used: --telemetry off" "$dir/err.ok" ||
	fail "--profile: no 'not used' line: $(cat "$dir/err.ok")"
echo "--profile: 3 refusals (exit 2), a good one starts"

# the config file: one '=' at most, and a value after it
conf() { printf '%s\n' "$1" >"$dir/c.conf"; }
badconf() { # line expected-reason
	conf "$1"
	run --config "$dir/c.conf"
	[ "$rc" = 2 ] || fail "config '$1': exit $rc ($(cat "$dir/err"))"
	grep -qF "kvmmd: $dir/c.conf:1: $2" "$dir/err" ||
		fail "config '$1': $(cat "$dir/err")"
	[ -e "$sock" ] && fail "config '$1': left a socket"
	return 0
}
badconf "gpu-mem = = 1M" "'gpu-mem': a second '='"
badconf "gpu-mem==1M" "'gpu-mem': a second '='"
badconf "gpu-mem =" "'gpu-mem' needs a value (nothing after '=')"
badconf "gpu-mem=" "'gpu-mem' needs a value (nothing after '=')"
badconf "foreground =" "'foreground' takes no value (got '=' and nothing after it)"
badconf "gpu-mem = 1M garbage" "bad value for 'gpu-mem'"
grep -qF "kvmmd: --gpu-mem: '1M garbage' is not a size" "$dir/err" ||
	fail "config trailing garbage: $(cat "$dir/err")"
conf "revoke-timeout = 1500"
starts --config "$dir/c.conf"
grep -q "(timeout 1500 ms)" "$dir/status" ||
	fail "config revoke-timeout = 1500: $(cat "$dir/status")"
conf "quota = 1001=16M"
starts --config "$dir/c.conf"
echo "config file: 6 refusals (exit 2), good lines start"

# a read-only file system: root, in a mount namespace of its own
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null ||
	! unshare -m true 2>/dev/null; then
	echo "ok (the read-only file system cases skipped: they need root and unshare -m)"
	exit 0
fi
mkdir "$dir/ro"
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m bash -c '
	b=$1 dir=$2
	mount --bind "$dir/ro" "$dir/ro" && mount -o remount,bind,ro "$dir/ro" || exit 3
	for o in pid-file log-file policy-state; do
		timeout 20 "$b/kvmmd" --foreground --backend host --gpu-mem 64M \
			--telemetry off --socket "$dir/k.sock" --$o "$dir/ro/f" \
			2>"$dir/err.$o" </dev/null
		echo $? >"$dir/rc.$o"
	done
' inner "$b" "$dir" || fail "read-only bind mount: exit $?"
for o in pid-file log-file policy-state; do
	[ "$(cat "$dir/rc.$o")" = 2 ] || fail "--$o on a read-only fs: exit $(cat "$dir/rc.$o") ($(cat "$dir/err.$o"))"
	grep -q "Read-only file system" "$dir/err.$o" || fail "--$o on a read-only fs: $(cat "$dir/err.$o")"
	grep -qxF "$rule" "$dir/err.$o" || fail "--$o on a read-only fs: no '$rule'"
done
[ -e "$sock" ] && fail "read-only fs: left a socket"
echo "ok (and 3 read-only file system refusals, exit 2)"
