#!/bin/bash
# The replay's clock is ms << 20 in 64 bits: it counts from the first
# request, so a trace gives the same figures whatever its epoch (from
# 2^44 ms on, ms << 20 wrapped and lfu at 2 GPU blocks lost its hit), and
# a trace spanning 2^44 ms or more (with ttl_ms too) is refused with the
# line, not wrapped.
set -u
B=${KVMM_BUILD:-build}
R=$B/kvmm-replay
[ -x "$R" ] || { echo "skip: $R not built"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

trace() { # first timestamp: 4 requests 2 ms apart, [1] [2] [3] [2]
	local i=0 h
	for h in 1 2 3 2; do
		echo "{\"timestamp\": $(($1 + 2 * i)), \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [$h]$2}"
		i=$((i + 1))
	done
}
trace 0 "" >"$tmp/a.jsonl"
trace 17592186044414 "" >"$tmp/b.jsonl" # 2^44 - 2
trace 1700000000000 ', "ttl_ms": 5000' >"$tmp/c.jsonl"
trace 0 ', "ttl_ms": 5000' >"$tmp/d.jsonl"
strip() { sed 's/,"wall_s":[0-9.]*//'; }
for p in lfu lru asym; do
	a=$("$R" --trace "$tmp/a.jsonl" --policy $p --gpu-blocks 2 --json | strip) ||
		fail "$p: replay failed"
	b=$("$R" --trace "$tmp/b.jsonl" --policy $p --gpu-blocks 2 --json | strip) ||
		fail "$p: replay at 2^44 - 2 failed"
	[ "$a" = "$b" ] || fail "$p: epoch 0 and 2^44 - 2 differ: $a / $b"
	c=$("$R" --trace "$tmp/c.jsonl" --policy $p --gpu-blocks 2 --json | strip)
	d=$("$R" --trace "$tmp/d.jsonl" --policy $p --gpu-blocks 2 --json | strip)
	[ "$c" = "$d" ] || fail "$p: TTLs at a Unix epoch differ: $c / $d"
done
echo "$a" | grep -q '"hit_blocks":1,' || fail "lfu: expected 1 hit: $a"

# a span of 2^44 ms, and 2^44 - 1 ms plus a TTL of 2 ms: refused
printf '%s\n' '{"timestamp": 5, "input_length": 512, "hash_ids": [1]}' \
	'{"timestamp": 17592186044421, "input_length": 512, "hash_ids": [1]}' >"$tmp/e.jsonl"
printf '%s\n' '{"timestamp": 5, "input_length": 512, "hash_ids": [1]}' \
	'{"timestamp": 17592186044420, "input_length": 512, "hash_ids": [1], "ttl_ms": 2}' >"$tmp/f.jsonl"
printf '%s\n' '{"timestamp": 5, "input_length": 512, "hash_ids": [1]}' \
	'{"timestamp": 17592186044420, "input_length": 512, "hash_ids": [1]}' >"$tmp/g.jsonl"
out=$("$R" --trace "$tmp/e.jsonl" --policy lru --gpu-blocks 2 --json 2>&1)
[ $? -eq 1 ] || fail "a span of 2^44 ms: not refused: $out"
echo "$out" | grep -q 'line 2: "timestamp" 17592186044421 is 2^44 ms or more after the first request' ||
	fail "a span of 2^44 ms: $out"
out=$("$R" --trace "$tmp/f.jsonl" --policy lru --gpu-blocks 2 --json 2>&1)
[ $? -eq 1 ] || fail "2^44 - 1 ms + ttl 2: not refused: $out"
echo "$out" | grep -q 'line 2: "timestamp" 17592186044420 + "ttl_ms" is 2^44 ms or more' ||
	fail "2^44 - 1 ms + ttl 2: $out"
out=$("$R" --trace "$tmp/g.jsonl" --policy lru --gpu-blocks 2 --json 2>&1) ||
	fail "a span of 2^44 - 1 ms refused: $out"
echo "$out" | grep -q '"hit_blocks":1,' || fail "2^44 - 1 ms: $out"
exit 0
