#!/bin/bash
# What a stop's save to NVMe (--nvme-save-on-stop) is worth after a
# restart: the conversation trace's first N requests through a kvmmd with
# GPU, host and NVMe tiers, a stop, a new kvmmd on the same NVMe file, and
# either the N requests that come next (conversations going on across the
# restart) or the same N again; hit blocks of that second part with the
# save (--nvme-save-on-stop 10000) against without it (0, the default),
# both in this run (Documentation/tiers.md, "Saved at a stop").  The
# parts are cut into files under /tmp.
#   bench/restart-save.sh   (KVMM_RESTART_REQUESTS, default 3000;
#                            KVMM_RESTART_NVME_BLOCKS, default 1200;
#                            KVMM_RESTART_POLICY_STATE=1: both kvmmds
#                            also keep --policy-state across the restart)
set -u
cd "$(dirname "$0")/.."
B=${KVMM_BUILD:-build}
T=${KVMM_TRACE:-../shared/traces/mooncake/conversation_trace.jsonl}
N=${KVMM_RESTART_REQUESTS:-3000}
NV=${KVMM_RESTART_NVME_BLOCKS:-1200}
PS=${KVMM_RESTART_POLICY_STATE:-0}
[ -r "$T" ] || { echo "restart-save: trace $T absent"; exit 77; }
D=$(mktemp -d /tmp/kvmm-restart.XXXXXX)
nvme=/var/tmp/kvmm-restart-$$
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$D" "$nvme"
}
trap cleanup EXIT INT TERM
# one trace block is one kvmm block of two 4 KiB pages (8 KiB); tier
# sizes as kvmm-replay's --daemon check wants them (policy.md, Replay):
# NV + 1 NVMe slots, the policy keeping one spare
. bench/lib/nvme-size.sh
nvme_size=$(kvmm_nvme_size $((NV + 1)) 8192)
start() { # save-ms
	"$B/kvmmd" --foreground --backend host --socket "$D/s" --page-size 4K \
		--gpu-mem 64M --telemetry off --log-level warn \
		--cache-policy asym --cache-gpu-blocks 300 \
		--host-mem $((610 * 8192)) --nvme-path "$nvme" \
		--nvme-size "$nvme_size" --nvme-save-on-stop "$1" \
		$([ "$PS" = 1 ] && echo --policy-state "$D/policy.state") \
		2>>"$D/kvmmd.log" &
	PID=$!
	for _ in $(seq 200); do [ -S "$D/s" ] && return 0; sleep 0.05; done
	tail "$D/kvmmd.log"
	echo "restart-save: kvmmd did not start"
	exit 1
}
stop() {
	kill "$PID"
	wait "$PID" || { tail "$D/kvmmd.log"; echo "restart-save: kvmmd exit status $?"; exit 1; }
	PID=
	rm -f "$D/s"
}
head -n "$N" "$T" >"$D/part1.jsonl"
tail -n +$((N + 1)) "$T" | head -n "$N" >"$D/part2.jsonl"
replay() { # trace part; prints hit blocks
	"$B/kvmm-replay" --trace "$1" --policy asym --gpu-blocks 300 \
		--host-blocks 600 --nvme-blocks "$NV" \
		--daemon "$D/s" --json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["hit_blocks"])' ||
		{ tail "$D/kvmmd.log"; echo "restart-save: replay failed"; exit 1; }
}
declare -A second
for part2 in next same; do
	p2=$D/part2.jsonl
	[ "$part2" = same ] && p2=$D/part1.jsonl
	for save in 10000 0; do
		rm -f "$nvme" "$D/policy.state"
		start "$save"
		first=$(replay "$D/part1.jsonl")
		stop
		start "$save"
		second[$part2.$save]=$(replay "$p2")
		stop
		echo "--nvme-save-on-stop $save: requests 1-$N: $first hit blocks; after a restart, the $part2 $N: ${second[$part2.$save]}"
	done
done
python3 - "${second[next.10000]}" "${second[next.0]}" "${second[same.10000]}" \
	"${second[same.0]}" "$N" "$NV" "$PS" <<'PY'
import json, sys
nw, nwo, sw, swo, n, nv = (int(x) for x in sys.argv[1:7])
print(f"hit blocks after a restart, saved / not saved: next requests {nw / nwo:.3f}, same requests {sw / swo:.3f}")
print(json.dumps({"bench": "restart-save", "requests": n, "nvme_blocks": nv,
                  "policy_state": sys.argv[7] == "1",
                  "next_saved": nw, "next_not_saved": nwo,
                  "same_saved": sw, "same_not_saved": swo,
                  "ratio_next": round(nw / nwo, 4),
                  "ratio_same": round(sw / swo, 4)}))
PY
