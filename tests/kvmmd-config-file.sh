#!/bin/bash
# kvmmd --config FILE (Documentation/admin.md, "Config file"): read
# whatever abbreviation of --config getopt takes, lines of any length,
# and every line it cannot use refused with FILE:LINE and the reason
# (exit 2); a repeatable option on the command line replaces the file's
# list; a control byte, a byte order mark and a file over 1 MiB (below).
# kvmmd reads its config files before it looks at --version, so
# "--config FILE --version" checks a file without starting anything.
set -u
b=${KVMM_BUILD:-build}
[ -x "$b/kvmmd" ] || { echo "skip: $b/kvmmd not built"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-conf-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# kvmmd ARGS... --version: exit status $1, stderr containing $2
expect() {
	local st=$1 want=$2 rc
	shift 2
	timeout 10 "$b/kvmmd" "$@" --version >"$dir/out" 2>"$dir/err" </dev/null
	rc=$?
	[ $rc = "$st" ] || fail "$*: exit $rc, expected $st ($(cat "$dir/err"))"
	[ -z "$want" ] || grep -qF -- "$want" "$dir/err" ||
		fail "$*: message $(cat "$dir/err")"
	return 0
}

printf 'gpu-mem 12X\n' >"$dir/bad.conf"
expect 2 "kvmmd: $dir/bad.conf:1: bad value for 'gpu-mem'" --config "$dir/bad.conf"
# abbreviations getopt_long accepts read the file too (they were
# skipped: only --config and --config= were looked for)
expect 2 "kvmmd: $dir/bad.conf:1: bad value for 'gpu-mem'" --conf "$dir/bad.conf"
expect 2 "kvmmd: $dir/bad.conf:1: bad value for 'gpu-mem'" --con="$dir/bad.conf"
expect 2 "kvmmd: $dir/bad.conf:1: bad value for 'gpu-mem'" --backend host --confi "$dir/bad.conf"

# a line of any length: a comment of 600 bytes stays a comment (fgets
# cut it at 511 and read its tail as an option), a long value is the
# option's to refuse
{ printf '# %0600d' 0; printf 'gpu-mem 12X\n'; printf 'backend host\n'; } >"$dir/long.conf"
expect 0 "" --config "$dir/long.conf"
{ printf '\n\nsocket /tmp/%0600d\n' 0; } >"$dir/longval.conf"
expect 2 "kvmmd: $dir/longval.conf:3: bad value for 'socket'" --config "$dir/longval.conf"
grep -q "kvmmd: --socket: '/tmp/000.*is too long (605 bytes" "$dir/err" ||
	fail "long value: $(cat "$dir/err")"

# a value given to an option that takes none ("foreground no" turned it on)
printf 'backend host\nforeground no\n' >"$dir/fg.conf"
expect 2 "kvmmd: $dir/fg.conf:2: 'foreground' takes no value (got 'no')" --config "$dir/fg.conf"
printf 'foreground\n' >"$dir/fg-ok.conf"
expect 0 "" --config "$dir/fg-ok.conf"
# the command line's own options, each with its reason (was "bad line")
for k in help version config; do
	printf '%s x\n' "$k" >"$dir/$k.conf"
	expect 2 "kvmmd: $dir/$k.conf:1: '$k' is for the command line only" --config "$dir/$k.conf"
done
grep -qF "(a config file does not read another)" "$dir/err" || fail "config: $(cat "$dir/err")"
printf 'frob 1\n' >"$dir/frob.conf"
expect 2 "kvmmd: $dir/frob.conf:1: unknown option 'frob'" --config "$dir/frob.conf"
printf 'socket\n' >"$dir/noval.conf"
expect 2 "kvmmd: $dir/noval.conf:1: 'socket' needs a value" --config "$dir/noval.conf"
printf 'backend host\nlog-level info\0debug\n' >"$dir/nul.conf"
expect 2 "kvmmd: $dir/nul.conf:2: a NUL byte" --config "$dir/nul.conf"
# any other control byte (a binary file) is named, not echoed: its ESC
# sequences reached the terminal in the "unknown option" line
printf 'backend host\n\033[2Jgpu-mem 1M\n' >"$dir/esc.conf"
expect 2 "kvmmd: $dir/esc.conf:2: a control byte 0x1b at column 1 (not a text file?)" --config "$dir/esc.conf"
grep -q $'\033' "$dir/err" && fail "the ESC byte reached stderr"
# an editor's byte order mark is no part of the first option's name
printf '\357\273\277backend host\ngpu-mem 12X\n' >"$dir/bom.conf"
expect 2 "kvmmd: $dir/bom.conf:2: bad value for 'gpu-mem'" --config "$dir/bom.conf"
# a file of more than 1 MiB is no config file: refused at once (it was
# read whole, one line at a time into memory)
yes '# a comment' | head -c 2000000 >"$dir/big.conf"
expect 2 "kvmmd: config $dir/big.conf: 2000000 bytes, more than a config file's 1048576 (not a config file?)" --config "$dir/big.conf"

# repeatable: --telemetry-attach on the command line replaces the file's
# list (it was added to it: four in the file and one more were too many)
for i in 1 2 3 4; do echo "telemetry-attach /lib/x$i.so"; done >"$dir/attach.conf"
expect 0 "" --config "$dir/attach.conf" --telemetry-attach /lib/y.so
expect 0 "" --config "$dir/attach.conf" --telemetry-attach /lib/y.so \
	--telemetry-attach /lib/z.so
expect 2 "kvmmd: --telemetry-attach: too many" --telemetry-attach /a \
	--telemetry-attach /b --telemetry-attach /c --telemetry-attach /d \
	--telemetry-attach /e
echo ok
