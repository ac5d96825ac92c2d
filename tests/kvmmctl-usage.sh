#!/bin/bash
# kvmmctl's usage errors and refusals say what was wrong, with the right
# exit status: an option without its value or unknown (they were
# "unknown command"), a bad log level, a tenant id that is the others'
# row, a number out of range (was "not a number"), a word that is no
# number (with its command and argument, once): each names the value;
# a word a command does not take (an option, one too many, one missing)
# is named too (they printed only the usage); metrics refuses --json;
# trace --help is trace's own help; the help names --version, help and
# every option trace --help names (--by-uid was missing).  Against a kvmmd: metrics to a full device says
# ENOSPC (was EIO), and a host limit on a kvmmd whose --host-mem holds
# no block says so (was "host needs --host-mem" although it was given),
# and before the cache opens the tier it lacks (it named the GPU's).
set -u
b=${KVMM_BUILD:-build}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-ctl-usage-XXXXXX")
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
# an empty path and one no sockaddr_un holds are the word given (they
# were connect()'s "Connection refused" and "File name too long", exit 1)
expect 2 "kvmmctl: --socket needs a PATH (got '')" --socket "" status
long=/tmp/$(printf '%0110d' 0)
expect 2 "kvmmctl: --socket /tmp/00000000000000000000000000000000000...: 115 bytes, longer than a Unix socket's path may be (107)" --socket "$long" status
expect 2 "kvmmctl: unknown option '--bogus'" --bogus
expect 2 "kvmmctl: unknown command 'frob'" frob
expect 2 "kvmmctl: log-level: 'loud' is not err, warn, info or debug" log-level loud
expect 2 "kvmmctl: tenant-limit: 4294967295 is no tenant" tenant-limit 4294967295 gpu:1
expect 2 "kvmmctl: quota: UID '4294967296' is out of range (at most 4294967295)" quota 4294967296 1G
expect 2 "kvmmctl: quota: UID '12x' is not a number" quota 12x 1G
# a number that is none names its command and which argument it is
# ("kvmmctl: 'x' is not a number" said neither: revoke takes four), in
# one line before the usage (tenant-limit printed it twice, cache-drop
# --uid and trace's options a second, vaguer line beside their own)
expect 2 "kvmmctl: revoke: REGION 'x' is not a number" revoke 1 x 2
expect 2 "kvmmctl: revoke: FIRST_BLOCK '-1' is not a number" revoke 1 2 3 -1
expect 2 "kvmmctl: kill: SESSION_ID 'abc' is not a number" kill abc
expect 2 "kvmmctl: tenant-limit: ID 'abc' is not a number" tenant-limit abc gpu:1
expect 2 "kvmmctl: cache-drop: --uid 'abc': not a uid or gid" cache-drop --uid abc
for a in "tenant-limit abc gpu:1" "cache-drop --uid abc" "kill abc" "trace --count x"; do
	# shellcheck disable=SC2086
	"$b/kvmmctl" $a 2>"$dir/err" >/dev/null
	n=$(grep -vc '^usage: \|^  ' "$dir/err")
	[ "$n" = 1 ] || fail "$a: $n lines before the usage: $(cat "$dir/err")"
done
# log-level without its level, or with two, says so (it printed the
# usage line alone)
expect 2 "kvmmctl: log-level: arguments missing" log-level
expect 2 "kvmmctl: log-level: unexpected argument 'info'" log-level warn info
# each usage error names the word (they printed only the usage line);
# metrics --json said nothing and printed text
expect 2 "kvmmctl: status: unknown option '--jsn'" status --jsn
expect 2 "kvmmctl: sessions: unexpected argument 'extra'" sessions extra
expect 2 "kvmmctl: tenants: unknown option '--by-uid'" tenants --by-uid
expect 2 "kvmmctl: trace: unknown option '--bogus'" trace --bogus
expect 2 "kvmmctl: trace: --count needs a value" trace --count
expect 2 "kvmmctl: trace: unexpected argument 'x'" trace x
expect 2 "kvmmctl: metrics: --json is not supported" --json metrics
expect 2 "kvmmctl: metrics: unexpected argument 'now'" metrics now
expect 2 "kvmmctl: kill: unexpected argument '2'" kill 1 2
expect 2 "kvmmctl: kill: arguments missing" kill
expect 2 "kvmmctl: revoke: too few arguments" revoke 1 2
expect 2 "kvmmctl: tenant-limit: unknown option '--all'" tenant-limit --all 1 gpu:1
expect 2 "kvmmctl: policy-state: unexpected argument 'b'" policy-state a b
for a in "status --jsn" "sessions extra" "trace --bogus" "kill"; do
	# shellcheck disable=SC2086
	"$b/kvmmctl" $a 2>&1 | grep -q '^usage: kvmmctl' || fail "$a: no usage line"
done
# a --socket that is no socket: "Connection refused" misled
mkdir "$dir/walk"
expect 1 "kvmmctl: status: $dir/walk: not a socket (a directory): give kvmmd's --socket" --socket "$dir/walk" status
: >"$dir/plain"
expect 1 "kvmmctl: sessions: $dir/plain: not a socket (a regular file)" --socket "$dir/plain" sessions
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

# Before a region opens the cache every tier reads 0 in TIER_STATS: a
# kvmmd without --nvme-path refused gpu:1,nvme:1 and kvmmctl blamed the
# GPU tier ("no such tier: gpu (... one block, 0 bytes)"), and host:1,
# nvme:1 the host tier it had
"$b/kvmmd" --foreground --backend host --socket "$dir/s" --gpu-mem 16M \
	--telemetry off --host-mem 1M 2>"$dir/log" &
pid=$!
for _ in $(seq 600); do [ -S "$dir/s" ] && break; sleep 0.05; done
[ -S "$dir/s" ] || fail "no socket: $(cat "$dir/log")"
expect 1 "kvmmctl: tenant-limit: refused: kvmmd has no NVMe tier (it was started without --nvme-path)" \
	--socket "$dir/s" tenant-limit 1000 gpu:1,nvme:1
expect 1 "kvmmctl: tenant-limit: refused: kvmmd has no host tier or no NVMe tier (it was started without --host-mem or without --nvme-path)" \
	--socket "$dir/s" tenant-limit 1000 host:1,nvme:1
grep -q "0 bytes" "$dir/err" && fail "tenant-limit: $(cat "$dir/err")"
"$b/kvmmctl" --socket "$dir/s" tenant-limit 1000 gpu:1,host:1 2>"$dir/err" ||
	fail "tenant-limit 1000 gpu:1,host:1: $(cat "$dir/err")"
kill $pid
wait $pid || fail "kvmmd exit status $?"
pid=
echo ok
