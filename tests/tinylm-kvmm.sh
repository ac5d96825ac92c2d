#!/bin/bash
# tinylm with its KV cache in a real kvmmd (host backend, small pages so a
# sequence spans many blocks) produces bitwise the tokens and logit
# checksums of the private-memory reference, with two client processes
# running at once and one prompt-only run; the daemon stays up throughout.
# timeout: 120
set -u
# shellcheck source=tests/lib/tinylm-daemon.sh
. "$(dirname "$0")/lib/tinylm-daemon.sh"

sock=$tmp/kvmm.sock
start_daemon "$sock" --page-size 4K --gpu-mem 16M

small=(--dim 64 --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300
	--conversations 4 --turns 3 --system-tokens 70 --user-tokens 13
	--gen-tokens 7 --chunk 16)
"$bin" "${small[@]}" | grep '^tok' | sort >"$tmp/ref" || fail "reference run"
[ "$(wc -l <"$tmp/ref")" = 84 ] || fail "reference: $(wc -l <"$tmp/ref") tokens, expected 84"

for i in 0 1; do
	"$bin" "${small[@]}" --kv kvmm --socket "$sock" --client $i --clients 2 \
		>"$tmp/kv$i" 2>"$tmp/err$i" &
	eval "pid$i=\$!"
done
# shellcheck disable=SC2154
wait "$pid0" || fail "client 0: $(cat "$tmp/err0")"
# shellcheck disable=SC2154
wait "$pid1" || fail "client 1: $(cat "$tmp/err1")"
grep -q '"kv":"kvmm"' "$tmp/kv0" || fail "client 0 did not use kvmm"
cat "$tmp/kv0" "$tmp/kv1" | grep '^tok' | sort >"$tmp/kv"
diff -q "$tmp/ref" "$tmp/kv" >/dev/null || {
	diff "$tmp/ref" "$tmp/kv" | head
	fail "kvmm run differs from the private-memory reference"
}

# A single prompt, default model, through the same daemon.
p="5 17 99 3 250 8 1 1 42"
"$bin" --prompt "$p" --gen-tokens 12 | grep '^tok' >"$tmp/p-ref"
"$bin" --prompt "$p" --gen-tokens 12 --kv kvmm --socket "$sock" | grep '^tok' >"$tmp/p-kv" ||
	fail "prompt run on kvmm"
cmp -s "$tmp/p-ref" "$tmp/p-kv" || fail "prompt run differs"

# A bad socket is a clear error, not a fallback to private memory.
"$bin" "${small[@]}" --kv kvmm --socket "$tmp/nope.sock" >/dev/null 2>"$tmp/err" &&
	fail "connected to a missing socket"
grep -q "nope.sock" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"
kill -0 "$daemon" || fail "kvmmd died"
echo "ok: 84 tokens identical on kvmm (2 clients) and private memory"
