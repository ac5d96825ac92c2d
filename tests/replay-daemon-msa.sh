#!/bin/bash
# kvmm-replay --daemon --msa drives a real kvmmd (host backend) with
# segmented prefix opens (KVMM_PREFIX_OPEN_ACTIONS | _SEGMENTS, ABI 1.6:
# blocks after a hole are shared or reloaded, the holes recomputed and
# published again), and gives exactly the hit counts, per tier and per
# request, and the modelled times of the in-process --model-daemon --msa.
# First a hand trace (lru, 4 GPU blocks) whose third request finds its
# first block gone and the next two on the GPU: 2 hits after a hole, none
# in the leading run, the same from both.  Then the first 1500 requests of
# the Mooncake conversation trace: lru at 2000 GPU blocks and at 1000 GPU
# + 4000 host, asym at 1000 GPU and at 1000 GPU + 2000 host, lru at 300 +
# 600, and asym at 40 GPU + 100 host on the first 1700 requests, a GPU
# tier shorter than some requests (their hits once differed at request
# 1664, see replay-daemon.sh); lru at 2000 and at 1000 + 4000 must make
# holes there (hit_blocks > leading_hit_blocks).  The opens are not early, so the daemon's restore
# plan is the serial one and, a host reload beating any recomputation,
# hands out no cached block to recompute (the overlapped plan it made
# before recomputed host blocks after a hole, whose reloads would queue
# behind the others, but the client got them only after every reload);
# the model makes the same plan.  At 300 + 600 those planned recomputes
# were the only holes before a hit.
# Skips (77) without the trace (after the hand trace).   timeout: 150
set -u
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
# shellcheck source=tests/lib/replay-daemon.sh
. "$(dirname "$0")/lib/replay-daemon.sh"

pair() { # trace policy gpu host requests: the daemon's JSON in $D/a
	local tr=$1 p=$2 g=$3 h=$4 n=$5 a b
	start "$p" "$g" "$h"
	a=$("$R" --trace "$tr" --policy "$p" --gpu-blocks "$g" --host-blocks "$h" \
		--max-requests "$n" --msa --daemon "$D/s" --per-request "$D/a.req" \
		--json) || fail "daemon --msa replay $p $g $h"
	echo "$a" >"$D/a"
	stop
	b=$("$R" --trace "$tr" --policy "$p" --gpu-blocks "$g" --host-blocks "$h" \
		--max-requests "$n" --msa --model-daemon --per-request "$D/b.req" \
		--json) || fail "--model-daemon --msa replay $p $g $h"
	a=$(echo "$a" | strip)
	b=$(echo "$b" | strip)
	[ "$a" == "$b" ] || fail "$p gpu=$g host=$h: --daemon --msa and --model-daemon --msa differ:
daemon:     $a
in-process: $b
first request whose hits differ (request hits gpu host nvme):
$(paste -d'|' "$D/a.req" "$D/b.req" |
		awk -F'|' '$1 != $2 { print "daemon: " $1 "; in-process: " $2; exit }')"
	cmp -s "$D/a.req" "$D/b.req" || fail "$p $g $h: --per-request files differ"
}

# --- a hand trace: lru, 4 GPU blocks (oldest first) ------------------
# r0 [1 2 3]: admitted: {1 2 3}.  r1 [4 5]: 5 evicts 1: {2 3 4 5}.
# r2 [1 2 3]: 1 is in no tier, 2 and 3 on the GPU: the open returns
# RECOMPUTE, GPU_SHARED, GPU_SHARED (kvmmd touches 2 and 3: {4 5 2 3});
# the driver publishes blocks 0-2, 1 is admitted again (evicts 4), 2 and
# 3 are duplicates.  MSA: 2 hits, both after the hole; one served run.
# Without --msa: no hit (the prefix stops at the missing first block).
cat >"$D/hole.jsonl" <<'EOF'
{"timestamp": 0, "input_length": 1536, "output_length": 10, "hash_ids": [1, 2, 3]}
{"timestamp": 1000, "input_length": 1024, "output_length": 10, "hash_ids": [4, 5]}
{"timestamp": 2000, "input_length": 1536, "output_length": 10, "hash_ids": [1, 2, 3]}
EOF
pair "$D/hole.jsonl" lru 4 0 3
python3 - "$(cat "$D/a")" "$D/a.req" <<'P' || fail "hand trace: $(cat "$D/a")"
import json, sys
m = json.loads(sys.argv[1])
rate = 0.6 * 989e12
lin = 512 * 13.96e9 / rate
rc = lambda i: lin + 524288 * 512 * (512 * i + 256.5) / rate
assert m["msa"] is True and m["requests"] == 3 and m["blocks"] == 8, m
assert m["hit_blocks"] == 2 and m["leading_hit_blocks"] == 0, m
assert m["hits"] == {"gpu": 2, "host": 0, "nvme": 0}, m
assert m["recomputed_blocks"] == 6 and m["hit_tokens"] == 1024, m
# r2 recomputes its block 0 only, one served run: msa(1) = 1
p = 2 * (rc(0) + rc(1) + rc(2)) - rc(2) + rc(0)
assert abs(m["modeled_prefill_s"] - p) < 1e-6, (m, p)
assert abs(m["reuse_overhead_s"] - rc(0)) < 1e-6, m
assert [l.split() for l in open(sys.argv[2])] == [
    ["0", "0", "0", "0", "0"], ["1", "0", "0", "0", "0"],
    ["2", "2", "2", "0", "0"]]
P
start lru 4 0
"$R" --trace "$D/hole.jsonl" --policy lru --gpu-blocks 4 --daemon "$D/s" \
	--json >"$D/plain" || fail "daemon replay without --msa"
stop
grep -q '"hit_blocks":0,' "$D/plain" || fail "without --msa a hit: $(cat "$D/plain")"
echo "ok: hand trace, 2 hits after a hole through kvmmd and in process"

# a kvmmd that does not plan as the replay models it: refused at once
# where this process may ask kvmmd (its admin: root here), not a
# mismatch later
if [ "$(id -u)" = 0 ]; then
	KVMMD_EXTRA="--restore-mode reload" start lru 4 0
	if "$R" --trace "$D/hole.jsonl" --policy lru --gpu-blocks 4 --msa \
		--daemon "$D/s" --json >"$D/out" 2>"$D/err"; then
		fail "--msa against --restore-mode reload ran: $(cat "$D/out")"
	fi
	grep -q "runs with --restore-mode reload" "$D/err" ||
		fail "no clear error: $(cat "$D/err")"
	stop
	KVMMD_EXTRA="--telemetry shm" start lru 4 0
	"$R" --trace "$D/hole.jsonl" --policy lru --gpu-blocks 4 --msa \
		--daemon "$D/s" --json >"$D/out" 2>"$D/err" ||
		fail "--msa with telemetry on: $(cat "$D/err")"
	grep -q "corrects its cost model from telemetry" "$D/err" ||
		fail "no telemetry warning: $(cat "$D/err")"
	stop
	echo "ok: a forced restore mode refused, telemetry warned about"
fi

# --- the conversation trace ---------------------------------------------
[ -r "$T" ] || { echo "skip: trace $T absent"; exit 77; }
conv() { # policy gpu host holes|-
	local hit lead
	pair "$T" "$1" "$2" "$3" "$N"
	hit=$(grep -o '"hit_blocks":[0-9]*' "$D/a" | grep -o '[0-9]*$')
	lead=$(grep -o '"leading_hit_blocks":[0-9]*' "$D/a" | grep -o '[0-9]*$')
	grep -q "\"requests\":$N," "$D/a" || fail "$*: not $N requests: $(cat "$D/a")"
	[ "$hit" -gt 0 ] || fail "$*: no hits: $(cat "$D/a")"
	[ "$(awk '{ s += $2 } END { print s }' "$D/a.req")" == "$hit" ] ||
		fail "$*: --per-request does not add up to $hit"
	if [ "$4" == holes ]; then
		[ "$hit" -gt "$lead" ] || fail "$*: no hit after a hole ($hit hits, $lead leading)"
	fi
	echo "ok $1 gpu=$2 host=$3: $hit hits ($lead leading) $(grep -o '"hits":{[^}]*}' "$D/a")"
}
# two at a time, each with its kvmmd (job, collect:
# tests/lib/replay-daemon.sh), the longest first
N=1700 job conv asym 40 100 -
job conv lru 1000 4000 holes
job conv asym 1000 2000 -
job conv lru 2000 0 holes
job conv asym 1000 0 -
job conv lru 300 600 -
collect
echo "ok: --daemon --msa and --model-daemon --msa agree on $N requests"
