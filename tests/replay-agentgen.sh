#!/bin/bash
# kvmm-agentgen writes valid, deterministic, prefix-consistent traces with
# shared system prompts, multi-turn sessions and tool-call TTL pins, and
# kvmm-replay accepts them and applies the TTLs (held or demotable).
set -u
B=${KVMM_BUILD:-build}
G=$B/kvmm-agentgen
R=$B/kvmm-replay
[ -x "$G" ] && [ -x "$R" ] || { echo "skip: tools not built"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$G" --seed 3 --duration 300 >"$tmp/a" 2>/dev/null || fail "agentgen failed"
"$G" --seed 3 --duration 300 >"$tmp/b" 2>/dev/null || fail "agentgen failed"
"$G" --seed 4 --duration 300 >"$tmp/c" 2>/dev/null || fail "agentgen failed"
cmp -s "$tmp/a" "$tmp/b" || fail "same seed, different traces"
cmp -s "$tmp/a" "$tmp/c" && fail "different seeds, same trace"
python3 - "$tmp/a" <<'P' || fail "trace content"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
assert len(reqs) > 100, len(reqs)
prefix = {}
sessions = {}
ts = [r["timestamp"] for r in reqs]
assert ts == sorted(ts)
for r in reqs:
    ids = r["hash_ids"]
    assert len(ids) == (r["input_length"] + 511) // 512
    for i, h in enumerate(ids):
        # equal ids mean equal prefixes
        p = tuple(ids[:i])
        assert prefix.setdefault(h, p) == p, "id %d under two prefixes" % h
    sessions.setdefault(r["session"], []).append(r)
# shared system prompts: many sessions start with the same block
firsts = {r["hash_ids"][0] for r in reqs}
assert len(firsts) <= 8
# multi-turn: a later turn extends its session's earlier full blocks
multi = [s for s in sessions.values() if len(s) > 1]
assert len(multi) > 20
for s in multi:
    for a, b in zip(s, s[1:]):
        full = a["input_length"] // 512
        assert b["hash_ids"][:full] == a["hash_ids"][:full]
        assert b["input_length"] > a["input_length"]
# agents pause for tools with a TTL pin and a priority
assert any("ttl_ms" in r for r in reqs) and any(r.get("priority") for r in reqs)
P
j=$("$R" --trace "$tmp/a" --policy asym --gpu-blocks 500 --json) ||
	fail "replay of a generated trace"
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['hit_ratio_blocks'] > 0.3, j" "$j" ||
	fail "generated trace has little reuse: $j"
# TTL pins under a small GPU tier: held in their tier they keep running
# requests' blocks out (--ttl-pins hold); demotable (the default) they go
# down a tier when nothing else can, and no less of the trace is served.
for p in lru asym; do
	for t in hold demote; do
		"$R" --trace "$tmp/a" --policy $p --gpu-blocks 100 \
			--host-blocks 400 --ttl-pins $t --json >"$tmp/ttl-$p-$t" ||
			fail "replay --policy $p --ttl-pins $t"
	done
done
"$R" --trace "$tmp/a" --policy lru --gpu-blocks 100 --host-blocks 400 \
	--json >"$tmp/ttl-default" || fail "replay, default TTL mode"
sed 's/"wall_s":[0-9.]*//' "$tmp/ttl-lru-demote" |
	cmp -s - <(sed 's/"wall_s":[0-9.]*//' "$tmp/ttl-default") ||
	fail "the default is not --ttl-pins demote"
for p in lru asym; do
python3 - "$tmp/ttl-$p-hold" "$tmp/ttl-$p-demote" <<'P' || fail "TTL modes, $p: $(cat "$tmp/ttl-$p-hold" "$tmp/ttl-$p-demote")"
import json, sys
h, d = (json.load(open(f)) for f in sys.argv[1:3])
assert h["ttl_demotions"] == 0, h
assert d["ttl_demotions"] > 1000, d
# held TTLs no longer cost the blocks cached below that an access could
# not bring up (the cache used to move them up and drop them): at this
# size the two modes are close, demotable never below
assert d["hit_blocks"] >= h["hit_blocks"], (h["hit_blocks"], d["hit_blocks"])
P
done
"$R" --trace "$tmp/a" --policy lru --gpu-blocks 5 --ttl-pins soft \
	>/dev/null 2>"$tmp/err" && fail "accepted --ttl-pins soft"
grep -q "bad --ttl-pins" "$tmp/err" || fail "no message for --ttl-pins soft"
"$G" --rate -1 >/dev/null 2>"$tmp/err" && fail "accepted --rate -1"
grep -q "bad --rate" "$tmp/err" || fail "no message for --rate -1"
# numbers as written: no nan, inf or hex (nan passed the range checks),
# counts and the seed are integers (--tenants 2.9 was 2), the seed any
# uint64_t, read exactly (through a double, 2^53 + 1 was 2^53)
for bad in "--rate nan" "--duration inf" "--rate 0x10" "--think -1" \
	"--tenants 2.9" "--tenants 1e1" "--max-tokens ' 4096'" \
	"--seed 18446744073709551616" "--seed 1.5"; do
	eval "\"\$G\" $bad" >/dev/null 2>"$tmp/err" && fail "accepted $bad"
	grep -qF -- "kvmm-agentgen: bad ${bad%% *} " "$tmp/err" ||
		fail "no message for $bad: $(cat "$tmp/err")"
done
grep -qF "bad --seed '1.5' (an integer, 0..18446744073709551615)" "$tmp/err" ||
	fail "seed message: $(cat "$tmp/err")"
"$G" --tenants 2.9 2>&1 >/dev/null | grep -qF "bad --tenants '2.9' (an integer, 1..1000000)" ||
	fail "tenants message"
"$G" --seed 9007199254740993 --duration 20 >"$tmp/s1" 2>/dev/null || fail "seed 2^53 + 1"
"$G" --seed 9007199254740992 --duration 20 >"$tmp/s0" 2>/dev/null || fail "seed 2^53"
cmp -s "$tmp/s0" "$tmp/s1" && fail "seeds 2^53 and 2^53 + 1 gave one trace"
"$G" --seed 18446744073709551615 --duration 20 >/dev/null 2>&1 || fail "seed 2^64 - 1"
echo "agentgen ok"
