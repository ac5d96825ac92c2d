#!/bin/bash
# Sweep every policy across GPU capacities on the Mooncake conversation
# trace and draw hit ratio and modelled prefill time against capacity
# (PNG, gnuplot).  Also prints the share of the lru -> belady gap that
# asym closes, and the tiered configurations of issue #8.  Ends with one
# JSON line (asym against the lru baseline measured in the same run).
#   bench/policy-sweep.sh [OUTDIR]        (default: $KVMM_BUILD/policy-sweep)
# Env: KVMM_TRACE (trace path), SWEEP (capacities, comma separated).
set -eu
cd "$(dirname "$0")/.."
B=${KVMM_BUILD:-build}
R=$B/kvmm-replay
T=${KVMM_TRACE:-../shared/traces/mooncake/conversation_trace.jsonl}
OUT=${1:-$B/policy-sweep}
SWEEP=${SWEEP:-500,1000,2000,5000,10000,20000,50000}
[ -x "$R" ] || { echo "policy-sweep: build $R first (make)" >&2; exit 1; }
# 77, as the other replays (restart-*.sh, soak.sh) say a trace is absent:
# bench/run.sh passes a skip, where this failed `make bench`
[ -r "$T" ] || { echo "policy-sweep: trace $T not found (set KVMM_TRACE)" >&2; exit 77; }
mkdir -p "$OUT"
for p in lru lfu arc belady asym; do
	echo "policy-sweep: $p" >&2
	"$R" --trace "$T" --policy $p --sweep "$SWEEP" --json >"$OUT/$p.jsonl"
done
for p in lru asym belady; do
	for cfg in "1000 4000 0" "1000 2000 8000"; do
		set -- $cfg
		"$R" --trace "$T" --policy $p --gpu-blocks $1 --host-blocks $2 \
			--nvme-blocks $3 --profile h200-llama3-8b-ref \
			--prefill-servers 2 --json
	done
done >"$OUT/tiers.jsonl"

python3 - "$OUT" <<'P'
import json, sys
out = sys.argv[1]
pol = ["lru", "lfu", "arc", "belady", "asym"]
d = {p: [json.loads(l) for l in open(f"{out}/{p}.jsonl")] for p in pol}
with open(f"{out}/sweep.dat", "w") as f:
    f.write("# gpu_blocks " + " ".join(f"{p}_hit {p}_prefill" for p in pol) + "\n")
    for i, r in enumerate(d["lru"]):
        f.write(f"{r['gpu_blocks']} " + " ".join(
            f"{d[p][i]['hit_ratio_blocks']:.6f} {d[p][i]['modeled_prefill_s']:.3f}"
            for p in pol) + "\n")
print(f"{'gpu':>7} " + " ".join(f"{p:>8}" for p in pol) + "  gap_closed   (block hit ratio)")
for i, r in enumerate(d["lru"]):
    h = {p: d[p][i]["hit_ratio_blocks"] for p in pol}
    gap = h["belady"] - h["lru"]
    share = (h["asym"] - h["lru"]) / gap if gap > 1e-9 else float("nan")
    print(f"{r['gpu_blocks']:>7} " + " ".join(f"{h[p]:8.4f}" for p in pol) + f"  {share:9.1%}")
print(f"{'gpu':>7} " + " ".join(f"{p:>8}" for p in pol) + "  gap_closed   (modelled prefill, s)")
for i, r in enumerate(d["lru"]):
    t = {p: d[p][i]["modeled_prefill_s"] for p in pol}
    gap = t["lru"] - t["belady"]
    share = (t["lru"] - t["asym"]) / gap if gap > 1e-9 else float("nan")
    print(f"{r['gpu_blocks']:>7} " + " ".join(f"{t[p]:8.1f}" for p in pol) + f"  {share:9.1%}")
print("tiers (reference profile, 2 prefill servers):")
tiers = [json.loads(l) for l in open(f"{out}/tiers.jsonl")]
for t in tiers:
    print(f"  {t['policy']:>6} gpu {t['gpu_blocks']} host {t['host_blocks']} "
          f"nvme {t['nvme_blocks']}: hit {t['hit_ratio_blocks']:.4f} "
          f"reuse_overhead {t['reuse_overhead_s']:.1f} s "
          f"ttft mean {t['ttft_mean_s']:.3f} s p99 {t['ttft_p99_s']:.3f} s")
a = {r["gpu_blocks"]: r for r in d["asym"]}
l = {r["gpu_blocks"]: r for r in d["lru"]}
res = {"bench": "policy-sweep", "baseline": "lru"}
for cap in l:
    res[f"asym_vs_lru_hit_{cap}"] = round(a[cap]["hit_ratio_blocks"] / l[cap]["hit_ratio_blocks"], 4)
    res[f"asym_vs_lru_prefill_{cap}"] = round(a[cap]["modeled_prefill_s"] / l[cap]["modeled_prefill_s"], 4)
with open(f"{out}/result.json", "w") as f:
    f.write(json.dumps(res) + "\n")
P

if command -v gnuplot >/dev/null; then
	term=png
	gnuplot -e 'set terminal pngcairo' 2>/dev/null && term=pngcairo
	gnuplot <<G
set terminal $term size 900,560
set datafile commentschars "#"
set logscale x
set grid
set key left top
set xlabel "GPU capacity (512-token blocks)"
set output "$OUT/policy-hit-ratio.png"
set title "Block hit ratio, Mooncake conversation trace (12,031 requests)"
set ylabel "block hit ratio"
colors = "#7b3294 #1b9e77 #2c7bb6 #777777 #d7191c"
plot for [i=0:4] "$OUT/sweep.dat" using 1:(column(2+2*i)) with linespoints \
	lc rgb word(colors, i+1) lw (i == 4 ? 3 : 1.5) \
	title word("lru lfu arc belady asym", i+1)
set output "$OUT/policy-prefill.png"
set key right top
set title "Modelled prefill time (H200 + Llama-3-8B reference profile)"
set ylabel "modelled prefill, s (sum over requests)"
plot for [i=0:4] "$OUT/sweep.dat" using 1:(column(3+2*i)) with linespoints \
	lc rgb word(colors, i+1) lw (i == 4 ? 3 : 1.5) \
	title word("lru lfu arc belady asym", i+1)
G
	[ -s "$OUT/policy-hit-ratio.png" ] && [ -s "$OUT/policy-prefill.png" ] ||
		{ echo "policy-sweep: gnuplot failed" >&2; exit 1; }
	echo "policy-sweep: plots in $OUT/policy-hit-ratio.png and $OUT/policy-prefill.png" >&2
else
	echo "policy-sweep: gnuplot missing (make deps): no plots" >&2
fi
# the JSON line last, after the plots' line (stderr), as every benchmark
# ends: it was printed before them
cat "$OUT/result.json"
