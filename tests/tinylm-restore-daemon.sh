#!/bin/bash
# Restore plans through a real kvmmd: with --restore-mode recompute, prefix
# blocks demoted to the host/NVMe tier come back as RECOMPUTE (fresh pages)
# and tinylm recomputes them at their original positions; with reload they
# come back restored by the daemon and the per-block actions name the tier;
# the default (plan, the cost model) reloads like before.  Every run's
# tokens and logit checksums equal the private-memory reference bitwise.
# timeout: 120
set -u
# shellcheck source=tests/lib/tinylm-daemon.sh
. "$(dirname "$0")/lib/tinylm-daemon.sh"
"$B/kvmmd" --help 2>&1 | grep -q -- --nvme-path || { echo "skip: kvmmd has no NVMe tier"; exit 77; }

# Bad modes are refused.
"$B/kvmmd" --restore-mode sometimes --socket "$tmp/x.sock" --foreground \
	>/dev/null 2>"$tmp/err" && fail "kvmmd accepted --restore-mode sometimes"
grep -q "restore-mode" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"

work=(--dim 64 --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300
	--conversations 6 --turns 3 --system-prompts 2 --system-tokens 64
	--user-tokens 16 --gen-tokens 8)
"$bin" "${work[@]}" | grep '^tok' | sort >"$tmp/ref" || fail "reference run"
[ -s "$tmp/ref" ] || fail "empty reference"

# run MODE: one client on a fresh daemon; prints its stats line
run() {
	local mode=$1 sock=$tmp/kvmm-$1.sock
	rm -f "$tmp/nvme.slots"
	start_daemon "$sock" --page-size 4096 \
		--gpu-mem 512K --cache-gpu-blocks 4 --host-mem 96K \
		--nvme-path "$tmp/nvme.slots" --nvme-size 4M \
		${mode:+--restore-mode $mode}
	"$bin" "${work[@]}" --kv kvmm --socket "$sock" >"$tmp/kv-$mode" 2>"$tmp/err-$mode" ||
		fail "$mode: tinylm: $(tail -n 5 "$tmp/err-$mode")"
	kill -0 "$daemon" || fail "$mode: kvmmd died"
	stop_daemon
	grep '^tok' "$tmp/kv-$mode" | sort >"$tmp/tok-$mode"
	diff -q "$tmp/ref" "$tmp/tok-$mode" >/dev/null || {
		diff "$tmp/ref" "$tmp/tok-$mode" | head
		fail "$mode: output differs from the private-memory reference"
	}
	grep '^{' "$tmp/kv-$mode" | tail -n 1
}

check() { # mode python-assertions
	run "$1" >"$tmp/json-$1" || exit 1
	python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
exec(sys.argv[2])
print("ok:", sys.argv[3], "shared", d["shared_blocks"], "host", d["restored_host"],
      "nvme", d["restored_nvme"], "recomputed", d["recomputed_blocks"])' \
		"$tmp/json-$1" "$2" "$1" || fail "$1: counters: $(cat "$tmp/json-$1")"
}

check recompute '
assert d["recomputed_blocks"] > 0, d
assert d["restored_host"] == 0 and d["restored_nvme"] == 0, d
assert d["shared_blocks"] > 0, d'
check reload '
assert d["recomputed_blocks"] == 0, d
assert d["restored_host"] > 0, d
assert d["shared_blocks"] > 0, d'
check plan '
assert d["recomputed_blocks"] == 0, d
assert d["restored_host"] > 0, d'
echo "ok: restore modes recompute, reload and plan all bitwise identical"
