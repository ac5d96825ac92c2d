#!/bin/bash
# An engine goes on when kvmmd's cache is off: tinylm on a kvmmd whose
# cache set-up fails for good (ENOTSUP, as a backend without async
# copies would) and on one whose set-up fails twice and then works
# (ENOMEM, a shortage) gets every publish's EIO while the cache is off,
# serves every request, and its tokens equal the private-memory
# reference bitwise; with the cache off for good it shares nothing.
# tinylm used to fail its first request on that EIO.
# timeout: 120
set -u
# shellcheck source=tests/lib/tinylm-daemon.sh
. "$(dirname "$0")/lib/tinylm-daemon.sh"

work=(--dim 64 --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300
	--conversations 6 --turns 3 --system-prompts 2 --system-tokens 64
	--user-tokens 16 --gen-tokens 8)
"$bin" "${work[@]}" | grep '^tok' | sort >"$tmp/ref" || fail "reference run"
[ -s "$tmp/ref" ] || fail "empty reference"

# run NAME FAIL: one client on a fresh daemon whose set-up fails as FAIL says
run() {
	local name=$1 sock=$tmp/kvmm-$1.sock
	KVMMD_TEST_CACHE_OPEN_FAIL=$2 KVMMD_TEST_CACHE_RETRY_MS=1 \
		start_daemon "$sock" --page-size 4096 --gpu-mem 512K \
		--cache-gpu-blocks 4 --host-mem 96K
	"$bin" "${work[@]}" --kv kvmm --socket "$sock" >"$tmp/kv-$name" 2>"$tmp/err-$name" ||
		fail "$name: tinylm: $(tail -n 5 "$tmp/err-$name")"
	kill -0 "$daemon" || fail "$name: kvmmd died"
	"$B/kvmmctl" --socket "$sock" status >"$tmp/status-$name" ||
		fail "$name: kvmmctl status"
	stop_daemon
	check_output "$name"
}

run off ENOTSUP:1
grep -q "OFF for good" "$tmp/status-off" ||
	fail "off: status does not say the cache is off: $(grep -i cache "$tmp/status-off")"
python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert d["shared_blocks"] == 0, d' "$tmp/json-off" || fail "off: counters: $(cat "$tmp/json-off")"

run later ENOMEM:2
grep -q "set up at attempt 3" "$tmp/status-later" ||
	fail "later: status: $(grep -i cache "$tmp/status-later")"
echo "ok: tinylm serves every request, identical, with the cache off and after it came back"
