#!/bin/bash
# kvmm-replay --msa (Multi-Segment Attention) on tiny hand-made traces:
# a gap in the middle of a chain does not end the hits (later cached
# blocks count), the segments are counted and msa(k) is applied to the
# attention part of the recomputed blocks only, hit tokens and reuse
# overhead follow, and the same traces without --msa keep the reference
# (prefix) figures.  --msa --model-daemon runs; --msa --daemon without a
# daemon fails with the reason.
set -u
B=${KVMM_BUILD:-build}
R=$B/kvmm-replay
[ -x "$R" ] || { echo "skip: $R not built"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# lru, 4 GPU blocks (LRU order, oldest first, after each request):
# r1 [1 2 3]:   no hits; {1 2 3}.
# r2 [1 4 5]:   1 hits; 5 evicts 2: {3 1 4 5}.
# r3 [1 2 3 6]: at arrival 1 and 3 are on the GPU, 2 and 6 in no tier.
#               MSA: hits 1 and 3 (2 blocks; the leading run is 1
#               block), recomputes indexes 1 and 3; the served blocks
#               are 2 runs, [0] and [2], so k = 2 and the attention of
#               the recomputed blocks is x msa(2) = 1.05.  Without MSA:
#               1 hit, indexes 1, 2, 3 recomputed.  Then 2 evicts 3,
#               3 evicts 4, 6 evicts 5: {1 2 3 6}.
# r4 [7 3]:     700 tokens, 3 (index 1, partial: 188 tokens) on the GPU.
#               MSA: 3 hits, index 0 recomputed, one served run: k = 1,
#               msa(1) = 1.  Without MSA no hit (7 is missing).
# MSA: hit blocks 1 + 2 + 1 = 4 of 12, leading 1 + 1 + 0 = 2, tokens
# 512 + 1024 + 188; without: 2 hit blocks, 1024 tokens.
cat >"$tmp/gap.jsonl" <<'T'
{"timestamp": 0, "input_length": 1536, "output_length": 10, "hash_ids": [1, 2, 3]}
{"timestamp": 1000, "input_length": 1536, "output_length": 10, "hash_ids": [1, 4, 5]}
{"timestamp": 2000, "input_length": 2000, "output_length": 10, "hash_ids": [1, 2, 3, 6]}
{"timestamp": 3000, "input_length": 700, "output_length": 10, "hash_ids": [7, 3]}
T
msa=$("$R" --trace "$tmp/gap.jsonl" --policy lru --gpu-blocks 4 --msa \
	--per-request "$tmp/msa.req" --json) || fail "msa replay failed"
ref=$("$R" --trace "$tmp/gap.jsonl" --policy lru --gpu-blocks 4 --json) ||
	fail "reference replay failed"
python3 - "$msa" "$ref" "$tmp/msa.req" <<'P' || fail "bad MSA figures: $msa / $ref"
import json, sys
m, r = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rate = 0.6 * 989e12
lin = 512 * 13.96e9 / rate                       # linear part of a block
attn = lambda i: 524288 * 512 * (512 * i + 256.5) / rate
rc = lambda i: lin + attn(i)                     # recompute(i)
msa2 = 1 + 0.05 * (2 - 1)                        # msa(k) = 1 + alpha (k-1)
near = lambda a, b: abs(a - b) < 1e-6  # %.6f in the JSON

assert m["msa"] is True and r["msa"] is False, (m, r)
assert m["blocks"] == 12 and m["hit_blocks"] == 4, m
assert m["leading_hit_blocks"] == 2 and m["hits"]["gpu"] == 4, m
assert m["recomputed_blocks"] == 8, m
assert m["hit_tokens"] == 512 + 1024 + 188, m
assert r["hit_blocks"] == 2 and r["leading_hit_blocks"] == 2, r
assert r["hit_tokens"] == 1024 and r["recomputed_blocks"] == 10, r
nocache = 2 * (rc(0) + rc(1) + rc(2)) + (rc(0) + rc(1) + rc(2) + rc(3)) \
    + rc(0) + rc(1)
assert near(m["modeled_prefill_s_nocache"], nocache), m
assert near(r["modeled_prefill_s_nocache"], nocache), r
p_msa = [rc(0) + rc(1) + rc(2), rc(1) + rc(2),
         2 * lin + msa2 * (attn(1) + attn(3)), rc(0)]
p_ref = [rc(0) + rc(1) + rc(2), rc(1) + rc(2),
         rc(1) + rc(2) + rc(3), rc(0) + rc(1)]
assert near(m["modeled_prefill_s"], sum(p_msa)), (m, sum(p_msa))
assert near(r["modeled_prefill_s"], sum(p_ref)), (r, sum(p_ref))
# seen before and not free: r3's 2 (recomputed at index 1, x 1.05);
# without MSA also r3's 3 (index 2) and r4's 3 (index 1)
assert near(m["reuse_overhead_s"], lin + msa2 * attn(1)), m
assert near(r["reuse_overhead_s"], rc(1) + rc(2) + rc(1)), r
# arrivals 1 s apart, prefills < 0.1 s: no queueing, ttft = prefill
assert near(m["ttft_mean_s"], sum(p_msa) / 4), m
assert near(m["ttft_p99_s"], max(p_msa)), m
# --per-request counts every served block
lines = [l.split() for l in open(sys.argv[3])]
assert [l[1] for l in lines] == ["0", "1", "2", "1"], lines
P

# Tiers, lru, gpu 2 + host 2.  r1 [1 2 3]: gpu {2 3}, host {1}.
# r2 [4]: gpu {3 4}, host {1 2}.  r3 [5]: 3 goes down, host drops 1:
# gpu {4 5}, host {2 3}.  r4 [1 2 3]: 1 in no tier, 2 and 3 in host.
# MSA: 2 host hits (one run, k = 1), recompute index 0, reload two;
# without MSA nothing hits.  (Hits are judged at arrival; r4's three
# admissions then drop 2, 3 and 4 from the host tier: 4 drops in all.)
cat >"$tmp/tier.jsonl" <<'T'
{"timestamp": 0, "input_length": 1536, "output_length": 10, "hash_ids": [1, 2, 3]}
{"timestamp": 1000, "input_length": 512, "output_length": 10, "hash_ids": [4]}
{"timestamp": 2000, "input_length": 512, "output_length": 10, "hash_ids": [5]}
{"timestamp": 3000, "input_length": 1536, "output_length": 10, "hash_ids": [1, 2, 3]}
T
msa=$("$R" --trace "$tmp/tier.jsonl" --policy lru --gpu-blocks 2 \
	--host-blocks 2 --msa --json) || fail "msa tier replay failed"
ref=$("$R" --trace "$tmp/tier.jsonl" --policy lru --gpu-blocks 2 \
	--host-blocks 2 --json) || fail "tier replay failed"
python3 - "$msa" "$ref" <<'P' || fail "bad MSA tier figures: $msa / $ref"
import json, sys
m, r = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rate = 0.6 * 989e12
rc = lambda i: (512 * 13.96e9 + 524288 * 512 * (512 * i + 256.5)) / rate
host = 64 * 2**20 / 55e9 + 10e-6
near = lambda a, b: abs(a - b) < 1e-6  # %.6f in the JSON
assert m["hit_blocks"] == 2 and m["hits"]["host"] == 2, m
assert m["leading_hit_blocks"] == 0 and m["drops"] == r["drops"] == 4, m
assert r["hit_blocks"] == 0, r
first = rc(0) + rc(1) + rc(2)
assert near(m["modeled_prefill_s"], first + 2 * rc(0) + rc(0) + 2 * host), m
assert near(r["modeled_prefill_s"], first + 2 * rc(0) + first), r
assert near(m["reuse_overhead_s"], rc(0) + 2 * host), m
P

# Every policy runs with --msa; the prefix rule can still be asked for.
for p in lru lfu arc belady asym; do
	"$R" --trace "$tmp/gap.jsonl" --policy $p --gpu-blocks 2 --msa --json \
		>/dev/null || fail "$p --msa failed"
	"$R" --trace "$tmp/gap.jsonl" --policy $p --gpu-blocks 2 --msa \
		--prefix-rule on --json >/dev/null || fail "$p --msa --prefix-rule on failed"
done

# --msa with --model-daemon runs (kvmmd's segmented opens; compared with
# a real kvmmd in tests/replay-daemon-msa.sh); with --daemon it needs a
# daemon: without one it fails (exit 1) saying so.
out=$("$R" --trace "$tmp/gap.jsonl" --policy lru --gpu-blocks 4 --msa \
	--model-daemon --json) || fail "--msa --model-daemon failed"
echo "$out" | grep -q '"msa":true' || fail "--msa --model-daemon: $out"
"$R" --trace "$tmp/gap.jsonl" --policy lru --gpu-blocks 4 --msa \
	--daemon "$tmp/none.sock" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || fail "--msa --daemon without a daemon exited $rc, expected 1"
grep -q "cannot reach kvmmd" "$tmp/err" || fail "no reason: $(cat "$tmp/err")"
echo "replay --msa ok"
