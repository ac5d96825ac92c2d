#!/bin/sh
# make analyze's compile (the Makefile's ANALYZE_CC, with ANALYZE=1): runs
# the compile it is given, gcc -fanalyzer included, and keeps what the
# compiler said in OBJECT.warn beside the object.  A later `make analyze`
# that finds the object up to date compiles nothing, so tools/analyze.sh
# reads the findings of every object from these files, not from make's
# output.  The compiler's output is shown only when the compile fails.
#
# With KVMM_ANALYZE_CLANG set (the Makefile sets it to clang's path where
# clang is installed), clang's static analyzer then reads the same source
# with the same flags (gcc's own taken out) and its findings are kept in
# OBJECT.clang (tools/analyze-plist.py's lines) and OBJECT.clang.plist
# (each with its path: tools/analyze-plist.py --path).
#
#   tools/analyze-cc.sh CC ARGS... -o OBJECT ...
set -u
out=
prev=
for a in "$@"; do
	[ "$prev" = -o ] && out=$a
	prev=$a
done
[ -n "$out" ] || exec "$@"
# ASCII quotes in the messages: the baseline's keys do not depend on the
# locale make runs in
LC_ALL=C
export LC_ALL
"$@" 2>"$out.warn.tmp"
rc=$?
if [ "$rc" != 0 ]; then
	cat "$out.warn.tmp" >&2
	rm -f "$out.warn.tmp"
	exit "$rc"
fi
mv "$out.warn.tmp" "$out.warn"

clang=${KVMM_ANALYZE_CLANG:-}
if [ -z "$clang" ]; then
	# an earlier analysis's findings are not this source's
	rm -f "$out.clang" "$out.clang.plist"
	exit 0
fi
# The checkers (Documentation/build.md, "Static analysis", says why these):
# clang's defaults for C (core, unix, deadcode, security, nullability,
# apiModeling) without security.insecureAPI (memcpy, sprintf ...: every
# call of them), optin.portability (malloc(0)) and alpha.unix's FILE *
# checkers.  alpha.core, alpha.security, alpha.unix.PthreadLock and
# alpha.unix.cstring were tried over the tree: 170 findings, none real.
checkers=core,unix,deadcode,security,nullability,optin.portability
checkers=$checkers,alpha.unix.Stream,alpha.unix.SimpleStream
# the compile's arguments without the compiler, its output and gcc's own
# flags; -w: clang's compiler warnings are the build's (gcc's) business
shift
n=$#
skip=
while [ "$n" -gt 0 ]; do
	a=$1
	shift
	n=$((n - 1))
	if [ -n "$skip" ]; then
		skip=
		continue
	fi
	case "$a" in
	-o | -MF | -MT | -MQ) skip=1 ;;
	-c | -MMD | -MP | -MD | -Werror | -fanalyzer | -Wanalyzer*) ;;
	*) set -- "$@" "$a" ;;
	esac
done
"$clang" --analyze -w "$@" --analyzer-output plist -o "$out.clang.plist.tmp" \
	-Xanalyzer -analyzer-checker="$checkers" \
	-Xanalyzer -analyzer-disable-checker=security.insecureAPI \
	2>"$out.clang.tmp"
rc=$?
if [ "$rc" != 0 ]; then
	echo "analyze: clang --analyze failed on $out ($rc):" >&2
	cat "$out.clang.tmp" >&2
	rm -f "$out.clang.tmp" "$out.clang.plist.tmp"
	exit "$rc"
fi
mv "$out.clang.plist.tmp" "$out.clang.plist"
python3 "$(dirname "$0")/analyze-plist.py" "$out.clang.plist" >"$out.clang.tmp" ||
	exit 1
mv "$out.clang.tmp" "$out.clang"
