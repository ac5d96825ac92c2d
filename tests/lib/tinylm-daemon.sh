# shellcheck shell=bash
# Sourced by the tinylm tests that run a real kvmmd, with the paths of any
# further programs they need as arguments.  Skips (77) unless tinylm,
# kvmmd and those are built and tinylm has the kvmm client library; then
# sets B, bin (tinylm) and a fresh $tmp that is removed on exit, after
# the daemon is stopped, and defines:
#   fail MESSAGE             print it and kvmmd's log tail, exit 1
#   start_daemon SOCK ARGS   kvmmd --backend host --socket SOCK ARGS in the
#                            foreground (log $tmp/kvmmd.log, pid $daemon),
#                            waiting up to 20 s for its socket; telemetry
#                            off unless ARGS ask for it, as td_start()'s:
#                            as root BPF telemetry pinned its maps under
#                            the machine's /sys/fs/bpf/kvmm (the runner
#                            found tinylm-revoke's left there)
#   stop_daemon              stop it and wait for it
#   check_output NAME        the tokens of tinylm's output $tmp/kv-NAME
#                            must equal $tmp/ref (sorted '^tok' lines of
#                            the private-memory reference); its last JSON
#                            line goes to $tmp/json-NAME
B=${KVMM_BUILD:-build}
bin=$B/tinylm
for p in "$bin" "$B/kvmmd" "$@"; do
	[ -x "$p" ] || { echo "skip: $p not built"; exit 77; }
done
if "$bin" --kv kvmm --socket /nonexistent --prompt 1 2>&1 | grep -q 'no kvmm client library'; then
	echo "skip: tinylm was built without the kvmm client library"
	exit 77
fi
tmp=$(mktemp -d)
daemon=""
stop_daemon() {
	[ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	daemon=""
}
cleanup() {
	stop_daemon
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	[ -f "$tmp/kvmmd.log" ] && tail -n 20 "$tmp/kvmmd.log"
	exit 1
}
start_daemon() {
	local sock=$1
	shift
	"$B/kvmmd" --backend host --socket "$sock" --telemetry off "$@" \
		--foreground \
		>"$tmp/kvmmd.log" 2>&1 &
	daemon=$!
	for _ in $(seq 400); do
		[ -S "$sock" ] && break
		sleep 0.05
	done
	[ -S "$sock" ] || fail "kvmmd did not create $sock"
}
check_output() {
	local name=$1
	grep '^tok' "$tmp/kv-$name" | sort >"$tmp/tok-$name"
	diff -q "$tmp/ref" "$tmp/tok-$name" >/dev/null || {
		diff "$tmp/ref" "$tmp/tok-$name" | head
		fail "$name: output differs from the private-memory reference"
	}
	grep '^{' "$tmp/kv-$name" | tail -n 1 >"$tmp/json-$name"
}
