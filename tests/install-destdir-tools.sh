#!/bin/bash
# The installed tools run from a `make install DESTDIR=` tree, where no
# profile is in DATADIR (it lies under DESTDIR): they find the tree's own
# profiles above their executable (BIN/../share/kvmm/profiles, when
# DATADIR is PREFIX/share/kvmm; kvmmd fell back to the reference with a
# WARN, kvmm-replay --profile NAME failed); a name in no directory fails
# with a message naming every directory searched (the executable's tree
# and DATADIR's included) and KVMM_PROFILE_DIR; with KVMM_PROFILE_DIR at
# the tree's profiles it runs.  kvmmd, where DATADIR is elsewhere, falls
# back to the built-in reference cost model with a WARN naming the
# directories (it was silent).  The installed Python package kvmm, with
# no library at LIBDIR, raises an ImportError whose "Tried:" list names
# LIBDIR's path (it left it out).  Skips (77) when profiles or
# libkvmm are installed on this machine (then they are found).
# timeout: 120
set -u
source "${KVMM_SRC:-.}/tests/lib/install-tree.sh"
[ -e "$DATADIR/profiles/h200-llama3-8b.profile" ] &&
	{ echo "skip: $DATADIR/profiles is installed here"; exit 77; }
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT

install_tree "$D/root"
bin=$D/root$PREFIX/bin
[ -x "$bin/kvmm-replay" ] && [ -x "$bin/kvmmd" ] || fail "no tools in $bin"
mkdir "$D/cwd"
cd "$D/cwd" || exit 1
# what a shell outside the source tree has
unset KVMM_SRC KVMM_PROFILE_DIR KVMM_LIB

printf '%s\n' '{"timestamp": 0, "input_length": 100, "output_length": 1, "hash_ids": [1]}' >"$D/t.jsonl"
rbin=$(readlink -f "$bin")
own=no
[ "$DATADIR" = "$PREFIX/share/kvmm" ] && own=yes
if [ $own = yes ]; then
	"$bin/kvmm-replay" --trace "$D/t.jsonl" --policy lru --gpu-blocks 3 \
		--profile h200-llama3-8b >/dev/null ||
		fail "kvmm-replay did not find its tree's h200-llama3-8b"
fi
err=$("$bin/kvmm-replay" --trace "$D/t.jsonl" --policy lru --gpu-blocks 3 \
	--profile nope 2>&1 >/dev/null)
rc=$?
echo "kvmm-replay: $err"
[ $rc = 2 ] || fail "kvmm-replay exit $rc, expected 2"
want="unknown profile 'nope' (tried ./nope.profile, ./kvmm/policy/profiles/nope.profile, $rbin/../nope.profile, $rbin/../kvmm/policy/profiles/nope.profile, $rbin/../share/kvmm/profiles/nope.profile, $DATADIR/profiles/nope.profile; set KVMM_PROFILE_DIR)"
[[ $err == *"$want"* ]] || fail "not: $want"
KVMM_PROFILE_DIR=$D/root$DATADIR/profiles "$bin/kvmm-replay" --trace "$D/t.jsonl" \
	--policy lru --gpu-blocks 3 --profile h200-llama3-8b >/dev/null ||
	fail "kvmm-replay with KVMM_PROFILE_DIR at the tree's profiles"

# kvmmd finds its tree's default profile (it WARNed at every start);
# with DATADIR elsewhere it WARNs, naming every place it looked
"$bin/kvmmd" --foreground --backend host --socket "$D/s" --telemetry shm \
	2>"$D/kvmmd.log" &
pid=$!
for _ in $(seq 200); do [ -S "$D/s" ] && break; sleep 0.05; done
[ -S "$D/s" ] || { cat "$D/kvmmd.log"; fail "kvmmd did not start"; }
kill $pid && wait $pid
pid=
grep "cost model" "$D/kvmmd.log"
if [ $own = yes ]; then
	grep -q "unknown profile" "$D/kvmmd.log" &&
		fail "kvmmd did not find its tree's profile"
else
	want="cost model: unknown profile 'h200-llama3-8b' (tried ./h200-llama3-8b.profile, ./kvmm/policy/profiles/h200-llama3-8b.profile, $rbin/../h200-llama3-8b.profile, $rbin/../kvmm/policy/profiles/h200-llama3-8b.profile, $rbin/../share/kvmm/profiles/h200-llama3-8b.profile, $DATADIR/profiles/h200-llama3-8b.profile; set KVMM_PROFILE_DIR); using the built-in h200-llama3-8b-ref"
	grep "WARN" "$D/kvmmd.log" | grep -qF "$want" || fail "no WARN: $want"
fi

if command -v python3 >/dev/null; then
	py=$(find "$D/root" -path '*/kvmm/__init__.py')
	[ -n "$py" ] || fail "no Python package kvmm installed"
	[ -e "$LIBDIR/libkvmm.so.1" ] && { echo "skip: $LIBDIR/libkvmm.so.1 is installed here"; exit 77; }
	err=$(PYTHONPATH=$(dirname "$(dirname "$py")") python3 -c 'import kvmm' 2>&1) &&
		fail "import kvmm found a library"
	echo "python: ${err##*$'\n'}"
	[[ $err == *"Tried: "*"$LIBDIR/libkvmm.so.1 (make install's LIBDIR)"* ]] ||
		fail "ImportError does not name $LIBDIR/libkvmm.so.1"
fi
echo "ok: tools from a DESTDIR tree say where they looked"
