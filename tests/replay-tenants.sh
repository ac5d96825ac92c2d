#!/bin/bash
# Tenants in traces and replays: a request's "tenant" charges its blocks
# (kvmm-replay --tenant-limit holds one to a share of a tier, as kvmmd's
# --tenant-limit), each tenant's hits in the output (worked out by hand on
# a tiny trace), kvmm-agentgen --tenants, and clear errors for bad input.
set -u
B=${KVMM_BUILD:-build}
R=$B/kvmm-replay
G=$B/kvmm-agentgen
[ -x "$R" ] && [ -x "$G" ] || { echo "skip: tools not built"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# lru, 4 GPU blocks.  A (tenant 1) r1 [1 2 3]; B (tenant 2) r2 [10 11];
# A r3 [1 2 3].  Without a limit B's 11 pushes A's 1 out, and r3 hits
# nothing (its prefix stops at 1; its 1, 2, 3 then push out 2, 3 and 10:
# 4 drops).  With B held to 1 GPU block, B's 11 sends B's own 10 down
# (dropped: no lower tier; 1 drop) and A's r3 hits all 3.
cat >"$tmp/t.jsonl" <<'T'
{"timestamp": 0, "input_length": 1536, "output_length": 1, "tenant": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 1, "input_length": 1024, "output_length": 1, "tenant": 2, "hash_ids": [10, 11]}
{"timestamp": 2, "input_length": 1536, "output_length": 1, "tenant": 1, "hash_ids": [1, 2, 3]}
T
check() { # ARGS... then a python body reading j
	local body=$1
	shift
	out=$("$R" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 4 "$@" \
		--json) || fail "replay $* failed"
	python3 -c "import json, sys
j = json.loads(sys.argv[1])
t = {x['id']: x for x in j.get('tenants', [])}
$body" "$out" || fail "replay $*: $out"
}
check 'assert j["hit_blocks"] == 0
assert t[1]["requests"] == 2 and t[1]["blocks"] == 6 and t[1]["hit_blocks"] == 0
assert t[2]["requests"] == 1 and t[2]["blocks"] == 2
assert t[2]["limit_blocks"] == {"gpu": 0, "host": 0, "nvme": 0}
assert t[2]["limit_moves"] == 0 and j["drops"] == 4'
check 'assert j["hit_blocks"] == 3
assert t[1]["hit_blocks"] == 3 and t[1]["hit_ratio_blocks"] == 0.5
assert t[1]["limit_blocks"]["gpu"] == 0
assert t[2]["limit_blocks"] == {"gpu": 1, "host": 0, "nvme": 0}
assert t[2]["limit_moves"] == 1 and t[2]["hit_blocks"] == 0
assert j["drops"] == 1' \
	--tenant-limit 2=gpu:1
# the same in kvmmd's model (--model-daemon): the same hits here
check 'assert t[1]["hit_blocks"] == 3 and t[2]["limit_moves"] == 1' \
	--tenant-limit 2=gpu:1 --model-daemon
# text output: a line per tenant
"$R" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 4 \
	--tenant-limit 2=gpu:1 >"$tmp/text" || fail "text replay"
grep -q '^  tenant 2 .*limit gpu 1 host 0 nvme 0  moved 1$' "$tmp/text" ||
	fail "no tenant line: $(cat "$tmp/text")"
# one tenant, no limit: no "tenants" in the JSON (as before tenants)
sed 's/"tenant": [0-9]*, //' "$tmp/t.jsonl" >"$tmp/one.jsonl"
out=$("$R" --trace "$tmp/one.jsonl" --policy lru --gpu-blocks 4 --json) ||
	fail "one-tenant replay"
case $out in *tenants*) fail "tenants without tenants: $out" ;; esac

# bad "tenant" values: the line and the reason, exit 1
for v in -1 4294967295 1.5 '"x"'; do
	printf '{"timestamp": 0, "input_length": 512, "output_length": 1, "tenant": %s, "hash_ids": [1]}\n' \
		"$v" >"$tmp/bad.jsonl"
	err=$("$R" --trace "$tmp/bad.jsonl" --policy lru --gpu-blocks 4 2>&1)
	[ $? = 1 ] || fail "tenant $v: not exit 1: $err"
	case $err in *"line 1"*) ;; *) fail "tenant $v: no line: $err" ;; esac
done
# bad options: exit 2 and a message naming them
usage() { # expected-text ARGS...
	local want=$1
	shift
	err=$("$R" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 4 "$@" 2>&1)
	[ $? = 2 ] || fail "$*: not exit 2: $err"
	case $err in *"$want"*) ;; *) fail "$*: no '$want' in: $err" ;; esac
}
for bad in x=gpu:1 1=gpu:0 1=disk:1 1 1=gpu:1,gpu:2 -1=gpu:1 4294967295=gpu:1 \
	1= ' 1=gpu:1' +1=gpu:1; do
	usage "bad --tenant-limit" --tenant-limit "$bad"
done
usage "that tenant twice" --tenant-limit 1=gpu:1 --tenant-limit 1=gpu:2
usage "on the host tier, which has no capacity (give --host-blocks)" --tenant-limit 1=host:1
# the option missing, not "give --host-blocks or --nvme-blocks" with
# --host-blocks given
usage "on the nvme tier, which has no capacity (give --nvme-blocks)" \
	--host-blocks 3 --tenant-limit 1=nvme:1
usage "replays in process" --tenant-limit 1=gpu:1 --daemon /nonexistent

# kvmm-agentgen --tenants: session s is tenant 1000 + s % N; limiting one
# tenant lowers its hit ratio and raises the others'
"$G" --seed 5 --duration 300 --tenants 3 >"$tmp/ag" 2>/dev/null ||
	fail "agentgen --tenants"
"$G" --seed 5 --duration 300 >"$tmp/ag1" 2>/dev/null || fail "agentgen"
grep -q tenant "$tmp/ag1" && fail "a tenant field without --tenants"
python3 - "$tmp/ag" <<'P' || fail "agentgen tenants"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
assert {r["tenant"] for r in reqs} == {1000, 1001, 1002}
assert all(r["tenant"] == 1000 + r["session"] % 3 for r in reqs)
P
a=$("$R" --trace "$tmp/ag" --policy lru --gpu-blocks 400 --json) ||
	fail "agentgen replay"
b=$("$R" --trace "$tmp/ag" --policy lru --gpu-blocks 400 --json \
	--tenant-limit 1000=gpu:60) || fail "agentgen limited replay"
python3 - "$a" "$b" <<'P' || fail "limit effect: $a $b"
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
ta = {x["id"]: x for x in a["tenants"]}
tb = {x["id"]: x for x in b["tenants"]}
assert tb[1000]["limit_moves"] > 0 and ta[1000]["limit_moves"] == 0
assert tb[1000]["hit_ratio_blocks"] < ta[1000]["hit_ratio_blocks"]
assert tb[1001]["hit_ratio_blocks"] > ta[1001]["hit_ratio_blocks"]
assert tb[1002]["hit_ratio_blocks"] > ta[1002]["hit_ratio_blocks"]
for x in (1000, 1001, 1002):
    print("tenant %d: hit %.4f without a limit, %.4f with 1000 "
          "held to 60 of 400 GPU blocks" % (x, ta[x]["hit_ratio_blocks"],
                                           tb[x]["hit_ratio_blocks"]))
P
# 20 tenants: 15 rows and the others'; a limited tenant always has a
# row of its own (made first), the others' row no limit, and the rows
# add up to the totals
"$G" --seed 5 --duration 300 --tenants 20 >"$tmp/ag20" 2>/dev/null ||
	fail "agentgen --tenants 20"
c=$("$R" --trace "$tmp/ag20" --policy lru --gpu-blocks 200 --json \
	--tenant-limit 1000=gpu:10 --tenant-limit 1019=gpu:10) ||
	fail "20-tenant replay"
python3 - "$c" <<'P' || fail "20 tenants: $c"
import json, sys
j = json.loads(sys.argv[1])
t = {x["id"]: x for x in j["tenants"]}
assert len(j["tenants"]) == 16 and "others" in t
assert t[1000]["limit_blocks"]["gpu"] == 10 and t[1000]["limit_moves"] > 0
assert t[1019]["limit_blocks"]["gpu"] == 10 and t[1019]["limit_moves"] > 0
assert t["others"]["limit_blocks"] == {"gpu": 0, "host": 0, "nvme": 0}
assert t["others"]["limit_moves"] == 0
for k in ("requests", "blocks", "hit_blocks"):
    assert sum(x[k] for x in j["tenants"]) == j[k], k
P
echo "ok: tenants in traces, limits in replays"
