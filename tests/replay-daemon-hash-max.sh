#!/bin/bash
# kvmm-replay --daemon sends hash_id + 1 as the kvmm hash (0 is none): a
# trace with hash_id 2^64 - 1 is refused with its line before any
# connection, instead of sending hash 0.  No kvmmd needed: the check
# comes first.
set -u
B=${KVMM_BUILD:-build}
R=$B/kvmm-replay
[ -x "$R" ] || { echo "skip: $R not built"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '%s\n' '{"timestamp": 0, "input_length": 1024, "hash_ids": [1, 2]}' \
	'{"timestamp": 1, "input_length": 1024, "hash_ids": [1, 18446744073709551615]}' >"$tmp/t.jsonl"
out=$("$R" --trace "$tmp/t.jsonl" --policy lru --gpu-blocks 2 --daemon "$tmp/none.sock" --json 2>&1)
[ $? -eq 1 ] || fail "not refused: $out"
echo "$out" | grep -q -- '--daemon: line 2: hash_id 18446744073709551615 has no kvmm hash' ||
	fail "$out"
echo "$out" | grep -q 'cannot reach' && fail "connected first: $out"
# 2^64 - 2 is fine (kvmm hash 2^64 - 1): the driver goes on to connect
printf '%s\n' '{"timestamp": 0, "input_length": 512, "hash_ids": [18446744073709551614]}' >"$tmp/u.jsonl"
out=$("$R" --trace "$tmp/u.jsonl" --policy lru --gpu-blocks 2 --daemon "$tmp/none.sock" --json 2>&1)
echo "$out" | grep -q 'cannot reach kvmmd' || fail "2^64 - 2: $out"
exit 0
