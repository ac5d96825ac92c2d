#!/bin/bash
# A prompt asked again whose blocks are all cached (every turn asked
# twice, each prompt ending on a 32-token block): tinylm truncates the
# sequence by one token and the prefill's extend copies the last block
# (copy-on-write, ABI 1.20), so each repeat computes one token, not the
# block.  Against kvmmd: 4 repeats, 4 blocks copied (tinylm's count and
# kvmmd's), 124 fewer prompt tokens computed (4 x 31) than against a kvmmd
# that says 1.19 (KVMMD_TEST_ABI_MINOR=19), where tinylm does not ask for
# the last block and copies nothing; the tokens equal the private-memory
# reference bitwise in both.
# timeout: 60
set -u
# shellcheck source=tests/lib/tinylm-daemon.sh
. "$(dirname "$0")/lib/tinylm-daemon.sh"

# 4096-byte pages, kv_dim 32 floats: 32 tokens a block; prompts of 64 and
# 96 tokens (48 system + 16 user, + 16 answer + 16 user)
work=(--dim 64 --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300
	--conversations 2 --turns 2 --system-prompts 1 --system-tokens 48
	--user-tokens 16 --gen-tokens 16 --repeat-every 1)
"$bin" "${work[@]}" | grep '^tok' | sort >"$tmp/ref" || fail "reference run"
[ "$(wc -l <"$tmp/ref")" = 128 ] || fail "reference: $(wc -l <"$tmp/ref") tokens, expected 8 turns x 16"

# run NAME [MINOR]: one client on a fresh daemon (that plays 1.MINOR when
# given: KVMMD_TEST_ABI_MINOR)
run() {
	local name=$1 sock=$tmp/kvmm-$1.sock
	if [ -n "${2:-}" ]; then
		KVMMD_TEST_ABI_MINOR=$2 start_daemon "$sock" --page-size 4096 --gpu-mem 4M
	else
		start_daemon "$sock" --page-size 4096 --gpu-mem 4M
	fi
	"$bin" "${work[@]}" --kv kvmm --socket "$sock" >"$tmp/kv-$name" 2>"$tmp/err-$name" ||
		fail "$name: tinylm: $(tail -n 5 "$tmp/err-$name")"
	"$bin" --kvmm-stats --socket "$sock" >"$tmp/tiers-$name" ||
		fail "$name: tinylm --kvmm-stats"
	stop_daemon
	check_output "$name"
}

run copy
run old 19
python3 -c '
import json, sys
new, old, tiers, tiers_old = (json.loads(open(f).read()) for f in sys.argv[1:])
print("prefill tokens computed: %d with the copies, %d against 1.19; "
      "blocks copied: %d (tinylm), %d (kvmmd)" % (new["prefill_tokens"],
      old["prefill_tokens"], new["blocks_unshared"], tiers["blocks_unshared"]))
assert new["sequences"] == old["sequences"] == 8, (new, old)
assert new["blocks_unshared"] == 4, new
assert tiers["blocks_unshared"] == 4, tiers
assert old["blocks_unshared"] == 0, old
assert "blocks_unshared" not in tiers_old, tiers_old
assert old["prefill_tokens"] - new["prefill_tokens"] == 4 * 31, (new, old)
assert new["prefix_blocks"] - old["prefix_blocks"] == 4, (new, old)
' "$tmp/json-copy" "$tmp/json-old" "$tmp/tiers-copy" "$tmp/tiers-old" ||
	fail "counters: $(cat "$tmp/json-copy" "$tmp/json-old")"
echo "ok: each repeat copied its last block and computed one token"
