#!/bin/bash
# kvmmctl's usage errors and refusals say what was wrong, with the right
# exit status: an option without its value or unknown (they were
# "unknown command"), a bad log level, a tenant id that is the others'
# row, a number out of range (was "not a number"): each names the value;
# trace --help is trace's own help; the help names --version, help and
# every option trace --help names (--by-uid was missing).  Against a kvmmd: metrics to a full device says
# ENOSPC (was EIO), and a host limit on a kvmmd whose --host-mem holds
# no block says so (was "host needs --host-mem" although it was given).
set -u
b=${KVMM_BUILD:-build}
dir=$(mktemp -d /tmp/kvmm-ctl-usage-XXXXXX)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

expect() { # status expected-line args...
	local st=$1 want=$2 rc
	shift 2
	"$b/kvmmctl" "$@" >"$dir/out" 2>"$dir/err"
	rc=$?
	[ $rc = "$st" ] || fail "kvmmctl $*: exit $rc, expected $st ($(cat "$dir/err"))"
	grep -qF -- "$want" "$dir/err" "$dir/out" ||
		fail "kvmmctl $*: no '$want' in: $(cat "$dir/err" "$dir/out")"
}

expect 2 "kvmmctl: --socket needs a PATH" --socket
expect 2 "kvmmctl: --socket needs a PATH" --socket= status
expect 2 "kvmmctl: unknown option '--bogus'" --bogus
expect 2 "kvmmctl: unknown command 'frob'" frob
expect 2 "kvmmctl: log-level: 'loud' is not err, warn, info or debug" log-level loud
expect 2 "kvmmctl: tenant-limit: 4294967295 is no tenant" tenant-limit 4294967295 gpu:1
expect 2 "kvmmctl: '4294967296' is out of range (at most 4294967295)" quota 4294967296 1G
expect 2 "kvmmctl: '12x' is not a number" quota 12x 1G
expect 0 "usage: kvmmctl [--json] trace [--once]" trace --help
grep -q "^usage: kvmmctl \[--socket" "$dir/out" && fail "trace --help printed kvmmctl's list"
grep -qF -- "--pin-root DIR" "$dir/out" || fail "trace --help: no options: $(cat "$dir/out")"
trace_opts=$(head -1 "$dir/out" | grep -o -- '--[a-z-]*' | grep -v -- '--json')
[ "$(echo "$trace_opts" | wc -l)" -ge 6 ] || fail "trace --help's options: $trace_opts"
expect 0 "kvmmctl --version | --help | help" help
for w in "  help " $trace_opts; do
	grep -qF -- "$w" "$dir/out" || fail "help has no '$w': $(cat "$dir/out")"
done

# 64 KiB of host memory holds no block of two 64 KiB pages: no host tier
"$b/kvmmd" --foreground --backend host --socket "$dir/s" --page-size 64K \
	--gpu-mem 16M --telemetry off --cache-block-pages 2 --host-mem 64K \
	2>"$dir/log" &
pid=$!
for _ in $(seq 600); do [ -S "$dir/s" ] && break; sleep 0.05; done
[ -S "$dir/s" ] || fail "no socket: $(cat "$dir/log")"
expect 1 "kvmmctl: tenant-limit: refused: kvmmd has no such tier: host (--host-mem must hold at least one block, 131072 bytes)" \
	--socket "$dir/s" tenant-limit 1000 host:1
"$b/kvmmctl" --socket "$dir/s" metrics >/dev/full 2>"$dir/err"
rc=$?
[ $rc = 1 ] || fail "metrics to /dev/full: exit $rc"
grep -qF "kvmmctl: metrics: writing: No space left on device" "$dir/err" ||
	fail "metrics to /dev/full: $(cat "$dir/err")"
kill $pid
wait $pid || fail "kvmmd exit status $?"
pid=
echo ok
