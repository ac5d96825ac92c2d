#!/bin/bash
# make analyze's gate (tools/analyze.sh, tools/analyze-cc.sh,
# tools/analyze-plist.py), copied into a scratch tree with a baseline of
# its own, on two small sources that gcc -fanalyzer, clang --analyze and
# cppcheck really analyse: a leak on an error path is a new finding of
# each (exit 1, its place and its key printed), known once its keys are
# in the baseline (exit 0) or split over two baselines read as one
# (--baseline, make analyze-tests'), a second one in the same function is new
# again (a key counts its findings), a baseline key found no more is
# named and does not fail, an inline cppcheck-suppress takes its finding
# away, clang not installed skips its part with one line (its keys not
# named as gone), and a source the compile did not go through, or clang
# did not read, stops it (exit 2).  Without clang its cases are left out
# (one line says so).  The tree's own findings are make analyze's (not
# run here: Documentation/build.md, "Static analysis").
set -u
src=${KVMM_SRC:-$PWD}
cc=${CC:-gcc}
command -v cppcheck >/dev/null 2>&1 || {
	echo "skip: cppcheck not installed (make deps)"
	exit 77
}
echo 'int main(void) { return 0; }' |
	"$cc" -fanalyzer -x c -c -o /dev/null - 2>/dev/null || {
	echo "skip: $cc has no -fanalyzer (gcc 10 or later)"
	exit 77
}
clang=$(command -v clang 2>/dev/null)
nk=1 # clang's findings of the leak: 1, or none without clang
if [ -z "$clang" ]; then
	echo "clang not installed: the self-test leaves its cases out"
	nk=0
fi
s=$(mktemp -d "${TMPDIR:-/tmp}/analyze-selftest.XXXXXX") || exit 1
trap 'rm -rf "$s"' EXIT
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
# run WANT_RC [CLANG]: the gate over the scratch tree, its output in
# $s/out; the baselines it reads are bl's (none: its default)
bl=()
run() {
	(cd "$s/tree" && KVMM_BUILD=build/analyze \
		KVMM_ANALYZE_CLANG=${2-$clang} tools/analyze.sh "${bl[@]}" \
		--gcc src/leak.c src/clean.c --clang src/leak.c src/clean.c \
		--cppcheck src/leak.c src/clean.c) >"$s/out" 2>&1
	rc=$?
	[ "$rc" = "$1" ] || fail "exit $rc, not $1: $(cat "$s/out")"
}
expect() { # what fixed-string
	grep -qF -- "$2" "$s/out" || fail "$1: no line with '$2' in: $(cat "$s/out")"
}
compile() { # SRC [CLANG: "" leaves clang out]
	(cd "$s/tree" && mkdir -p build/analyze/obj/src &&
		KVMM_ANALYZE_CLANG=${2-$clang} \
			tools/analyze-cc.sh "$cc" -fanalyzer -c "src/$1.c" \
			-o "build/analyze/obj/src/$1.o") ||
		fail "compile of $1.c"
}

t=$s/tree
mkdir -p "$t/tools" "$t/src" "$t/build/analyze"
cp "$src/tools/analyze.sh" "$src/tools/analyze-cc.sh" \
	"$src/tools/analyze-plist.py" "$t/tools/"
: >"$t/build/analyze/config.h"
echo '# the self-test baseline' >"$t/tools/analyze.baseline"
cat >"$t/src/clean.c" <<'EOF'
#include <stdlib.h>
int clean(int n)
{
	char *p = malloc(16);

	if (!p)
		return -1;
	free(p);
	return n;
}
EOF
leak_c() { # the leak on the error path, once or twice ($1)
	{
		echo '#include <stdlib.h>'
		echo 'int leaky(int n)'
		echo '{'
		echo '	char *p = malloc(16);'
		echo ''
		echo '	if (!p)'
		echo '		return -1;'
		[ "$1" = 2 ] && printf '\tif (n > 9)\n\t\treturn -3;\n'
		echo '	if (n > 3)'
		[ "${2:-}" = suppressed ] &&
			echo '		/* cppcheck-suppress memleak ; the test says so */'
		echo '		return -2;'
		echo '	free(p);'
		echo '	return n;'
		echo '}'
	} >"$t/src/leak.c"
}
gkey="gcc | src/leak.c | leaky | -Wanalyzer-malloc-leak | leak of 'p'"
ckey="cppcheck | src/leak.c | - | memleak | Memory leak: p"
kkey="clang | src/leak.c | leaky | unix.Malloc | Potential leak of memory pointed to by 'p'"

# 1. a leak: new to the baseline, for each tool
leak_c 1
compile leak
compile clean
run 1
expect "the new gcc finding's key" "$gkey"
expect "the new cppcheck finding's key" "$ckey"
[ "$nk" = 1 ] && expect "the new clang finding's key" "$kkey"
expect "its place" "src/leak.c:"
expect "the verdict" "analyze: FAIL: $((2 + nk)) new, $((2 + nk)) found, 0 known"

# 2. its keys in the baseline: known, the gate passes
printf '# why (the test)\n%s\n%s\n' "$gkey" "$ckey" >>"$t/tools/analyze.baseline"
[ "$nk" = 1 ] && echo "$kkey" >>"$t/tools/analyze.baseline"
run 0
expect "known" "analyze: ok: $((2 + nk)) findings, all known"

# 2b. the same keys in two baselines read as one (--baseline, as make
# analyze-tests reads the tests' own): known; the first alone is not
# enough, and a baseline that is not there stops the run
grep -F -- "$gkey" "$t/tools/analyze.baseline" >"$t/tools/second.baseline"
grep -v -F -- "$gkey" "$t/tools/analyze.baseline" >"$t/tools/first.baseline"
bl=(--baseline tools/first.baseline --baseline tools/second.baseline)
run 0
expect "two baselines" "analyze: ok: $((2 + nk)) findings, all known (tools/first.baseline and tools/second.baseline)"
bl=(--baseline tools/first.baseline)
run 1
expect "the key only the second holds" "$gkey"
bl=(--baseline tools/none.baseline)
run 2
expect "a missing baseline" "analyze: --baseline 'tools/none.baseline': no such file"
bl=()

# 3. a second leak in the same function (cppcheck: one at each return,
# gcc and clang one for the allocation): one key more than known
leak_c 2
compile leak
run 1
expect "the second cppcheck finding" "$ckey"
expect "the verdict" "analyze: FAIL: 1 new, $((3 + nk)) found, $((2 + nk)) known"
grep -q "clean" "$s/out" && fail "the clean source named: $(cat "$s/out")"

# 4. a baseline key no longer found: named, not a failure
leak_c 1
compile leak
echo 'gcc | src/gone.c | f | -Wanalyzer-malloc-leak | leak of x' >>"$t/tools/analyze.baseline"
run 0
expect "the stale key" "but not found (fixed? remove the line):"
expect "the stale key's text" "src/gone.c | f"

# 5. cppcheck's inline suppression: its finding goes, the key is stale
leak_c 1 suppressed
compile leak
run 0
expect "the suppressed key named stale" "  $ckey"

# 6. clang not installed (KVMM_ANALYZE_CLANG set and empty, as the
# Makefile sets it): one line, and its key in the baseline is not named
# as gone
if [ "$nk" = 1 ]; then
	run 0 ""
	expect "clang skipped" "analyze: clang not installed: its part skipped"
	grep -qF -- "$kkey" "$s/out" &&
		fail "clang's key named without clang: $(cat "$s/out")"
fi

# 7. a source clang did not read (compiled again without it: the
# earlier findings go), and one the compile did not go through
if [ "$nk" = 1 ]; then
	compile leak ""
	run 2
	expect "the source clang did not read" \
		"src/leak.c was not read by clang --analyze in make ANALYZE=1"
fi
rm "$t/build/analyze/obj/src/clean.o.warn"
run 2
expect "the source" "src/clean.c was not compiled by make ANALYZE=1"

[ "$fails" = 0 ] || exit 1
echo "analyze gate: new, known (in one baseline or two), counted, stale, suppressed, skipped and missing findings as expected"
