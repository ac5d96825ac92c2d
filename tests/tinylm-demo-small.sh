#!/bin/bash
# A small make demo: three tinylm clients (a small model) on a real kvmmd
# with a tiny GPU pool, a host tier and an NVMe-tier file.  Every generated
# token and logit checksum must equal the private-memory reference, while
# blocks were shared on the GPU, demoted, restored from host and from NVMe,
# and recomputed after eviction; and that every 7th turn, asked twice,
# found its whole prompt cached (prompts end on 32-token blocks) and
# recomputed its last token in a copy of its block (ABI 1.20).
# timeout: 120
set -u
B=${KVMM_BUILD:-build}
for p in "$B/tinylm" "$B/kvmmd"; do
	[ -x "$p" ] || { echo "skip: $p not built"; exit 77; }
done
if "$B/tinylm" --kv kvmm --socket /nonexistent --prompt 1 2>&1 | grep -q 'no kvmm client library'; then
	echo "skip: tinylm was built without the kvmm client library"
	exit 77
fi
"$B/kvmmd" --help 2>&1 | grep -q -- --nvme-path || { echo "skip: kvmmd has no NVMe tier"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# The NVMe tier is small enough to drop blocks (256K: 10-15 recomputed
# here): since kvmmd copies a block its sequence holds down instead of
# uncaching it, 4M kept every reusable block and nothing was recomputed.
DEMO_MODEL="--dim 64 --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300" \
	DEMO_CONVERSATIONS=12 DEMO_TURNS=4 DEMO_SYSTEM_TOKENS=48 \
	DEMO_REPEAT_EVERY=7 DEMO_USER_TOKENS=16 DEMO_GEN_TOKENS=16 DEMO_GPU_MEM=512K \
	DEMO_CACHE_GPU_BLOCKS=8 DEMO_HOST_MEM=192K DEMO_NVME_SIZE=256K \
	KVMM_BUILD=$B "${KVMM_SRC:-.}/tools/demo.sh" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 0 ] || { echo "FAIL: demo exited $rc"; exit 1; }
tail -n 1 "$out" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
assert d["mismatches"] == 0, d
assert d["tokens_generated"] == (12 * 4 + 6) * 16, d
for k in ("shared_blocks", "demoted_blocks", "restored_host", "restored_nvme",
          "recomputed_blocks", "prefill_tokens_skipped", "blocks_unshared"):
    assert d[k] > 0, (k, d)
print("ok: bitwise identical with", d["shared_blocks"], "shared,",
      d["restored_host"], "host and", d["restored_nvme"], "NVMe restores,",
      d["recomputed_blocks"], "recomputed blocks,", d["blocks_unshared"],
      "copied")' || exit 1
