#!/bin/bash
# kvmmctl against a real kvmmd: status --json has the documented fields
# with the configured values (pins 0), sessions lists a connected client
# (with its pin count and quota), quota and log-level are accepted and
# say what they set, a quota reads back (quota UID, tenants, metrics),
# another uid's admin command is refused with the reason, bad
# arguments are usage errors (exit 2), and
# SIGTERM removes the socket.  Also checks kvmmd's option errors (bad
# values, over-long paths, options that need another).
set -u
b=${KVMM_BUILD:-build}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-ctl-XXXXXX")
sock=$dir/kvmm.sock
trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null; exit 1; }

"$b/kvmmd" --version | grep -q '^kvmmd ' || fail "--version"
"$b/kvmmd" --foreground --gpu-mem 12X --socket "$sock" 2>"$dir/err" && fail "bad size accepted"
grep -q "gpu-mem: '12X' is not a size" "$dir/err" || fail "size error message: $(cat "$dir/err")"
"$b/kvmmd" --foreground --backend tpu --socket "$sock" 2>/dev/null && fail "bad backend accepted"
# refused with exit 2 and one line naming the option, never cut short
# or ignored: an over-long path or name, a block count with a size suffix,
# an NVMe tier without the host tier it is written through
long=$(printf '%0300d' 0)
bad() { # expected-line option...
	local want=$1 rc
	shift
	"$b/kvmmd" --foreground --telemetry off --socket "$sock" "$@" 2>"$dir/err"
	rc=$?
	[ $rc = 2 ] || fail "$*: exit $rc, expected 2"
	grep -qF "$want" "$dir/err" || fail "$*: message $(cat "$dir/err")"
	[ -e "$sock" ] && fail "$*: left a socket"
}
bad "kvmmd: --pid-file: '/tmp/000" --pid-file "/tmp/$long"
bad "is too long (300 bytes, at most 255)" --profile "$long"
bad "kvmmd: --telemetry-pin-root: '000" --telemetry-pin-root "$long"
bad "kvmmd: --telemetry-attach: '000" --telemetry-attach "$long"
bad "kvmmd: --cache-gpu-blocks: '1K' is not a number" --cache-gpu-blocks 1K
bad "kvmmd: --nvme-path $dir/nvme needs --host-mem" --nvme-path "$dir/nvme"
bad "kvmmd: --cache-scope: 'group' is not shared, uid or gid" --cache-scope group

cat >"$dir/conf" <<CONF
# test config
backend host
page-size 128K
gpu-mem = 32M
revoke-timeout 1234
CONF
# --policy-state= turns off what an earlier one (a unit's) turned on
"$b/kvmmd" --foreground --telemetry off --config "$dir/conf" --socket "$sock" \
	--policy-state "$dir/ps" --policy-state= 2>"$dir/log" &
pid=$!
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "no socket"
[ "$(stat -c %a "$sock")" = 660 ] || fail "socket mode $(stat -c %a "$sock")"

json=$("$b/kvmmctl" --socket "$sock" status --json) || fail "status"
echo "$json"
python3 - "$json" <<'PY' || fail "json content"
import json, sys
j = json.loads(sys.argv[1])
assert j["backend"] == "host", j
assert j["page_size"] == 128 * 1024, j
assert j["pages"]["total"] == 256, j
for k in ("free", "mapped", "allocated"):
    assert k in j["pages"], k
assert j["pages"]["free"] == 256 and j["pages"]["mapped"] == 0, j
assert j["sessions"] == 1 and j["sequences"] == 0, j
assert j["revoke_timeout_ms"] == 1234, j
assert j["pins"] == 0 and j["pinned_bytes"] == 0, j
assert j["cache_policy"] == "asym" and j["restore_mode"] == "plan" and j["cache_scope"] == "shared", j  # defaults
assert j["policy_state"] == {"mode": "off", "loaded_lives": 0, "saves": 0, "save_errors": 0, "save_age_ms": None}, j
PY
"$b/kvmmctl" --socket "$sock" status | grep -q '^backend *host' || fail "text status"
"$b/kvmmctl" --socket "$sock" status | grep -q '^policy *asym, restore mode plan, cache scope shared$' || fail "text status: policy"
"$b/kvmmctl" --socket "$sock" status | grep -q '^policy state off ' || fail "text status: policy state"
# no region used the cache yet: the tiers have no block size
"$b/kvmmctl" --socket "$sock" status | grep -q '^block size   not known yet: the first region to publish' || fail "text status: block size"
"$b/kvmmctl" --socket "$sock" sessions --json | python3 -c 'import json,sys; s=json.load(sys.stdin); assert len(s)==1 and s[0]["name"]=="kvmmctl" and s[0]["pins"]==0 and s[0]["pin_quota"]>=1 and s[0]["pinned_bytes"]==0, s' || fail "sessions"
"$b/kvmmctl" --socket "$sock" sessions | grep -q '^SESSION .* PINS  *PINNED FLAGS$' || fail "sessions text header"
# no line ends in a blank (each flag carried one: "... 0 admin ")
"$b/kvmmctl" --socket "$sock" sessions | grep -q ' admin$' || fail "sessions: no admin flag"
"$b/kvmmctl" --socket "$sock" sessions | grep -q ' $' && fail "sessions: a line ends in a blank"
# quota and log-level say what they set (they printed nothing), and a
# uid's quota reads back: kvmmctl quota UID, and tenants and metrics list
# a uid that has one (a uid with only a quota was shown nowhere)
out=$("$b/kvmmctl" --socket "$sock" quota 4242 1G) || fail "quota"
[ "$out" = "uid 4242: quota 8192 pages (1073741824 bytes), 0 pages charged (0 of them cached blocks it gets back when it needs them)" ] ||
	fail "quota set: $out"
out=$("$b/kvmmctl" --socket "$sock" quota 4242) || fail "quota read"
case $out in "uid 4242: quota 8192 pages (1073741824 bytes), 0 pages"*) ;; *) fail "quota read: $out" ;; esac
"$b/kvmmctl" --socket "$sock" --json quota 4242 | python3 -c 'import json,sys; q=json.load(sys.stdin); assert q=={"uid":4242,"quota_pages":8192,"quota_bytes":1<<30,"used_pages":0,"cached_pages":0,"page_size":128<<10}, q' ||
	fail "quota --json"
"$b/kvmmctl" --socket "$sock" tenants | grep -q '^uid 4242 .* 8192 ' || fail "tenants: no uid 4242: $("$b/kvmmctl" --socket "$sock" tenants)"
"$b/kvmmctl" --socket "$sock" metrics | grep -q '^kvmm_tenant_quota_pages{.*"4242"} 8192$' ||
	fail "metrics: no quota of uid 4242: $("$b/kvmmctl" --socket "$sock" metrics | grep quota)"
out=$("$b/kvmmctl" --socket "$sock" quota 4242 0) || fail "quota 0"
case $out in "uid 4242: no quota (unlimited), 0 pages"*) ;; *) fail "quota 0: $out" ;; esac
"$b/kvmmctl" --socket "$sock" tenants | grep -q '^uid 4242 ' && fail "tenants: uid 4242 without a quota"
out=$("$b/kvmmctl" --socket "$sock" quota 4243) || fail "quota of a uid without one"
case $out in "uid 4243: no quota (unlimited), 0 pages"*) ;; *) fail "quota 4243: $out" ;; esac
out=$("$b/kvmmctl" --socket "$sock" log-level debug) || fail "log-level"
[ "$out" = "kvmmd's log level: debug" ] || fail "log-level said: $out"
# --json was ignored: the text came out
out=$("$b/kvmmctl" --socket "$sock" --json log-level debug) || fail "--json log-level"
[ "$out" = '{"log_level":"debug"}' ] || fail "--json log-level said: $out"
# a uid that is neither 0 nor kvmmd's: the refusal says why, and names
# the command (log-level and quota printed a bare "Operation not
# permitted")
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	chmod 755 "$dir"
	chmod 666 "$sock"
	# a copy: the build directory may be out of that uid's reach (a
	# checkout under a 0700 home), and exec would fail with 126
	cp "$b/kvmmctl" "$dir/kvmmctl-any"
	chmod 755 "$dir/kvmmctl-any"
	for c in status "log-level info" "quota 4242 1G" "quota 4242"; do
		# shellcheck disable=SC2086
		setpriv --reuid 65534 --regid 65534 --clear-groups \
			"$dir/kvmmctl-any" --socket "$sock" $c 2>"$dir/err"
		[ $? = 1 ] || fail "$c as uid 65534: not refused"
		grep -qxF "kvmmctl: ${c%% *}: Operation not permitted: admin commands need uid 0 or kvmmd's own; this is uid 65534" "$dir/err" ||
			fail "$c as uid 65534: $(cat "$dir/err")"
	done
	chmod 660 "$sock"
else
	echo "(not root: the refusal of another uid not checked)"
fi
"$b/kvmmctl" --socket "$sock" log-level loud 2>/dev/null; [ $? = 2 ] || fail "bad level not a usage error"
"$b/kvmmctl" --socket "$sock" kill 99999 2>/dev/null; [ $? = 1 ] || fail "kill of unknown session should fail"
"$b/kvmmctl" --socket "$sock" frob 2>/dev/null; [ $? = 2 ] || fail "unknown command"
# past 63 arguments a command is refused, not run with part of them
"$b/kvmmctl" --socket "$sock" kill $(seq 1 70) 2>"$dir/err"; [ $? = 2 ] || fail "too many arguments not a usage error"
grep -q "too many arguments (at most 63" "$dir/err" || fail "no reason for too many arguments: $(cat "$dir/err")"
"$b/kvmmctl" --socket "$dir/nope.sock" status 2>/dev/null; [ $? = 1 ] || fail "missing socket"

# A second daemon on the same live socket refuses to start.
"$b/kvmmd" --foreground --telemetry off --backend host --socket "$sock" 2>/dev/null && fail "second daemon started"
kill -TERM $pid
wait $pid || fail "kvmmd exit status $?"
[ -e "$sock" ] && fail "socket left behind"

# Without --foreground: the parent returns once the socket is ready.
"$b/kvmmd" --telemetry off --backend host --socket "$sock" --pid-file "$dir/pid" 2>"$dir/bg.log" || fail "daemonize"
[ -S "$sock" ] || fail "no socket after daemonizing"
pid=$(cat "$dir/pid")
"$b/kvmmctl" --socket "$sock" status >/dev/null || fail "status of the background daemon"
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "background daemon did not stop"
[ -e "$sock" ] && fail "socket left behind by the background daemon"
echo ok
