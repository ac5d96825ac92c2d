#!/bin/bash
# What keeping the policy's learned state across restarts is worth
# (kvmmd --policy-state): the conversation trace replayed in process
# with the cache restarted empty every R requests, asym keeping what it
# learned against asym forgetting it (--restart-forget, kvmmd without
# the option), both in this run; lru with the same restarts, and asym
# without restarts, for scale.  Hit blocks and reuse overhead
# (Documentation/policy.md, "Restarts").
#   bench/restart-learned.sh   (KVMM_RESTART_EVERY, default "1000 2000 4000")
set -u
cd "$(dirname "$0")/.."
B=${KVMM_BUILD:-build}
T=${KVMM_TRACE:-../shared/traces/mooncake/conversation_trace.jsonl}
EVERY=${KVMM_RESTART_EVERY:-1000 2000 4000}
[ -r "$T" ] || { echo "restart-learned: trace $T absent"; exit 77; }
[ -x "$B/kvmm-replay" ] || { echo "restart-learned: $B/kvmm-replay not built"; exit 1; }
one() { "$B/kvmm-replay" --trace "$T" --json "$@" |
	python3 -c "import json,sys; j=json.load(sys.stdin); print(j['hit_blocks'], '%.1f' % j['reuse_overhead_s'])"; }
rows=
printf "%-24s %7s %21s %21s %8s %8s %21s\n" configuration restart \
	"asym kept: hits, s" "asym forgot: hits, s" "hits" "overhead" \
	"lru: hits, s"
for cap in "--gpu-blocks 1000" "--gpu-blocks 5000" "--gpu-blocks 20000" \
	"--gpu-blocks 1000 --host-blocks 4000"; do
	name=$(echo "$cap" | sed 's/--gpu-blocks /gpu /; s/ --host-blocks / + host /')
	# shellcheck disable=SC2086
	read -r h0 o0 < <(one --policy asym $cap --profile h200-llama3-8b-ref)
	printf "%-24s %7s %21s\n" "$name" never "$h0, $o0"
	for r in $EVERY; do
		# shellcheck disable=SC2086
		read -r hk ok < <(one --policy asym $cap --profile h200-llama3-8b-ref --restart-every "$r")
		# shellcheck disable=SC2086
		read -r hf of < <(one --policy asym $cap --profile h200-llama3-8b-ref --restart-every "$r" --restart-forget)
		# shellcheck disable=SC2086
		read -r hl ol < <(one --policy lru $cap --profile h200-llama3-8b-ref --restart-every "$r")
		printf "%-24s %7s %21s %21s %8.3f %8.3f %21s\n" "$name" "$r" \
			"$hk, $ok" "$hf, $of" "$(echo "$hk / $hf" | bc -l)" \
			"$(echo "$ok / $of" | bc -l)" "$hl, $ol"
		rows="$rows${rows:+,}{\"config\":\"$name\",\"restart_every\":$r,\"hits_kept\":$hk,\"hits_forgot\":$hf,\"hits_lru\":$hl,\"ratio_hits\":$(printf %.4f "$(echo "$hk / $hf" | bc -l)"),\"ratio_overhead\":$(printf %.4f "$(echo "$ok / $of" | bc -l)")}"
	done
done
echo "(hits, overhead: asym kept / asym forgot, this run)"

# A state learned from another workload (kvmm-agentgen's agent trace,
# seed 7) seeding the conversation trace, and the conversation's seeding
# the agent trace: hit blocks against starting fresh.
A=$(mktemp /tmp/kvmm-restart-learned.XXXXXX)
S=$(mktemp /tmp/kvmm-restart-learned-state.XXXXXX)
trap 'rm -f "$A" "$S" "$A.conv" "$A.ag7"' EXIT
"$B/kvmm-agentgen" --seed 7 --duration 1200 >"$A" 2>/dev/null
rm -f "$A.conv" "$A.ag7"
"$B/kvmm-replay" --trace "$T" --policy asym --gpu-blocks 1000 --policy-state "$A.conv" --json >/dev/null
"$B/kvmm-replay" --trace "$A" --policy asym --gpu-blocks 1000 --policy-state "$A.ag7" --json >/dev/null
printf "%-34s %6s %10s %10s %8s\n" "trace, seeded with" blocks fresh seeded ratio
for pair in "$T:ag7" "$A:conv"; do
	tr=${pair%:*} from=${pair##*:}
	for cap in 500 1000 5000; do
		read -r f _ < <(one --policy asym --gpu-blocks "$cap" --trace "$tr")
		cp "$A.$from" "$S"
		read -r s _ < <(one --policy asym --gpu-blocks "$cap" --trace "$tr" --policy-state "$S")
		name=$([ "$tr" = "$T" ] && echo conversation || echo agentgen-7)
		printf "%-34s %6s %10s %10s %8.3f\n" "$name, $from's state" "$cap" "$f" "$s" "$(echo "$s / $f" | bc -l)"
		rows="$rows${rows:+,}{\"trace\":\"$name\",\"seeded_with\":\"$from\",\"gpu_blocks\":$cap,\"fresh\":$f,\"seeded\":$s}"
	done
done
echo "{\"bench\":\"restart-learned\",\"rows\":[$rows]}"
