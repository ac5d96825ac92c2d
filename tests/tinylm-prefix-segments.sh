#!/bin/bash
# tinylm --prefix-segments through a real kvmmd whose cache has holes
# (--cache-policy lru and a GPU tier of 10 blocks, or of 6 with a host tier
# of 6 blocks: lru evicts the leading blocks of the system prompts, which
# were admitted first, and keeps later ones).  Without the option a prefix
# stops at the first block the cache lost; with it (KVMM_PREFIX_OPEN_SEGMENTS)
# tinylm recomputes the holes at their original positions and reuses the
# cached blocks after them, shared from the GPU or reloaded from host
# memory.  Every run's tokens and logit checksums equal the private-memory
# reference bitwise; with the option more prompt blocks are reused and
# fewer tokens computed.
# timeout: 180
set -u
# shellcheck source=tests/lib/tinylm-daemon.sh
. "$(dirname "$0")/lib/tinylm-daemon.sh"

"$bin" --prefix-segments --prompt 1 >/dev/null 2>"$tmp/err" &&
	fail "--prefix-segments accepted with --kv private"
grep -q "needs --kv kvmm" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"

work=(--dim 64 --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300
	--conversations 8 --turns 4 --system-prompts 2 --system-tokens 128
	--user-tokens 16 --gen-tokens 8)
"$bin" "${work[@]}" | grep '^tok' | sort >"$tmp/ref" || fail "reference run"
[ -s "$tmp/ref" ] || fail "empty reference"

# run NAME TINYLM-OPTION KVMMD-ARGS...: one client on a fresh daemon; its
# stats line into $tmp/json-NAME
run() {
	local name=$1 opt=$2 sock=$tmp/kvmm-$1.sock
	shift 2
	start_daemon "$sock" --page-size 4096 --gpu-mem 1M \
		--cache-policy lru "$@"
	# shellcheck disable=SC2086 # opt: empty or one word
	"$bin" "${work[@]}" --kv kvmm --socket "$sock" $opt >"$tmp/kv-$name" \
		2>"$tmp/err-$name" ||
		fail "$name: tinylm: $(tail -n 5 "$tmp/err-$name")"
	kill -0 "$daemon" || fail "$name: kvmmd died"
	stop_daemon
	check_output "$name"
}

# compare BEFORE AFTER python-assertions (b: without, a: with the option)
compare() {
	python3 -c '
import json, sys
b = json.loads(open(sys.argv[1]).read())
a = json.loads(open(sys.argv[2]).read())
def reused(d):
    return d["shared_blocks"] + d["restored_host"] + d["restored_nvme"]
def computed(d):
    return d["prefill_tokens"] + d["recomputed_tokens"]
for n, d in (("without", b), ("with", a)):
    print("%s: %s --prefix-segments: reused %d (shared %d, host %d), recomputed %d, reused after a hole %d, tokens computed %d"
          % (sys.argv[4], n, reused(d), d["shared_blocks"], d["restored_host"],
             d["recomputed_blocks"], d["reused_after_hole"], computed(d)))
assert b["reused_after_hole"] == 0, b
assert a["reused_after_hole"] > 0, a
assert reused(a) > reused(b), (a, b)
assert computed(a) < computed(b), (a, b)
exec(sys.argv[3])' "$tmp/json-$1" "$tmp/json-$2" "$3" "$1" ||
		fail "$1: counters: $(cat "$tmp/json-$1" "$tmp/json-$2")"
}

run gpu "" --cache-gpu-blocks 10
run gpu-seg --prefix-segments --cache-gpu-blocks 10
compare gpu gpu-seg 'assert a["restored_host"] == 0'

run host "" --cache-gpu-blocks 6 --host-mem 48K
run host-seg --prefix-segments --cache-gpu-blocks 6 --host-mem 48K
compare host host-seg 'assert a["restored_host"] > 0, a'
echo "ok: --prefix-segments reuses blocks after holes, bitwise identical"
