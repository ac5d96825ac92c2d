#!/bin/bash
# timeout: 60
# kvmmctl tenants keeps its columns in line whatever the uids: TENANT is
# as wide as its widest name, 12 columns at least (what it always was),
# so every column after it starts at the same offset on every line, the
# header's included.  Until 7 December it was "%-12s" whatever the
# names: "uid 4294967294" (14 characters; the largest uid there is) put
# its line's other columns 2 right of the header's.  First uids of 4
# digits alone (the 12-column table, as admin.md shows it), then one of
# 4294967294 (given a quota, so that kvmmd lists it: no process of that
# uid is needed).
set -u
b=${KVMM_BUILD:-build}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-ctl-tenants-XXXXXX")
sock=$dir/kvmm.sock
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: no python3 to read the table"; exit 77; }

"$b/kvmmd" --foreground --telemetry off --socket "$sock" --page-size 128K \
	--gpu-mem 32M 2>"$dir/log" &
pid=$!
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "no socket"

# check WIDTH UID...: the table's TENANT column is WIDTH wide, each uid
# has its row, and every line has each column where the header has it
check() {
	local width=$1
	shift
	"$b/kvmmctl" --socket "$sock" tenants >"$dir/out" 2>"$dir/err" ||
		fail "tenants: $(cat "$dir/err")"
	cat "$dir/out"
	python3 - "$dir/out" "$width" "$@" <<'PY' || fail "tenants' columns (above)"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "", "no newline at the end"
lines = lines[:-1]
width = int(sys.argv[2])
want = {"uid " + u for u in sys.argv[3:]}
head = lines[0]
cols = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", head)]
names = [c[2] for c in cols]
assert names[0] == "TENANT" and names[1] == "SESSIONS" and names[-1] == "LIMIT", head
assert len(names) == 17, names
# TENANT is width wide, then a blank and SESSIONS' 8 columns
assert cols[1][1] == width + 1 + 8, "header: SESSIONS ends at %d, not %d" % (cols[1][1], width + 9)
seen = set()
for line in lines[1:]:
    name = line[:width].rstrip()
    assert name and line[0] != " ", "no TENANT: %r" % line
    assert line[width] == " ", "TENANT is wider than %d: %r" % (width, line)
    seen.add(name)
    # the right-aligned counts end where their header word ends, each
    # after a blank; LIMIT starts where its word starts
    toks = {m.end(): m.start() for m in re.finditer(r"\S+", line[width:])}
    prev = width
    for start, end, word in cols[1:-1]:
        s = toks.get(end - width)
        assert s is not None and s + width > prev, "%s does not end at %d: %r" % (word, end, line)
        prev = end
    s = cols[-1][0]
    assert line[s - 2:s] == "  " and line[s] != " ", "LIMIT not at %d: %r" % (s, line)
missing = want - seen
assert not missing, "no row for %s" % missing
print("%d lines, TENANT %d wide, every column in place" % (len(lines), width))
PY
}

"$b/kvmmctl" --socket "$sock" quota 4242 1M >/dev/null || fail "quota 4242"
"$b/kvmmctl" --socket "$sock" quota 7 1M >/dev/null || fail "quota 7"
check 12 4242 7
head -1 "$dir/out" | grep -q '^TENANT       SESSIONS ' || fail "header of a 12-column table: $(head -1 "$dir/out")"

"$b/kvmmctl" --socket "$sock" quota 4294967294 1M >/dev/null || fail "quota 4294967294"
check 14 4242 7 4294967294
head -1 "$dir/out" | grep -q '^TENANT         SESSIONS ' || fail "header of a 14-column table: $(head -1 "$dir/out")"
grep -q '^uid 4294967294        0 ' "$dir/out" || fail "no row of uid 4294967294 as expected"
grep -q '^uid 4242              0 ' "$dir/out" || fail "no row of uid 4242 padded to 14"
echo ok
