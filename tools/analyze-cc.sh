#!/bin/sh
# make analyze's compile (the Makefile's ANALYZE_CC, with ANALYZE=1): runs
# the compile it is given, gcc -fanalyzer included, and keeps what the
# compiler said in OBJECT.warn beside the object.  A later `make analyze`
# that finds the object up to date compiles nothing, so tools/analyze.sh
# reads the findings of every object from these files, not from make's
# output.  The compiler's output is shown only when the compile fails.
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
