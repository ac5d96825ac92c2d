#!/bin/bash
# kvmmd's memory and fds over a long run: the conversation trace replayed
# whole through one kvmmd (host backend, GPU + host + NVMe tiers, asym)
# several times, kvmmd's anonymous resident memory (RssAnon) and open fds
# read after each pass.  The baseline is the first pass: a leak shows as a
# ratio above 1 that grows with the passes (Documentation/performance.md).
#   bench/soak.sh            (KVMM_SOAK_PASSES, default 3; KVMM_TRACE)
set -u
cd "$(dirname "$0")/.."
B=${KVMM_BUILD:-build}
T=${KVMM_TRACE:-../shared/traces/mooncake/conversation_trace.jsonl}
passes=${KVMM_SOAK_PASSES:-3}
[ -r "$T" ] || { echo "soak: trace $T absent"; exit 77; }
D=$(mktemp -d /tmp/kvmm-soak.XXXXXX)
nvme=/var/tmp/kvmm-soak-$$
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$D" "$nvme"
}
trap cleanup EXIT INT TERM
# one trace block is one kvmm block of two 4 KiB pages (8 KiB); the tier
# sizes follow kvmm-replay's --daemon rule (policy.md, Replay): 2899 + 1
# NVMe slots, the policy keeping one spare
. bench/lib/nvme-size.sh
"$B/kvmmd" --foreground --backend host --socket "$D/s" --page-size 4K \
	--gpu-mem 64M --telemetry off --log-level warn --cache-policy asym \
	--cache-gpu-blocks 300 --host-mem $((610 * 8192)) \
	--nvme-path "$nvme" --nvme-size "$(kvmm_nvme_size 2900 8192)" 2>"$D/kvmmd.log" &
PID=$!
for _ in $(seq 200); do [ -S "$D/s" ] && break; sleep 0.05; done
[ -S "$D/s" ] || { cat "$D/kvmmd.log"; echo "soak: kvmmd did not start"; exit 1; }
rss() { awk '/^RssAnon:/ { print $2 }' "/proc/$PID/status"; }
fds() { ls "/proc/$PID/fd" | wc -l; }
rss1=0
fds1=0
for p in $(seq "$passes"); do
	t0=$(date +%s%N)
	out=$("$B/kvmm-replay" --trace "$T" --policy asym --gpu-blocks 300 \
		--host-blocks 600 --nvme-blocks 2899 --daemon "$D/s" --json) ||
		{ tail "$D/kvmmd.log"; echo "soak: replay failed"; exit 1; }
	t1=$(date +%s%N)
	hits=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hit_blocks"])')
	r=$(rss)
	f=$(fds)
	[ "$p" = 1 ] && { rss1=$r; fds1=$f; }
	echo "pass $p: $(((t1 - t0) / 1000000)) ms, $hits hit blocks; kvmmd RssAnon $r KiB, $f fds"
done
kill "$PID"; wait "$PID" || { echo "soak: kvmmd exit status $?"; exit 1; }
PID=
python3 - "$passes" "$rss1" "$r" "$fds1" "$f" <<'PY'
import json, sys
p, r1, rn, f1, fn = (int(x) for x in sys.argv[1:])
print(f"RssAnon after pass {p} / after pass 1: {rn / r1:.3f}; fds {fn} / {f1}")
print(json.dumps({"bench": "soak", "passes": p, "rss_anon_kib_first": r1,
                  "rss_anon_kib_last": rn, "rss_ratio": round(rn / r1, 4),
                  "fds_first": f1, "fds_last": fn}))
PY
