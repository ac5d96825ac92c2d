#!/bin/bash
# BPF telemetry of kvmmd run from a `make install DESTDIR=` tree, where
# no libkvmm.so.1 is where it looks (LIBDIR, next to kvmmd, /usr/local/lib,
# /usr/lib): it still starts on BPF with its own probes, and says so with
# a WARN naming every place tried and --telemetry-attach (it was silent,
# and `kvmmctl trace` showed no client probe); with --telemetry-attach
# naming the tree's library its probes attach, and nothing is warned.
# Skips (77) without root, BPF or USDT, or when a libkvmm.so.1 is
# installed on this machine (then one is found).
# timeout: 120
set -u
source "${KVMM_SRC:-.}/tests/lib/install-tree.sh"
grep -q '^#define HAVE_BPF 1' "$SRC/$B/config.h" &&
	grep -q '^#define HAVE_SDT 1' "$SRC/$B/config.h" ||
	{ echo "skip: built without BPF or USDT support"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: BPF telemetry needs root"; exit 77; }
for l in "$LIBDIR" /usr/local/lib /usr/lib; do
	[ -e "$l/libkvmm.so.1" ] && { echo "skip: $l/libkvmm.so.1 is installed here"; exit 77; }
done
pin=/sys/fs/bpf/kvmm-install-$$
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$pin" "$D"' EXIT

install_tree "$D/root"
k=$D/root$(sed -n 's/^#define KVMM_PREFIX "\(.*\)"$/\1/p' "$paths")/bin/kvmmd
[ -x "$k" ] || fail "no $k"
lib=$D/root$LIBDIR/libkvmm.so.1

# run NAME ARGS...: kvmmd from the tree until its socket answers, stopped
run() {
	local log=$D/$1.log
	shift
	rm -f "$D/s"
	"$k" --foreground --backend host --socket "$D/s" --telemetry bpf \
		--telemetry-pin-root "$pin" --log-level info "$@" 2>"$log" &
	pid=$!
	for _ in $(seq 200); do [ -S "$D/s" ] && break; sleep 0.05; done
	[ -S "$D/s" ] || { cat "$log"; fail "kvmmd $* did not start"; }
	kill $pid && wait $pid
	pid=
}

run none
grep "telemetry" "$D/none.log"
grep -q "telemetry: bpf, maps in" "$D/none.log" &&
	grep -q "attached [1-9][0-9]* probes to $k (this process only)$" "$D/none.log" ||
	{ cat "$D/none.log"; fail "kvmmd did not run on BPF with its own probes"; }
# each place once (LIBDIR is /usr/local/lib by default)
tried=$LIBDIR/libkvmm.so.1
for l in "$(dirname "$k")" /usr/local/lib /usr/lib; do
	[ "$l" = "$LIBDIR" ] || tried="$tried, $l/libkvmm.so.1"
done
want="no libkvmm.so.1 to trace clients in (tried $tried)"
grep "WARN" "$D/none.log" | grep -qF "$want" ||
	{ cat "$D/none.log"; fail "no WARN: $want"; }
grep -qF -- "--telemetry-attach" <(grep "no libkvmm.so.1" "$D/none.log") ||
	fail "the WARN does not name --telemetry-attach"

run attach --telemetry-attach "$lib"
grep "telemetry" "$D/attach.log"
grep -q "attached [1-9][0-9]* probes to $lib" "$D/attach.log" ||
	{ cat "$D/attach.log"; fail "no probe attached to $lib"; }
grep -q "no libkvmm.so.1" "$D/attach.log" && fail "warned with --telemetry-attach"
echo "ok: warned without a library, attached with --telemetry-attach"
