#!/bin/sh
# make analyze: the findings of gcc -fanalyzer, clang's static analyzer
# and cppcheck over kvmm's C, compared with the known ones
# (tools/analyze.baseline); exits 1 when there is a finding the baseline
# does not list (Documentation/build.md, "Static analysis").
#
#   KVMM_BUILD=build/analyze tools/analyze.sh [--baseline FILE]... \
#	--gcc SRC... --clang SRC... --cppcheck SRC...
#
# --baseline: the known findings, one file or several read as one
# (make analyze-tests: tools/analyze.baseline and
# tools/analyze-tests.baseline); tools/analyze.baseline when none given.
# --gcc: sources the Makefile compiled with -fanalyzer (ANALYZE=1), whose
# compiler output tools/analyze-cc.sh kept in BUILD/obj/SRC.o.warn.
# --clang: sources clang --analyze read in the same compile
# (tools/analyze-cc.sh, BUILD/obj/SRC.o.clang); where clang is not
# installed this part is skipped, with one line, and the baseline's clang
# keys are not named as gone.
# --cppcheck: sources cppcheck checks (incremental: BUILD/cppcheck).
#
# A finding is a key, one line: TOOL | FILE | FUNCTION | CHECK | MESSAGE
# (gcc's and clang's function, '-' for cppcheck), without the line
# number, so that
# an edit elsewhere in the file keeps it known; gcc's temporaries
# (regions_81, _13) read _N.  A function with two findings of the same
# key at two places has the key twice.  Every finding, its key and
# where it is, goes to BUILD/analyze-findings.txt.
set -u
cd "$(dirname "$0")/.."
B=${KVMM_BUILD:-build/analyze}
baselines=
gcc_srcs=
clang_srcs=
cpp_srcs=
mode=
want_baseline=
for a in "$@"; do
	if [ -n "$want_baseline" ]; then
		[ -f "$a" ] || {
			echo "analyze: --baseline '$a': no such file" >&2
			exit 2
		}
		baselines="$baselines $a"
		want_baseline=
		continue
	fi
	case "$a" in
	--baseline) want_baseline=1 ;;
	--gcc) mode=gcc ;;
	--clang) mode=clang ;;
	--cppcheck) mode=cppcheck ;;
	-*)
		echo "analyze: unknown option '$a' (usage: tools/analyze.sh [--baseline FILE]... --gcc SRC... --clang SRC... --cppcheck SRC...)" >&2
		exit 2
		;;
	*)
		case "$mode" in
		gcc) gcc_srcs="$gcc_srcs $a" ;;
		clang) clang_srcs="$clang_srcs $a" ;;
		cppcheck) cpp_srcs="$cpp_srcs $a" ;;
		*)
			echo "analyze: '$a' before --gcc, --clang or --cppcheck" >&2
			exit 2
			;;
		esac
		;;
	esac
done
[ -z "$want_baseline" ] || {
	echo "analyze: --baseline needs a file" >&2
	exit 2
}
baselines=${baselines:- tools/analyze.baseline}
# shellcheck disable=SC2086
BASELINE=$(echo $baselines | sed 's/ / and /g')
# where a new key goes: the baseline, or one of them
case "$BASELINE" in
*" and "*) # shellcheck disable=SC2086
	add_to="one of $(echo $baselines | sed 's/ /, /g')" ;;
*) add_to=$BASELINE ;;
esac
[ -f "$B/config.h" ] || {
	echo "analyze: no $B/config.h: run make analyze" >&2
	exit 2
}

found=$B/analyze-findings.txt
: >"$found.tmp"

# gcc: FILE: In function 'F': names the function of the warnings after
# it, and In function 'F', (a header's static inline function, inlined
# into the one named on the line after it) the function they are in
for s in $gcc_srcs; do
	w=$B/obj/${s%.c}.o.warn
	[ -f "$w" ] || {
		echo "analyze: no $w: $s was not compiled by make ANALYZE=1" >&2
		exit 2
	}
	awk '
	/(^|: )In function / {
		fn = $0
		sub(/^[^'"'"']*'"'"'/, "", fn)
		sub(/'"'"'.*/, "", fn)
		next
	}
	/^[^ ][^:]*:[0-9]+:[0-9]+: warning: / {
		where = $0
		sub(/: warning: .*/, "", where)
		sub(/^\.\//, "", where)
		file = where
		sub(/:[0-9]+:[0-9]+$/, "", file)
		msg = $0
		sub(/^[^:]*:[0-9]+:[0-9]+: warning: /, "", msg)
		check = msg
		sub(/.*\[/, "", check)
		sub(/\]$/, "", check)
		sub(/ \[CWE-[0-9]+\]/, "", msg)
		sub(/ \[-W[^]]*\]$/, "", msg)
		gsub(/_[0-9]+(\(D\))?/, "_N", msg)
		print "gcc | " file " | " fn " | " check " | " msg "\t" where
	}' "$w" >>"$found.tmp"
done

# clang: tools/analyze-plist.py's lines, kept beside each object
# (KVMM_ANALYZE_CLANG: clang's path, the Makefile's; set and empty, none)
skipped=
clang=${KVMM_ANALYZE_CLANG-$(command -v clang 2>/dev/null)}
if [ -n "$clang_srcs" ] && [ -z "$clang" ]; then
	echo "analyze: clang not installed: its part skipped (make deps installs it)"
	skipped=clang
	clang_srcs=
fi
for s in $clang_srcs; do
	w=$B/obj/${s%.c}.o.clang
	[ -f "$w" ] || {
		echo "analyze: no $w: $s was not read by clang --analyze in make ANALYZE=1" >&2
		exit 2
	}
	cat "$w" >>"$found.tmp"
done
# one place may be reported once per path that reaches it (gcc), or once
# per object that includes the header it is in (clang)
sort -u "$found.tmp" -o "$found.tmp"

if [ -n "$cpp_srcs" ]; then
	command -v cppcheck >/dev/null 2>&1 || {
		echo "analyze: cppcheck not installed (make deps installs it)" >&2
		exit 2
	}
	mkdir -p "$B/cppcheck"
	t0=$(date +%s)
	# one configuration, the build's (config.h): checking every #if
	# combination took several times as long and reported code no build
	# compiles
	# shellcheck disable=SC2086
	cppcheck -q --language=c --std=c11 -j "$(nproc)" \
		--cppcheck-build-dir="$B/cppcheck" \
		--enable=warning,portability,performance --inline-suppr \
		-D_GNU_SOURCE -DKVMM_VERSION='"0"' -I. -Ikvmm/include -I"$B" \
		--include="$B/config.h" \
		--template='cppcheck | {file} | - | {id} | {message}	{file}:{line}:{column}' \
		$cpp_srcs 2>"$B/cppcheck.out"
	rc=$?
	if [ "$rc" != 0 ]; then
		cat "$B/cppcheck.out" >&2
		echo "analyze: cppcheck failed ($rc)" >&2
		exit 2
	fi
	grep '^cppcheck | ' "$B/cppcheck.out" | sort -u >>"$found.tmp"
	echo "analyze: cppcheck $(($(date +%s) - t0)) s"
fi
sort -t '	' -k1,1 "$found.tmp" >"$found"
rm -f "$found.tmp"

# the keys, as a multiset: comm pairs equal lines one for one
cut -f1 "$found" | sort >"$B/analyze-keys.txt"
# a tool skipped here: its keys are neither known nor gone
# shellcheck disable=SC2086
cat $baselines | grep -v -e '^#' -e '^[[:space:]]*$' |
	grep -v "^${skipped:-@none@} | " | sort >"$B/analyze-known.txt"
new=$(comm -13 "$B/analyze-known.txt" "$B/analyze-keys.txt")
gone=$(comm -23 "$B/analyze-known.txt" "$B/analyze-keys.txt")
nfound=$(wc -l <"$B/analyze-keys.txt")
nknown=$(wc -l <"$B/analyze-known.txt")

if [ -n "$gone" ]; then
	echo "analyze: in $BASELINE but not found (fixed? remove the line):"
	printf '%s\n' "$gone" | sed 's/^/  /'
fi
if [ -n "$new" ]; then
	echo "analyze: new findings (fix them, or add the key with why it is wrong to $add_to):"
	printf '%s\n' "$new" | sort -u | while IFS= read -r k; do
		grep -F -- "$k	" "$found" | cut -f2 | sed 's/^/  /'
		echo "    $k"
	done
	echo "analyze: FAIL: $(printf '%s\n' "$new" | wc -l) new, $nfound found, $nknown known (gcc's paths: $B/obj/SRC.o.warn; clang's: tools/analyze-plist.py --path $B/obj/SRC.o.clang.plist)"
	exit 1
fi
echo "analyze: ok: $nfound findings, all known ($BASELINE)"
