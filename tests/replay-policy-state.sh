#!/bin/bash
# kvmm-replay --policy-state FILE and kvmmctl policy-state FILE: a replay
# of the conversation trace saves what asym learned (32,816 bytes; it
# did not exist: the replay started fresh); kvmmctl reads it back (asym,
# version 1, 16 classes whose lives add up to the JSON's); a second
# replay loads it, so its first requests rank differently: more hit
# blocks at 500 GPU blocks than fresh; a damaged file stops the replay
# (exit 1) and kvmmctl says so; so does a state whose FILE.lock another
# program holds; --policy-state with --sweep or --daemon is refused
# (exit 2).  Skips (77) without the trace.   timeout: 60
set -u
# shellcheck source=tests/lib/replay-trace.sh
. "$(dirname "$0")/lib/replay-trace.sh"
C=$B/kvmmctl
[ -x "$C" ] || { echo "skip: $C not built"; exit 77; }
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
hits() { python3 -c "import json,sys; print(json.loads(sys.argv[1])['hit_blocks'])" "$1"; }

j=$("$R" --trace "$T" --policy asym --gpu-blocks 500 --policy-state "$D/s" --json) ||
	fail "replay with a new state file"
fresh=$(hits "$j")
[ "$(stat -c %s "$D/s")" = 32816 ] || fail "state size $(stat -c %s "$D/s")"
[ ! -e "$D/s.tmp" ] || fail "left s.tmp"
out=$("$C" policy-state "$D/s") || fail "kvmmctl policy-state: $out"
echo "$out" | head -3
echo "$out" | grep -q ": asym, version 1, 32816 bytes; " || fail "header: $out"
"$C" --json policy-state "$D/s" >"$D/j" || fail "kvmmctl --json policy-state"
python3 - "$D/j" "$out" <<'PY' || fail "kvmmctl policy-state --json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["policy"] == "asym" and j["version"] == 1 and len(j["classes"]) == 16, j
lives = sum(c["lives"] for c in j["classes"])
back = sum(c["came_back"] for c in j["classes"])
assert 200000 < lives < 300000 and 0 < back < lives, (lives, back)
line = [l for l in sys.argv[2].splitlines() if l.startswith("all ")][0].split()
assert abs(int(line[1]) - lives) <= 16, (line, lives)
PY
cp "$D/s" "$D/s0"
j=$("$R" --trace "$T" --policy asym --gpu-blocks 500 --policy-state "$D/s" --json) ||
	fail "replay loading the state"
seeded=$(hits "$j")
echo "500 GPU blocks: fresh $fresh hit blocks, seeded with its own state $seeded"
[ "$seeded" -gt "$fresh" ] || fail "seeded $seeded <= fresh $fresh"
cmp -s "$D/s" "$D/s0" && fail "the second replay did not save its state"

printf 'x' | dd of="$D/s" bs=1 seek=1000 conv=notrunc 2>/dev/null
"$R" --trace "$T" --policy asym --gpu-blocks 500 --policy-state "$D/s" --json \
	>/dev/null 2>"$D/err" && fail "a damaged state was used"
grep -q "not a policy state, or damaged" "$D/err" || fail "message: $(cat "$D/err")"
"$C" policy-state "$D/s" 2>"$D/err" && fail "kvmmctl read a damaged state"
grep -q "not a policy state, or damaged" "$D/err" || fail "kvmmctl message: $(cat "$D/err")"
# one program per state file: a held FILE.lock (as a running kvmmd holds
# it) stops the replay
if command -v flock >/dev/null; then
	flock -n "$D/s0.lock" "$R" --trace "$T" --policy asym --gpu-blocks 500 \
		--policy-state "$D/s0" --json >/dev/null 2>"$D/err" &&
		fail "a locked state was used"
	grep -q "in use (a kvmmd or another replay holds its .lock)" "$D/err" ||
		fail "lock message: $(cat "$D/err")"
fi
for bad in "--sweep 500,1000" "--gpu-blocks 500 --daemon /nonexistent"; do
	# shellcheck disable=SC2086
	"$R" --trace "$T" --policy asym $bad --policy-state "$D/s0" >/dev/null 2>&1
	[ $? = 2 ] || fail "not refused: $bad"
done
echo ok
