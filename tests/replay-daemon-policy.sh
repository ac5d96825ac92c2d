#!/bin/bash
# kvmm-replay --daemon refuses a kvmmd that runs another policy than
# --policy (the result was labelled with --policy but computed under
# kvmmd's; only the capacities were compared), naming both, before it
# replays (no table header either); with the same policy it replays.  A
# tiny hand-made trace, so no trace file is needed.   timeout: 60
set -u
# shellcheck source=tests/lib/replay-daemon.sh
. "$(dirname "$0")/lib/replay-daemon.sh"

cat >"$D/t.jsonl" <<'T'
{"timestamp": 0, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]}
{"timestamp": 1000, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 4]}
T
start lru 100 0
"$R" --trace "$D/t.jsonl" --policy asym --gpu-blocks 100 --daemon "$D/s" \
	>"$D/out" 2>"$D/err"
rc=$?
[ $rc = 1 ] || fail "asym against an lru kvmmd: exit $rc, expected 1"
grep -qF -- "--policy asym but kvmmd runs --cache-policy lru" "$D/err" ||
	fail "no message naming both policies: $(cat "$D/err")"
# that line alone ("replay failed: Invalid argument" followed it)
grep -q "replay failed" "$D/err" && fail "a second line: $(cat "$D/err")"
[ -s "$D/out" ] && fail "output for a refused replay: $(cat "$D/out")"
"$R" --trace "$D/t.jsonl" --policy lru --gpu-blocks 100 --daemon "$D/s" \
	--json >"$D/out" 2>"$D/err" || fail "lru against lru: $(cat "$D/err")"
grep -q '"policy":"lru"' "$D/out" || fail "lru replay: $(cat "$D/out")"
grep -q '"hit_blocks":2,' "$D/out" || fail "lru replay hits: $(cat "$D/out")"
stop
echo "replay --daemon policy check ok"
