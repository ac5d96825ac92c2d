#!/bin/bash
# kvmmctl metrics and kvmmd --metrics-listen from the command line, with
# real processes:
#   - kvmmd --help lists --metrics-listen; bad addresses are usage errors
#     (exit 2) naming the option; a port in use fails the start (exit 1)
#     with the address and the reason, and no control socket is left;
#   - the option works from a config file; [::1]:0 serves over IPv6 (when
#     the host has IPv6 loopback);
#   - kvmmctl metrics prints a valid exposition (every family with HELP
#     and TYPE, counters *_total, float values, no duplicate series) equal
#     to status --json, and the textfile-collector recipe of
#     Documentation/admin.md (tmp file + rename) installs it;
#   - against a stopped daemon kvmmctl metrics exits 1 with a message,
#     prints nothing, and the recipe leaves no file behind.
set -u
b=${KVMM_BUILD:-build}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-metrics-XXXXXX")
sock=$dir/kvmm.sock
pid='' pid2=''
trap 'kill $pid $pid2 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null; exit 1; }
port_of() { # log file -> the port kvmmd logged
	for _ in $(seq 600); do
		p=$(grep -o 'metrics: serving http://[^ ]*' "$1" | sed 's/.*:\([0-9]*\)\/metrics$/\1/')
		[ -n "$p" ] && { echo "$p"; return 0; }
		sleep 0.05
	done
	return 1
}
wait_sock() {
	for _ in $(seq 600); do [ -S "$1" ] && return 0; sleep 0.05; done
	return 1
}

"$b/kvmmd" --help | grep -q -- '--metrics-listen \[HOST:\]PORT' || fail "--help does not list --metrics-listen"
for bad in abc 70000 -1 1.2.3.4.5:80 ::1:80 '[::1]' '[::1]:' '[zz]:80' 'example.com:80' ':80' '127.0.0.1:'; do
	"$b/kvmmd" --foreground --telemetry off --backend host --socket "$sock" --metrics-listen "$bad" 2>"$dir/err"
	rc=$?
	[ $rc = 2 ] || fail "--metrics-listen '$bad': exit $rc, expected 2"
	grep -q -- "--metrics-listen: '.*' is not \[HOST:\]PORT" "$dir/err" || fail "no message for '$bad': $(cat "$dir/err")"
done
[ -e "$sock" ] && fail "a refused start left a socket"

# From a config file, on a port the kernel picks.
cat >"$dir/conf" <<CONF
backend host
metrics-listen 127.0.0.1:0
CONF
"$b/kvmmd" --foreground --telemetry off --config "$dir/conf" --socket "$sock" 2>"$dir/log" &
pid=$!
wait_sock "$sock" || fail "no socket"
port=$(port_of "$dir/log") || fail "no 'metrics: serving' line"
grep -q "metrics: serving http://127.0.0.1:$port/metrics" "$dir/log" || fail "log line"

# The same port again: the start fails, clearly, before the socket.
"$b/kvmmd" --foreground --telemetry off --backend host --socket "$dir/second.sock" --metrics-listen "$port" 2>"$dir/err"
rc=$?
[ $rc = 1 ] || fail "a second daemon on port $port: exit $rc, expected 1"
grep -q -- "--metrics-listen $port: Address already in use" "$dir/err" || fail "bind error: $(cat "$dir/err")"
grep -q "cannot start" "$dir/err" || fail "no 'cannot start': $(cat "$dir/err")"
[ -e "$dir/second.sock" ] && fail "the failed daemon left its socket"

# kvmmctl metrics: valid, and equal to status --json taken right after.
"$b/kvmmctl" --socket "$sock" metrics >"$dir/m.prom" || fail "kvmmctl metrics"
"$b/kvmmctl" --socket "$sock" status --json >"$dir/s.json" || fail "status --json"
python3 - "$dir/m.prom" "$dir/s.json" <<'PY' || fail "kvmmctl metrics content"
import json, math, re, sys
text = open(sys.argv[1]).read()
st = json.load(open(sys.argv[2]))
assert text.endswith("\n")
name_re = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
sample_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
help_, type_, series, done = {}, {}, {}, set()
last = None
for n, line in enumerate(text.splitlines(), 1):
    if line.startswith("# HELP ") or line.startswith("# TYPE "):
        kind, rest = line[2:6], line[7:]
        name, _, arg = rest.partition(" ")
        assert name_re.match(name), (n, line)
        d = help_ if kind == "HELP" else type_
        assert name not in d, (n, "second " + kind)
        assert name not in done and name != last, (n, kind + " after samples")
        if kind == "TYPE":
            assert arg in ("counter", "gauge", "histogram", "summary", "untyped"), (n, line)
        d[name] = arg
        continue
    if line.startswith("#") or not line:
        continue
    m = sample_re.match(line)
    assert m, (n, line)
    name, labels, value = m.group(1), m.group(3) or "", m.group(4)
    assert name in help_ and name in type_, (n, "no HELP/TYPE for " + name)
    if type_[name] == "counter":
        assert name.endswith("_total"), (n, name)
    else:
        assert not name.endswith("_total"), (n, name)
    pairs, pos = [], 0
    for lm in label_re.finditer(labels):
        assert lm.start() == pos, (n, "bad labels", labels)
        pairs.append(lm.group(1))
        pos = lm.end()
    assert pos == len(labels) and len(set(pairs)) == len(pairs), (n, labels)
    float(value)
    if name != last:
        assert name not in done, (n, "samples of %s not together" % name)
        if last:
            done.add(last)
        last = name
    key = (name, tuple(sorted(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', labels))))
    assert key not in series, (n, "duplicate series", key)
    series[key] = value
def get(name, **labels):
    return series[(name, tuple(sorted(labels.items())))]
# status came after metrics had closed its session: the same sessions
# open, one more opened; 5 more socket commands (metrics' TIER_STATS,
# ADMIN_TENANTS and BYE, status's HELLO and ADMIN_STATUS)
assert get("kvmm_up") == "1"
assert get("kvmm_sessions") == str(st["sessions"]), (get("kvmm_sessions"), st["sessions"])
assert int(get("kvmm_sessions_opened_total")) + 1 == st["sessions_total"]
assert int(get("kvmm_commands_total", path="socket")) + 5 == st["cmds_socket"], (get("kvmm_commands_total", path="socket"), st["cmds_socket"])
assert int(get("kvmm_pool_capacity_pages")) == st["pages"]["total"]
assert int(get("kvmm_pool_free_pages")) == st["pages"]["free"]
assert int(get("kvmm_page_size_bytes")) == st["page_size"]
assert get("kvmm_revoke_timeout_seconds") == "%d.%03d" % divmod(st["revoke_timeout_ms"], 1000)
for t in ("gpu", "host", "nvme"):
    for k in ("capacity_blocks", "used_blocks", "hits", "drops"):
        name = "kvmm_tier_%s%s" % (k, "_total" if k in ("hits", "drops") else "")
        assert int(get(name, tier=t)) == st["cache"]["tiers"][t][k], (name, t)
assert ("kvmm_cache_policy_info", (("policy", "asym"), ("restore_mode", "plan"))) in series  # the defaults
assert st["cache_policy"] == "asym" and st["restore_mode"] == "plan", st
assert ("kvmm_cache_scope_info", (("scope", "shared"),)) in series  # the default
assert st["cache_scope"] == "shared", st
print(len(series), "series")
PY
grep -q "^kvmm_build_info{version=\"$("$b/kvmmctl" --version | sed 's/kvmmctl \([^ ]*\) .*/\1/')\",abi=\"1\.[0-9]*\"} 1$" "$dir/m.prom" || fail "build_info"

# The textfile-collector recipe (Documentation/admin.md).
mkdir "$dir/textfile"
recipe() {
	f=$dir/textfile/kvmm.prom
	if "$b/kvmmctl" --socket "$sock" metrics >"$f.$$"; then
		mv "$f.$$" "$f"
	else
		rm -f "$f.$$" "$f"
	fi
}
recipe
grep -q '^kvmm_up 1$' "$dir/textfile/kvmm.prom" || fail "recipe: no kvmm.prom"
[ "$(ls "$dir/textfile")" = kvmm.prom ] || fail "recipe left $(ls "$dir/textfile")"

# IPv6 loopback, when there is one.
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
	"$b/kvmmd" --foreground --telemetry off --backend host --socket "$dir/v6.sock" --metrics-listen '[::1]:0' 2>"$dir/log6" &
	pid2=$!
	wait_sock "$dir/v6.sock" || fail "no v6 daemon"
	p6=$(port_of "$dir/log6") || fail "no v6 log line"
	grep -q "metrics: serving http://\[::1\]:$p6/metrics" "$dir/log6" || fail "v6 log line: $(cat "$dir/log6")"
	python3 - "$p6" <<'PY' || fail "GET over IPv6"
import http.client, sys
c = http.client.HTTPConnection("::1", int(sys.argv[1]), timeout=10)
c.request("GET", "/metrics")
r = c.getresponse()
body = r.read().decode()
assert r.status == 200 and "\nkvmm_up 1\n" in body, r.status
assert r.getheader("Content-Type").startswith("text/plain; version=0.0.4")
PY
	kill -TERM $pid2
	wait $pid2 || fail "v6 kvmmd exit status $?"
	pid2=''
else
	echo "no IPv6 loopback: [::1] not tried"
fi

# A stopped daemon: exit 1, a message, nothing on stdout, and the
# recipe removes the stale file (absent(kvmm_up) is the alert).
kill -TERM $pid
wait $pid || fail "kvmmd exit status $?"
pid=''
"$b/kvmmctl" --socket "$sock" metrics >"$dir/out" 2>"$dir/err"
rc=$?
[ $rc = 1 ] || fail "kvmmctl metrics on a stopped daemon: exit $rc"
[ -s "$dir/out" ] && fail "kvmmctl metrics printed something: $(head -3 "$dir/out")"
# one line, why (a second "is kvmmd running?" followed it)
[ "$(cat "$dir/err")" = "kvmmctl: metrics: $sock: no such socket (is kvmmd running? with another --socket?)" ] ||
	fail "message: $(cat "$dir/err")"
recipe 2>/dev/null
[ -z "$(ls "$dir/textfile")" ] || fail "recipe left $(ls "$dir/textfile") for a stopped daemon"
"$b/kvmmctl" --socket "$sock" metrics extra 2>/dev/null; [ $? = 2 ] || fail "extra argument not a usage error"
echo ok
