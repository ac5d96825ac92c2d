#!/bin/bash
# A turn asked again (--repeat-every, a regenerate) samples anew: its
# draws mix in the repeat (1; the first ask is 0, the seeds of a run
# without repeats), so with --temperature 1 every repeat's answer differs
# from the first ask's, while greedy decoding gives the same answer
# twice.  The conversation goes on from the repeat's answer: the next
# turn's first logits are those of the prompt built with it (checked
# against tinylm --prompt of that prompt, and not of the one built with
# the first answer).  Against kvmmd the tokens equal the private-memory
# reference bitwise, each repeat finding its prompt whole and copying
# its last block.
# timeout: 60
set -u
# shellcheck source=tests/lib/tinylm-daemon.sh
. "$(dirname "$0")/lib/tinylm-daemon.sh"

# 4096-byte pages, kv_dim 32 floats: 32 tokens a block; prompts of 64,
# 96 and 128 tokens.  Turns c * 3 + k = 1, 3, 5 are asked twice: conv 0
# turn 1, conv 1 turns 0 and 2.
model=(--dim 64 --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300)
work=("${model[@]}" --conversations 2 --turns 3 --system-prompts 1
	--system-tokens 48 --user-tokens 16 --gen-tokens 16)
"$bin" "${work[@]}" --temperature 1 --repeat-every 2 >"$tmp/sampled" ||
	fail "reference run"
"$bin" "${work[@]}" --temperature 1 >"$tmp/no-repeats" ||
	fail "run without repeats"
"$bin" "${work[@]}" --repeat-every 2 >"$tmp/greedy" || fail "greedy run"
"$bin" "${work[@]}" --print-workload >"$tmp/workload" ||
	fail "--print-workload"

# The prompt of conv 0 turn 2 (system, then each turn's user tokens and
# answer) with turn 1's answer the first ask's (first) or the repeat's
# (repeat): token ids on one line.
python3 - "$tmp" <<'EOF' || fail "the repeats' answers"
import collections, sys
tmp = sys.argv[1]

def turns(name):
    """(conv, turn) -> the token ids of each ask, in order"""
    asks = collections.defaultdict(list)
    for line in open("%s/%s" % (tmp, name)):
        f = line.split()
        if f[0] != "tok":
            continue
        key, g = (int(f[1]), int(f[2])), int(f[3])
        if g == 0:
            asks[key].append([])
        asks[key][-1].append(int(f[4]))
    return asks

sampled, plain, greedy = turns("sampled"), turns("no-repeats"), turns("greedy")
repeated = [k for k, v in sampled.items() if len(v) == 2]
assert sorted(repeated) == [(0, 1), (1, 0), (1, 2)], sorted(repeated)
assert all(len(v) == 1 for k, v in sampled.items() if k not in repeated)
for k in repeated:
    first, again = sampled[k]
    assert first != again, "%s: the repeat sampled the same answer %s" % (k, first)
    g1, g2 = greedy[k]
    assert g1 == g2, "%s: greedy gave %s, then %s" % (k, g1, g2)
# before any repeat of its conversation a turn is the run's without
# repeats: the first ask keeps its seeds
for k in [(0, 0), (0, 1), (1, 0)]:
    assert sampled[k][0] == plain[k][0], (k, sampled[k][0], plain[k][0])
# after one the conversation differs: it goes on from another answer
assert sampled[(0, 2)][0] != plain[(0, 2)][0]
print("repeats sampled anew:", ", ".join("conv %d turn %d" % k for k in repeated))

words = {}
for line in open(tmp + "/workload"):
    head, ids = line.split(":")
    f = head.split()
    ids = ids.split("then")[0].split()
    if f[2] == "system":
        words[("system", int(f[1]))] = ids
    else:
        words[("user", int(f[1]), int(f[3]))] = ids
for which, answer in (("first", 0), ("repeat", 1)):
    p = (words[("system", 0)] + words[("user", 0, 0)] +
         [str(t) for t in sampled[(0, 0)][0]] + words[("user", 0, 1)] +
         [str(t) for t in sampled[(0, 1)][answer]] + words[("user", 0, 2)])
    open("%s/prompt-%s" % (tmp, which), "w").write(" ".join(p))
EOF

# the first logits of conv 0 turn 2 (its tok line's checksum)
sum_of() { awk '$1 == "tok" { print $6; exit }' "$1"; }
turn2=$(awk '$1 == "tok" && $2 == 0 && $3 == 2 && $4 == 0 { print $6 }' "$tmp/sampled")
for which in first repeat; do
	"$bin" "${model[@]}" --gen-tokens 1 --prompt "$(cat "$tmp/prompt-$which")" \
		>"$tmp/from-$which" || fail "tinylm --prompt ($which answer)"
done
[ -n "$turn2" ] && [ "$(sum_of "$tmp/from-repeat")" = "$turn2" ] ||
	fail "conv 0 turn 2 does not go on from the repeat's answer: logits $turn2, from it $(sum_of "$tmp/from-repeat")"
[ "$(sum_of "$tmp/from-first")" != "$turn2" ] ||
	fail "conv 0 turn 2's logits are those after the first answer too"

# against kvmmd: bitwise the reference, each repeat's prompt found whole
grep '^tok' "$tmp/sampled" | sort >"$tmp/ref"
sock=$tmp/kvmm.sock
start_daemon "$sock" --page-size 4096 --gpu-mem 4M
"$bin" "${work[@]}" --temperature 1 --repeat-every 2 --kv kvmm \
	--socket "$sock" >"$tmp/kv-kvmm" 2>"$tmp/err" ||
	fail "tinylm on kvmmd: $(tail -n 5 "$tmp/err")"
stop_daemon
check_output kvmm
python3 -c '
import json, sys
j = json.loads(open(sys.argv[1]).read())
assert j["sequences"] == 9, j
assert j["blocks_unshared"] == 3, j
' "$tmp/json-kvmm" || fail "counters: $(cat "$tmp/json-kvmm")"
echo "ok: each repeat sampled anew, the conversation went on from it, bitwise the reference on kvmmd"
