#!/bin/bash
# The reference figures of issue #8 on the Mooncake conversation trace:
# plain lru at 5000 blocks (hit ratio 0.110) and unlimited (0.366, TTFT
# floor 1.08 s), lru in two tiered configurations (reuse overhead 1459 s
# and 1266 s, TTFT mean 2.16 s and 1.92 s, within 2%), and asym ahead of
# lru and lfu on hit ratio and modelled prefill at every capacity.
# Skips (77) without the trace.   timeout: 100
set -u
# shellcheck source=tests/lib/replay-trace.sh
. "$(dirname "$0")/lib/replay-trace.sh"
run() { "$R" --trace "$T" --json "$@" || fail "kvmm-replay $*"; }

check() { # json python-expression message
	python3 -c "import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if ($2) else 1)" "$1" ||
		fail "$3: $1"
}
near() { echo "abs(j['$1'] - $2) <= $3"; }

j=$(run --policy lru --gpu-blocks 5000)
check "$j" "$(near hit_ratio_blocks 0.110 0.002)" "lru 5000 hit ratio"
j=$(run --policy lru --gpu-blocks unlimited)
check "$j" "$(near hit_ratio_blocks 0.366 0.002)" "lru unlimited hit ratio"
check "$j" "$(near ttft_mean_s 1.08 0.0216)" "unlimited TTFT floor"
check "$j" "j['reuse_overhead_s'] == 0" "unlimited reuse overhead"
j=$(run --policy lru --gpu-blocks 1000 --host-blocks 4000 \
	--profile h200-llama3-8b-ref --prefill-servers 2)
check "$j" "$(near reuse_overhead_s 1459 29.2)" "lru 1000+4000 reuse overhead"
check "$j" "$(near ttft_mean_s 2.16 0.0432)" "lru 1000+4000 TTFT"
j=$(run --policy lru --gpu-blocks 1000 --host-blocks 2000 --nvme-blocks 8000 \
	--profile h200-llama3-8b-ref --prefill-servers 2)
check "$j" "$(near reuse_overhead_s 1266 25.3)" "lru 1000+2000+8000 reuse overhead"
check "$j" "$(near ttft_mean_s 1.92 0.0384)" "lru 1000+2000+8000 TTFT"

sweep=1000,2000,5000,10000,20000
"$R" --trace "$T" --policy lru --sweep $sweep --json >"${TMPDIR:-/tmp}/ref-lru.$$" &&
	"$R" --trace "$T" --policy lfu --sweep $sweep --json >"${TMPDIR:-/tmp}/ref-lfu.$$" &&
	"$R" --trace "$T" --policy asym --sweep $sweep --json >"${TMPDIR:-/tmp}/ref-asym.$$" ||
	fail "sweeps"
python3 - "${TMPDIR:-/tmp}" $$ <<'P' || fail "asym does not beat lru and lfu everywhere"
import json, sys
d, pid = sys.argv[1], sys.argv[2]
load = lambda p: [json.loads(l) for l in open(f"{d}/ref-{p}.{pid}")]
lru, lfu, asym = load("lru"), load("lfu"), load("asym")
ok = True
for a, l, f in zip(asym, lru, lfu):
    cap = a["gpu_blocks"]
    for base in (l, f):
        if not (a["hit_ratio_blocks"] > base["hit_ratio_blocks"] and
                a["modeled_prefill_s"] < base["modeled_prefill_s"]):
            print(f"{cap}: asym {a['hit_ratio_blocks']:.4f} "
                  f"{a['modeled_prefill_s']:.1f} s vs {base['policy']} "
                  f"{base['hit_ratio_blocks']:.4f} "
                  f"{base['modeled_prefill_s']:.1f} s")
            ok = False
sys.exit(0 if ok else 1)
P
rc=$?
rm -f "${TMPDIR:-/tmp}"/ref-*.$$
[ $rc = 0 ] || exit 1
echo "reference figures ok"
