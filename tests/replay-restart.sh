#!/bin/bash
# kvmm-replay --restart-every: the cache restarts empty every 2000
# requests of the Mooncake conversation trace (about ten minutes of it),
# as kvmmd does, keeping what asym learned (kvmmd --policy-state) or
# not (--restart-forget).  Kept, asym gets more hit blocks and less reuse
# overhead at 1000 and 5000 GPU blocks and with a host tier; lru learns
# nothing, so forgetting changes none of its figures; the restarts count
# 6 (before requests 2000, 4000, ..., 12000); belady, --daemon and a
# --restart-forget alone are refused.  Skips (77) without the trace.
# timeout: 60
set -u
# shellcheck source=tests/lib/replay-trace.sh
. "$(dirname "$0")/lib/replay-trace.sh"
run() { "$R" --trace "$T" --json --restart-every 2000 "$@" || fail "kvmm-replay $*"; }
get() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

for cap in "--gpu-blocks 1000" "--gpu-blocks 5000" \
	"--gpu-blocks 1000 --host-blocks 4000 --profile h200-llama3-8b-ref"; do
	# shellcheck disable=SC2086
	kept=$(run --policy asym $cap)
	# shellcheck disable=SC2086
	lost=$(run --policy asym $cap --restart-forget)
	[ "$(get "$kept" restarts)" = 6 ] || fail "restarts: $kept"
	[ "$(get "$kept" restart_learned)" = kept ] || fail "kept: $kept"
	[ "$(get "$lost" restart_learned)" = forgotten ] || fail "forgotten: $lost"
	hk=$(get "$kept" hit_blocks) hl=$(get "$lost" hit_blocks)
	ok=$(get "$kept" reuse_overhead_s) ol=$(get "$lost" reuse_overhead_s)
	echo "asym $cap: hit blocks $hk kept, $hl forgotten; reuse overhead $ok s, $ol s"
	[ "$hk" -gt "$hl" ] || fail "asym $cap: kept $hk <= forgotten $hl"
	python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" \
		"$ok" "$ol" || fail "asym $cap: reuse overhead kept $ok >= $ol"
	[ "$(get "$kept" restart_lives)" -gt 0 ] || fail "no lives kept: $kept"
done

a=$(run --policy lru --gpu-blocks 5000)
b=$(run --policy lru --gpu-blocks 5000 --restart-forget)
[ "$(get "$a" hit_blocks)" = "$(get "$b" hit_blocks)" ] || fail "lru: $a / $b"
[ "$(get "$a" restart_lives)" = 0 ] || fail "lru kept lives: $a"
plain=$("$R" --trace "$T" --json --policy lru --gpu-blocks 5000)
[ "$(get "$a" hit_blocks)" -lt "$(get "$plain" hit_blocks)" ] ||
	fail "lru: restarts cost no hit: $a / $plain"

for bad in "--policy belady --gpu-blocks 100 --restart-every 10" \
	"--policy asym --gpu-blocks 100 --restart-forget" \
	"--policy asym --gpu-blocks 100 --restart-every 10 --daemon /nonexistent" \
	"--policy asym --gpu-blocks 100 --restart-every 0"; do
	# shellcheck disable=SC2086
	"$R" --trace "$T" $bad >/dev/null 2>&1
	[ $? = 2 ] || fail "not refused: $bad"
done
echo "ok"
