#!/bin/bash
# kvmm-replay --model-daemon refuses a trace with ttl_ms or priority, as
# --daemon does (kvmmd's prefix opens set neither): it used to drop them
# silently and report figures of another trace.  Without them it runs,
# and the default replay still applies them.
set -u
B=${KVMM_BUILD:-build}
R=$B/kvmm-replay
[ -x "$R" ] || { echo "skip: $R not built"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '%s\n' '{"timestamp": 0, "input_length": 512, "hash_ids": [1]}' \
	'{"timestamp": 1, "input_length": 512, "hash_ids": [2], "ttl_ms": 100}' >"$tmp/ttl.jsonl"
printf '%s\n' '{"timestamp": 0, "input_length": 512, "hash_ids": [1]}' \
	'{"timestamp": 1, "input_length": 512, "hash_ids": [2]}' \
	'{"timestamp": 2, "input_length": 512, "hash_ids": [3], "priority": -1}' >"$tmp/prio.jsonl"
printf '%s\n' '{"timestamp": 0, "input_length": 512, "hash_ids": [1]}' \
	'{"timestamp": 1, "input_length": 512, "hash_ids": [1]}' >"$tmp/plain.jsonl"

out=$("$R" --trace "$tmp/ttl.jsonl" --policy lru --gpu-blocks 2 --model-daemon --json 2>&1)
[ $? -eq 1 ] || fail "ttl_ms: not refused: $out"
echo "$out" | grep -q -- '--model-daemon: .*ttl.jsonl line 2 has a "ttl_ms", which kvmmd' ||
	fail "ttl_ms: $out"
out=$("$R" --trace "$tmp/prio.jsonl" --policy asym --gpu-blocks 2 --model-daemon --msa --json 2>&1)
[ $? -eq 1 ] || fail "priority: not refused: $out"
echo "$out" | grep -q 'line 3 has a "priority"' || fail "priority: $out"
# only the requests replayed count
"$R" --trace "$tmp/prio.jsonl" --policy lru --gpu-blocks 2 --model-daemon \
	--max-requests 2 --json >/dev/null || fail "--max-requests 2 refused"
out=$("$R" --trace "$tmp/plain.jsonl" --policy lru --gpu-blocks 2 --model-daemon --json) ||
	fail "a trace without TTLs refused"
echo "$out" | grep -q '"hit_blocks":1,' || fail "plain: $out"
"$R" --trace "$tmp/ttl.jsonl" --policy lru --gpu-blocks 2 --json >/dev/null ||
	fail "the default replay refused TTLs"
exit 0
