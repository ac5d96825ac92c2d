#!/bin/sh
# The first publish that uses the block cache against a later one, with
# a host tier (and an NVMe tier): kvmmd makes the host slab at start, so
# the first publish should cost about what a later one does plus the
# opening of the tiers that needs the block size (cutting slots, the NVMe
# file).  Prints kvmmd's start time (until its socket exists), both
# publish times and their ratio (Documentation/tiers.md, "The host slab
# at start").
#   bench/first-publish.sh [KVMMD OPTIONS...]
#   (default: --host-mem 1G --nvme-path /var/tmp/kvmm-first-publish-PID
#    --nvme-size 1G)
set -eu
cd "$(dirname "$0")/.."
build=${KVMM_BUILD:-build}
dir=$(mktemp -d /tmp/kvmm-first-publish-XXXXXX)
nvme=/var/tmp/kvmm-first-publish-$$
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$dir" "$nvme"
}
trap cleanup EXIT INT TERM
if [ $# = 0 ]; then
	set -- --host-mem 1G --nvme-path "$nvme" --nvme-size 1G
fi
if ! command -v python3 >/dev/null; then
	echo "first-publish: needs python3 (make deps)"
	exit 77
fi
t0=$(date +%s%N)
"$build/kvmmd" --backend host --socket "$dir/k.sock" --telemetry off \
	--foreground "$@" 2>"$dir/kvmmd.log" &
pid=$!
while [ ! -S "$dir/k.sock" ]; do
	if ! kill -0 "$pid" 2>/dev/null; then
		cat "$dir/kvmmd.log"
		echo "first-publish: kvmmd did not start"
		exit 1
	fi
	sleep 0.01
done
t1=$(date +%s%N)
start_ms=$(((t1 - t0) / 1000000))
echo "kvmmd $*: socket after $start_ms ms"
KVMM_LIB=$build/libkvmm.so.1 PYTHONPATH=kvmm/python python3 - "$dir/k.sock" \
	"$start_ms" <<'EOF'
import json, sys, time
import kvmm

with kvmm.Connection(sys.argv[1], "first-publish") as conn, \
        conn.region(layers=2, kv_heads=2, head_dim=64, dtype_bytes=2,
                    max_seqs=4, max_tokens=2048, salt=7) as region:
    tpb = region.tokens_per_block
    seed = region.hash_seed("first-publish")
    ms = []
    for i in range(2):
        tokens = list(range(1000 * (i + 1), 1000 * (i + 1) + tpb))
        chain = kvmm.hash_chain(seed, tokens, tpb)
        with region.open_seq() as seq:
            seq.extend(len(tokens))
            t = time.monotonic()
            assert seq.publish(0, chain) == 1
            ms.append((time.monotonic() - t) * 1e3)
    print("first publish %.2f ms, second %.2f ms: ratio %.1f"
          % (ms[0], ms[1], ms[0] / ms[1]))
    print(json.dumps({"bench": "first-publish", "start_ms": int(sys.argv[2]),
                      "first_ms": round(ms[0], 3), "second_ms": round(ms[1], 3),
                      "ratio": round(ms[0] / ms[1], 2)}))
EOF
