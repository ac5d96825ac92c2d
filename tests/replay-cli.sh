#!/bin/bash
# kvmm-replay on a tiny hand-made trace: the JSON fields and their values
# (worked out by hand below), the tier accounting, and clear errors with
# the right exit status on bad input.
set -u
B=${KVMM_BUILD:-build}
R=$B/kvmm-replay
[ -x "$R" ] || { echo "skip: $R not built"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Capacity 3, lru.  r1 [1 2 3]: 0 hits.  r2 [1 2 4]: 2 hits, 4 evicts 3.
# r3 [5]: evicts 1.  r4 [1 2 4]: 1 is gone, so 0 hits although 2 and 4
# are resident.  Hits 2 of 10 blocks.  Tokens: r2's two hit blocks are
# full (1024 of 1500+1500+100+1200 = 4300 input tokens).
cat >"$tmp/t.jsonl" <<'T'
{"timestamp": 0, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]}
{"timestamp": 1000, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 4]}
{"timestamp": 2000, "input_length": 100, "output_length": 10, "hash_ids": [5]}
{"timestamp": 3000, "input_length": 1200, "output_length": 10, "hash_ids": [1, 2, 4]}
T
out=$("$R" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 3 --json) ||
	fail "replay failed"
python3 - "$out" <<'P' || fail "bad JSON: $out"
import json, sys
j = json.loads(sys.argv[1])
need = ["policy", "requests", "blocks", "hit_blocks", "hit_ratio_blocks",
        "hit_ratio_tokens", "hits", "recomputed_blocks", "modeled_prefill_s",
        "modeled_prefill_s_nocache", "reuse_overhead_s", "ttft_mean_s",
        "ttft_p99_s"]
for k in need:
    assert k in j, k
assert set(j["hits"]) >= {"gpu", "host", "nvme"}
assert j["policy"] == "lru" and j["requests"] == 4 and j["blocks"] == 10
assert j["hit_blocks"] == 2 and j["hits"]["gpu"] == 2
assert abs(j["hit_ratio_blocks"] - 0.2) < 1e-9
assert abs(j["hit_ratio_tokens"] - 1024 / 4300) < 1e-6
assert j["recomputed_blocks"] == 8
# block i costs (512*13.96e9 + 524288*512*(512 i + 256.5)) / (0.6*989e12)
rc = lambda i: (512*13.96e9 + 524288*512*(512*i + 256.5)) / (0.6*989e12)
nocache = 4*rc(0) + 3*rc(1) + 3*rc(2)
assert abs(j["modeled_prefill_s_nocache"] - nocache) < 1e-5
prefill = (rc(0)+rc(1)+rc(2)) + rc(2) + rc(0) + (rc(0)+rc(1)+rc(2))
assert abs(j["modeled_prefill_s"] - prefill) < 1e-5, (j, prefill)
# seen before: r2's 1 and 2 (hits, cost 0); r4's 1, 2, 4 (recomputed)
assert abs(j["reuse_overhead_s"] - (rc(0) + rc(1) + rc(2))) < 1e-5
# arrivals 1 s apart, each prefill < 0.1 s: no queueing, ttft = prefill
assert abs(j["ttft_mean_s"] - prefill / 4) < 1e-3
P

# Tiers, gpu 1 + host 3 (4 blocks in all), lru in each.  r1 [1 2 3]:
# gpu {3}, host {1 2}.  r2 [1 2 4]: 1, 2 hit on host; after it gpu {4},
# host {3 1 2}.  r3 [5]: gpu {5}, host {1 2 4} (3 dropped).  r4 [1 2 4]:
# all three on host.  Hits 5, all from host.
out=$("$R" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 1 \
	--host-blocks 3 --json) || fail "tier replay failed"
python3 - "$out" <<'P' || fail "bad tier JSON: $out"
import json, sys
j = json.loads(sys.argv[1])
assert j["hit_blocks"] == 5 and j["hits"]["host"] == 5, j
assert j["drops"] == 1 and j["recomputed_blocks"] == 5, j
P

# Sweep prints one row per capacity.
n=$("$R" --trace "$tmp/t.jsonl" --policy asym --sweep 1,2,3,unlimited | wc -l)
[ "$n" = 5 ] || fail "sweep printed $n lines"
for p in lru lfu arc belady asym; do
	"$R" --trace "$tmp/t.jsonl" --policy $p --gpu-blocks 2 --json \
		>/dev/null || fail "$p failed"
done

# Bad input: exit 2 for usage, 1 for bad data, with a message naming it.
expect() { # status pattern args...
	local st=$1 pat=$2
	shift 2
	"$R" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	[ $rc = "$st" ] || fail "$* exited $rc, expected $st"
	grep -q -- "$pat" "$tmp/err" || fail "$*: no '$pat' in: $(cat "$tmp/err")"
}
expect 2 "--trace FILE is required" --policy lru --gpu-blocks 3
expect 2 "unknown policy 'mru'" --trace "$tmp/t.jsonl" --policy mru --gpu-blocks 3
expect 2 "bad --gpu-blocks '-5'" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks -5
expect 2 "bad --gpu-blocks '0'" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 0
expect 2 "bad --gpu-blocks ' -5'" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks " -5"
expect 2 "bad --host-blocks '+5'" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 3 --host-blocks +5
expect 2 "bad --prefill-servers ' 2'" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 3 --prefill-servers " 2"
expect 2 "bad --sweep" --trace "$tmp/t.jsonl" --policy lru --sweep 1,x
# an empty count between commas is no count (strtok_r skipped them)
for sw in 1,,2 ,5 5, "" ,; do
	expect 2 "bad --sweep '$sw' (up to 64 positive counts, comma-separated)" \
		--trace "$tmp/t.jsonl" --policy lru --sweep "$sw"
done
# a shipped profile by name, found under ./kvmm/policy/profiles with
# neither KVMM_PROFILE_DIR nor KVMM_SRC set (tests/run.sh sets KVMM_SRC,
# which hid that "." skipped its kvmm/policy/profiles), and under
# $KVMM_SRC/kvmm/policy/profiles from another directory
src=$PWD
[ -f kvmm/policy/profiles/h200-llama3-70b.profile ] ||
	fail "run from the source root"
env -u KVMM_SRC -u KVMM_PROFILE_DIR "$R" --trace "$tmp/t.jsonl" --policy lru \
	--gpu-blocks 3 --profile h200-llama3-70b >/dev/null ||
	fail "h200-llama3-70b not found from the source root"
(cd "$tmp" && env -u KVMM_PROFILE_DIR KVMM_SRC="$src" "$(readlink -f "$R")" \
	--trace "$tmp/t.jsonl" --policy lru --gpu-blocks 3 \
	--profile h200-llama3-70b >/dev/null) ||
	fail "h200-llama3-70b not found under \$KVMM_SRC"
# and from another directory with neither set, under the directory above
# the executable's (build/kvmm-replay -> build/..): kvmmd run so WARNed
# "unknown profile 'h200-llama3-8b'" at every start
if [ -f "$(dirname "$(readlink -f "$R")")/../kvmm/policy/profiles/h200-llama3-70b.profile" ]; then
	(cd "$tmp" && env -u KVMM_PROFILE_DIR -u KVMM_SRC "$(readlink -f "$R")" \
		--trace "$tmp/t.jsonl" --policy lru --gpu-blocks 3 \
		--profile h200-llama3-70b >/dev/null) ||
		fail "h200-llama3-70b not found above the executable's directory"
	(cd "$tmp" && env -u KVMM_PROFILE_DIR -u KVMM_SRC "$(readlink -f "$R")" \
		--trace "$tmp/t.jsonl" --policy lru --gpu-blocks 3 \
		--profile nope 2>&1 >/dev/null) | grep -qF "$(dirname "$(readlink -f "$R")")/../kvmm/policy/profiles/nope.profile" ||
		fail "the executable's tree not among the paths tried"
fi
expect 2 "unknown profile 'nope'" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 3 --profile nope
expect 1 "cannot open" --trace "$tmp/none.jsonl" --policy lru --gpu-blocks 3
# a directory is refused with the reason (it was "cannot read DIR")
mkdir "$tmp/tracedir"
expect 1 "cannot read $tmp/tracedir: Is a directory" --trace "$tmp/tracedir" --policy lru --gpu-blocks 3
printf '{"timestamp": 0, "input_length": 600, "hash_ids": [1, 2]}\n{"timestamp": 1,\n' >"$tmp/bad.jsonl"
expect 1 "line 2:" --trace "$tmp/bad.jsonl" --policy lru --gpu-blocks 3
printf '{"timestamp": 0, "input_length": 600, "hash_ids": [1]}\n' >"$tmp/bad2.jsonl"
expect 1 "line 1: 1 hash_ids for input_length 600" --trace "$tmp/bad2.jsonl" --policy lru --gpu-blocks 3
printf '{"timestamp": 0, "input_length": 600}\n' >"$tmp/bad3.jsonl"
expect 1 'missing "hash_ids"' --trace "$tmp/bad3.jsonl" --policy lru --gpu-blocks 3
# nesting in an unknown key is bounded (300000 '[' overflowed the stack)
python3 -c 'print("{\"timestamp\": 0, \"input_length\": 1, \"hash_ids\": [1], \"x\": " + "[" * 300000 + "]" * 300000 + "}")' >"$tmp/deep.jsonl"
expect 1 "line 1: nested deeper than 64" --trace "$tmp/deep.jsonl" --policy lru --gpu-blocks 3
: >"$tmp/empty.jsonl"
expect 1 "no requests" --trace "$tmp/empty.jsonl" --policy lru --gpu-blocks 3
expect 1 "kvmm-replay: --daemon /tmp/none.sock: cannot reach kvmmd: No such file or directory" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 3 --daemon /tmp/none.sock
# no table header for a replay that never ran
[ -s "$tmp/out" ] && fail "output for a failed --daemon replay: $(cat "$tmp/out")"
# --policy-state: a FIFO is refused, not waited on; a damaged state or
# one of another policy stops the replay before any output (the table's
# header came first)
mkfifo "$tmp/fifo"
expect 1 "fifo is a FIFO, not a regular file" --trace "$tmp/t.jsonl" --policy asym --gpu-blocks 3 --policy-state "$tmp/fifo"
[ -s "$tmp/out" ] && fail "output before the FIFO was refused: $(cat "$tmp/out")"
mkdir "$tmp/dir"
expect 1 "dir is a directory" --trace "$tmp/t.jsonl" --policy asym --gpu-blocks 3 --policy-state "$tmp/dir"
head -c 4096 /dev/zero >"$tmp/zeros"
expect 1 "zeros: not a policy state, or damaged" --trace "$tmp/t.jsonl" --policy asym --gpu-blocks 3 --policy-state "$tmp/zeros"
[ -s "$tmp/out" ] && fail "output before the damaged state was refused: $(cat "$tmp/out")"
"$R" --trace "$tmp/t.jsonl" --policy asym --gpu-blocks 3 --policy-state "$tmp/asym" >/dev/null ||
	fail "replay saving a state"
expect 1 "asym: learned by asym, not lru" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 3 --policy-state "$tmp/asym"
[ -s "$tmp/out" ] && fail "output before the other policy's state was refused: $(cat "$tmp/out")"
echo "replay CLI ok"
