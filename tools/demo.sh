#!/bin/bash
# make demo: several tinylm processes generate text on a shared-prompt,
# multi-turn workload with their KV caches in kvmmd (host backend, a GPU
# pool small enough to force eviction, a host tier and an NVMe-tier file),
# and every generated token and logit checksum is compared with a run that
# keeps its KV in private memory.  Ends with a human summary and one JSON
# line.
#
# Environment knobs (defaults in brackets):
#   DEMO_CLIENTS [3]  DEMO_CONVERSATIONS [12]  DEMO_TURNS [4]
#   DEMO_SYSTEM_TOKENS [256]  DEMO_USER_TOKENS [32]  DEMO_GEN_TOKENS [16]
#   DEMO_REPEAT_EVERY [7] every Nth turn asked twice (regenerate; 0: none)
#   DEMO_GPU_MEM [4M with tiers, else 8M]  DEMO_CACHE_GPU_BLOCKS [48]
#   DEMO_MODEL [default model] tinylm model options, e.g. "--dim 128 --layers 2"
#   DEMO_HOST_MEM [1M]  DEMO_NVME_SIZE [64M]  DEMO_PAGE_SIZE [4096]
#   DEMO_POLICY [asym] kvmmd --cache-policy  DEMO_KEEP=1 keeps the temp dir
set -u
cd "$(dirname "$0")/.."
B=${KVMM_BUILD:-build}
case "$B" in /*) ;; *) B=$PWD/$B ;; esac

clients=${DEMO_CLIENTS:-3}
convs=${DEMO_CONVERSATIONS:-12}
turns=${DEMO_TURNS:-4}
sys_tokens=${DEMO_SYSTEM_TOKENS:-256}
user_tokens=${DEMO_USER_TOKENS:-32}
gen_tokens=${DEMO_GEN_TOKENS:-16}
repeat_every=${DEMO_REPEAT_EVERY:-7}
gpu_mem=${DEMO_GPU_MEM:-}
host_mem=${DEMO_HOST_MEM:-1M}
nvme_size=${DEMO_NVME_SIZE:-64M}
page_size=${DEMO_PAGE_SIZE:-4096}
policy=${DEMO_POLICY:-asym}
cache_gpu_blocks=${DEMO_CACHE_GPU_BLOCKS:-48}
# shellcheck disable=SC2206
model=(${DEMO_MODEL:-})

tmp=$(mktemp -d /tmp/kvmm-demo.XXXXXX)
daemon_pid=""
progress_pid=""
cleanup() {
	[ -n "$progress_pid" ] && kill "$progress_pid" 2>/dev/null
	if [ -n "$daemon_pid" ]; then
		kill -TERM "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	[ "${DEMO_KEEP:-0}" = 1 ] && echo "demo files kept in $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

[ -x "$B/tinylm" ] || { echo "demo: $B/tinylm not built (run make)"; exit 1; }

workload=("${model[@]}" --conversations "$convs" --turns "$turns" --system-prompts 2
	--system-tokens "$sys_tokens" --user-tokens "$user_tokens"
	--gen-tokens "$gen_tokens")
# Some turns asked twice (a user's regenerate): tinylm without the option
# has no repeats.
"$B/tinylm" --help 2>&1 | grep -q -- --repeat-every || repeat_every=0
repeats=0
if [ "$repeat_every" -gt 0 ]; then
	workload+=(--repeat-every "$repeat_every")
	repeats=$((convs * turns / repeat_every))
fi
total_tokens=$(((convs * turns + repeats) * gen_tokens))

now() { date +%s.%N; }
elapsed() { awk "BEGIN { printf \"%.2f\", $2 - $1 }"; }

# Show generated-token progress of a set of client outputs every 2 s.
progress() { # label prefix
	while sleep 3; do
		local n
		n=$(cat "$tmp/$2".*.out 2>/dev/null | grep -c '^tok')
		printf '  %-10s %5d / %d tokens\n' "$1" "$n" "$total_tokens"
	done
}

# run_clients LABEL PREFIX tinylm-args... : all clients at once, wait.
run_clients() {
	local label=$1 prefix=$2 pids=() rc=0 i
	shift 2
	progress "$label" "$prefix" &
	progress_pid=$!
	for ((i = 0; i < clients; i++)); do
		"$B/tinylm" "${workload[@]}" --client $i --clients "$clients" "$@" \
			>"$tmp/$prefix.$i.out" 2>"$tmp/$prefix.$i.err" &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		if ! wait "${pids[$i]}"; then
			echo "demo: $label client $i failed:"
			sed 's/^/  | /' "$tmp/$prefix.$i.err" | tail -n 20
			rc=1
		fi
	done
	kill "$progress_pid" 2>/dev/null
	wait "$progress_pid" 2>/dev/null
	progress_pid=""
	return $rc
}

# Sum a JSON counter over the clients' last lines.
sum_json() { # prefix key
	cat "$tmp/$1".*.out | grep '^{' | python3 -c '
import json, sys
key = sys.argv[1]
print(sum(json.loads(l).get(key, 0) for l in sys.stdin))' "$2"
}

echo "kvmm demo: $clients tinylm clients, $convs conversations x $turns turns," \
	"$sys_tokens-token shared system prompts, $gen_tokens tokens per answer," \
	"$repeats turns asked twice"
if [ ${#model[@]} = 0 ]; then
	echo "model: dim 256, hidden 768, 4 layers, 8 q / 2 kv heads, vocab 2048, weights from seed 1"
else
	echo "model: tinylm ${model[*]}"
fi

echo "1. reference: KV in private memory, no reuse"
t0=$(now)
run_clients reference ref --kv private || exit 1
wall_ref=$(elapsed "$t0" "$(now)")
echo "   done in ${wall_ref}s"

have_kvmm=0
if [ -x "$B/kvmmd" ]; then
	"$B/tinylm" --kv kvmm --socket "$tmp/none.sock" --conversations 1 \
		--turns 1 --gen-tokens 1 2>&1 | grep -q 'no kvmm client library' ||
		have_kvmm=1
fi

mismatches=0
wall_kvmm="n/a"
if [ $have_kvmm = 1 ]; then
	sock=$tmp/kvmm.sock
	help=$("$B/kvmmd" --help 2>&1)
	# Without lower tiers there is nowhere to evict to: give the pool room.
	if [ -z "$gpu_mem" ]; then
		gpu_mem=4M
		grep -q -- --host-mem <<<"$help" || gpu_mem=8M
	fi
	echo "2. kvmm: kvmmd on the host backend, GPU pool $gpu_mem of $page_size-byte pages"
	dargs=(--backend host --socket "$sock" --page-size "$page_size"
		--gpu-mem "$gpu_mem" --foreground)
	# Tiers and policies are used when this kvmmd has them.
	if grep -q -- --host-mem <<<"$help"; then
		dargs+=(--host-mem "$host_mem")
		features="host tier"
	else
		features="no host tier in this kvmmd"
	fi
	if grep -q -- --nvme-path <<<"$help"; then
		dargs+=(--nvme-path "$tmp/nvme.slots" --nvme-size "$nvme_size")
		features="$features, NVMe tier"
	else
		features="$features, no NVMe tier"
	fi
	if grep -q -- --cache-gpu-blocks <<<"$help"; then
		dargs+=(--cache-gpu-blocks "$cache_gpu_blocks")
		features="$features, $cache_gpu_blocks cached blocks on the GPU"
	fi
	if grep -q -- --cache-policy <<<"$help"; then
		dargs+=(--cache-policy "$policy")
		features="$features, policy $policy"
	fi
	echo "   kvmmd ${dargs[*]}"
	echo "   ($features)"
	"$B/kvmmd" "${dargs[@]}" >"$tmp/kvmmd.log" 2>&1 &
	daemon_pid=$!
	for _ in $(seq 400); do
		[ -S "$sock" ] && break
		sleep 0.05
	done
	[ -S "$sock" ] || { echo "demo: kvmmd did not start:"; tail "$tmp/kvmmd.log"; exit 1; }
	t0=$(now)
	run_clients kvmm kv --kv kvmm --socket "$sock" || exit 1
	wall_kvmm=$(elapsed "$t0" "$(now)")
	echo "   done in ${wall_kvmm}s"
	# The daemon's block-cache counters, before it stops.
	"$B/tinylm" --kvmm-stats --socket "$sock" >"$tmp/tiers.json" 2>"$tmp/tiers.err" ||
		echo '{}' >"$tmp/tiers.json"
	cat "$tmp"/ref.*.out | grep '^tok' | sort >"$tmp/ref.tok"
	cat "$tmp"/kv.*.out | grep '^tok' | sort >"$tmp/kv.tok"
	mismatches=$(diff "$tmp/ref.tok" "$tmp/kv.tok" | grep -c '^>')
	[ "$(wc -l <"$tmp/kv.tok")" = "$(wc -l <"$tmp/ref.tok")" ] ||
		mismatches=$((mismatches + 1))
else
	echo "2. kvmm: skipped — this build has no kvmmd / kvmm client library yet"
fi

sequences=$(sum_json ref sequences)
generated=$(sum_json ref tokens_generated)
shared=0 restored_host=0 restored_nvme=0 recomputed=0 demoted=0 copied=0
if [ $have_kvmm = 1 ]; then
	skipped=$(sum_json kv prefill_tokens_skipped)
	prompt=$(sum_json kv prompt_tokens)
	tier() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], 0))' "$tmp/tiers.json" "$1"; }
	# Blocks found on the GPU are mapped into the new sequence zero-copy.
	shared=$(tier hits_gpu)
	demoted=$(($(tier demoted_to_host) + $(tier demoted_to_nvme)))
	restored_host=$(tier restored_host)
	restored_nvme=$(tier restored_nvme)
	# Prompts found whole: the last token's block copied, one token
	# recomputed (kvmmd's count, ABI 1.20).
	copied=$(tier blocks_unshared)
	# Patched by recomputation: blocks a client had published that the
	# cache had dropped, blocks it lost to revocations, restore-plan ones.
	recomputed=$(($(sum_json kv evicted_blocks_recomputed) +
		$(sum_json kv revoked_blocks_recomputed) + $(sum_json kv recomputed_blocks)))
else
	skipped=0
	prompt=$(sum_json ref prompt_tokens)
fi
hit_ratio=$(awk "BEGIN { printf \"%.3f\", $prompt ? $skipped / $prompt : 0 }")

echo
echo "summary"
echo "  sequences            $sequences"
echo "  tokens generated     $generated (compared token by token, with logit checksums)"
echo "  mismatches           $mismatches"
echo "  prefix hit ratio     $hit_ratio ($skipped of $prompt prompt tokens not recomputed)"
wk=$wall_kvmm
[ "$wk" = n/a ] || wk=${wk}s
echo "  blocks               $shared shared zero-copy, $demoted demoted," \
	"$restored_host restored from host, $restored_nvme from NVMe, $recomputed recomputed," \
	"$copied copied (whole prompts: one token recomputed)"
echo "  wall time            reference ${wall_ref}s, with kvmm $wk"
if [ "$wall_kvmm" = n/a ]; then
	wall_json=null
else
	wall_json=$wall_kvmm
fi
printf '{"sequences":%d,"tokens_generated":%d,"prefix_hit_ratio":%s,"shared_blocks":%d,"demoted_blocks":%d,"restored_host":%d,"restored_nvme":%d,"recomputed_blocks":%d,"blocks_unshared":%d,"prefill_tokens_skipped":%d,"wall_s_with_kvmm":%s,"wall_s_reference":%s,"mismatches":%d}\n' \
	"$sequences" "$generated" "$hit_ratio" "$shared" "$demoted" \
	"$restored_host" "$restored_nvme" "$recomputed" "$copied" "$skipped" \
	"$wall_json" "$wall_ref" "$mismatches"
[ "$mismatches" = 0 ]
