#!/bin/bash
# kvmmd's option values that were accepted and should not have been:
# each is refused before anything starts, exit 2, one line naming the
# option and the reason (Documentation/admin.md, kvmmd options); a
# --cache-block-pages larger than the pool stops the start (exit 2), one
# that no host tier holds is a WARN at start; kvmmctl quota refuses sizes
# the same way, as kvmmctl.  Every
# kvmmd here runs under a timeout: one that hung (a FIFO as
# --policy-state) fails the test instead of blocking it.
set -u
b=${KVMM_BUILD:-build}
[ -x "$b/kvmmd" ] || { echo "skip: $b/kvmmd not built"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-opterr-XXXXXX")
sock=$dir/kvmm.sock
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

bad() { # expected-text option...
	local want=$1 rc
	shift
	timeout 10 "$b/kvmmd" --foreground --backend host --telemetry off \
		--socket "$sock" "$@" 2>"$dir/err" </dev/null
	rc=$?
	[ $rc = 2 ] || fail "$*: exit $rc, expected 2 ($(cat "$dir/err"))"
	grep -qF -- "$want" "$dir/err" || fail "$*: message $(cat "$dir/err")"
	[ "$(wc -l <"$dir/err")" = 1 ] || fail "$*: not one line: $(cat "$dir/err")"
	[ -e "$sock" ] && fail "$*: left a socket"
	return 0
}

# --policy-state that is no regular file: a FIFO blocked the start (and
# SIGTERM), a directory or a link the saves cannot keep
mkfifo "$dir/fifo"
mkdir "$dir/statedir"
ln -s "$dir/elsewhere" "$dir/link"
bad "kvmmd: --policy-state: $dir/fifo is a FIFO, not a regular file" --policy-state "$dir/fifo"
bad "kvmmd: --policy-state: $dir/statedir is a directory, not a regular file" --policy-state "$dir/statedir"
bad "kvmmd: --policy-state: /dev/null is a device, not a regular file" --policy-state /dev/null
bad "kvmmd: --policy-state: $dir/link is a symbolic link: a save renames" --policy-state "$dir/link"
mkfifo "$dir/s.tmp"
bad "kvmmd: --policy-state: $dir/s.tmp (each save writes it) is a FIFO" --policy-state "$dir/s"

# a misspelled option is one line naming it (the whole --help followed,
# 70 lines)
bad "kvmmd: unknown option '--gpu-memory' (see kvmmd --help)" --gpu-memory 1G
bad "kvmmd: unknown option '--bogus' (see kvmmd --help)" --bogus=1
bad "kvmmd: ambiguous option '--nvme' (see kvmmd --help)" --nvme x
bad "kvmmd: option '--gpu-mem' needs a value (see kvmmd --help)" --gpu-mem
bad "kvmmd: unknown option '-x' (see kvmmd --help)" -x

# sizes and numbers start with a digit: strtoull skipped the blank and
# took the sign, so " -1" was 2^64 - 1
bad "kvmmd: --host-mem: ' -1' is not a size" --host-mem " -1"
bad "kvmmd: --gpu-mem: '+1G' is not a size" --gpu-mem +1G
bad "kvmmd: --quota: ' -1' is not a size" --quota "1000= -1"
bad "kvmmd: --cpu: ' 1' is not a number" --cpu " 1"
bad "kvmmd: --socket-mode: '8' is not an octal number" --socket-mode 8
# the reason, not only the value
bad "kvmmd: --socket-mode: 1777 is more than 0777 (permission bits only" --socket-mode 1777
# 0 meant the default while 1 was refused
bad "kvmmd: --gpu-mem: 0 is no pool (leave the option out for the default, 4096 pages)" --gpu-mem 0
# a page of 1T made a pool of 4 PiB
bad "kvmmd: --page-size: 1T is more than 1G (the largest page kvmmd maps)" --page-size 1T
bad "kvmmd: --page-size: 6K is not a multiple of 4K" --page-size 6K
# a connection that never sends HELLO must not keep its slot for ever
bad "kvmmd: --hello-timeout: must be > 0" --hello-timeout 0
bad "kvmmd: --max-sessions-per-uid: '-1' is not a number" --max-sessions-per-uid -1
# a uid's quarantine records: 0 would refuse every process of every
# non-admin uid; past 4096 the polls of those past the pidfds add up
bad "kvmmd: --quarantine-per-uid: 0: must be at least 1 (0 refuses every process of a non-admin uid its session) and at most 4096" --quarantine-per-uid 0
bad "kvmmd: --quarantine-per-uid: 4097: must be at least 1" --quarantine-per-uid 4097
bad "kvmmd: --quarantine-per-uid: '-1' is not a number" --quarantine-per-uid -1
bad "kvmmd: --max-table-entries-per-uid: '1M' is not a number" --max-table-entries-per-uid 1M

# a block is 2 x layers pages: an odd count or 0 matched no region, every
# one was uncached (a WARN each)
bad "kvmmd: --cache-block-pages 3: a block is 2 x layers pages (an even number, at least 2" --cache-block-pages 3
bad "kvmmd: --cache-block-pages 1: a block is 2 x layers pages" --cache-block-pages 1
bad "kvmmd: --cache-block-pages 0: a block is 2 x layers pages" --cache-block-pages 0
# a size's weight (N:W, its share of --host-mem and --nvme-size): a
# number from 1 to 1000, the item named
bad "kvmmd: --cache-block-pages 4:0: a weight is at least 1 (a size without :W weighs 1)" --cache-block-pages 4:0,2
bad "kvmmd: --cache-block-pages 2:-1: the weight '-1' is not a number (N:W, W from 1 to 1000)" --cache-block-pages 4,2:-1
bad "kvmmd: --cache-block-pages 4:x: the weight 'x' is not a number" --cache-block-pages 4:x,2
bad "kvmmd: --cache-block-pages 4:: the weight '' is not a number" --cache-block-pages 4:,2
bad "kvmmd: --cache-block-pages 4:3:1: the weight '3:1' is not a number" --cache-block-pages 4:3:1,2
bad "kvmmd: --cache-block-pages 4: 3: the weight ' 3' is not a number" --cache-block-pages "4: 3,2"
bad "kvmmd: --cache-block-pages 4:1001: the weight 1001 is too large (at most 1000)" --cache-block-pages 4:1001,2
bad "kvmmd: --cache-block-pages 2:99999999999999999999: the weight 99999999999999999999 is too large (at most 1000)" --cache-block-pages 4:3,2:99999999999999999999
bad "kvmmd: --cache-block-pages :3: '' is not a number" --cache-block-pages 4,:3
bad "kvmmd: --cache-block-pages 4x:3: '4x' is not a number" --cache-block-pages 4x:3,2
# an empty item is a typo, not a size left out (strtok_r took "4,,2" as 4,2)
bad "kvmmd: --cache-block-pages '4,,2': an empty size (a comma too many: A[:W][,B[:W]...])" --cache-block-pages 4,,2
bad "kvmmd: --cache-block-pages ',4': an empty size" --cache-block-pages ,4
bad "kvmmd: --cache-block-pages '4,': an empty size" --cache-block-pages 4,
# a CPU kvmmd may not run on: a WARN and an unpinned loop, before
bad "kvmmd: --cpu 1023: not a CPU kvmmd may run on (" --cpu 1023
# ignored without a word
bad "kvmmd: --nvme-size without --nvme-path: there is no NVMe tier to size" --nvme-size 1G
# a number too large is out of range, not "not a number"
bad "kvmmd: --spin-us: '99999999999' is out of range (at most 4294967295)" --spin-us 99999999999
# and a size past 2^64 - 1, with or without a suffix, is too large (it
# was "not a size", as a typo is)
bad "kvmmd: --gpu-mem: '18446744073709551616' is too large (at most 18446744073709551615 bytes)" --gpu-mem 18446744073709551616
bad "kvmmd: --host-mem: '99999999999999999999K' is too large" --host-mem 99999999999999999999K
bad "kvmmd: --host-mem: '18446744073709551616x' is not a size" --host-mem 18446744073709551616x
# an ordinal past CUDA's int: exit 2 without a word, before
bad "kvmmd: --cuda-device: 2147483648 is out of range (an ordinal at most 2147483647, or a UUID)" --cuda-device 2147483648
# an empty socket path: a socket bound as ".PID" where kvmmd started,
# its rename to "" failed, exit 1
bad "kvmmd: --socket: an empty path (give the socket's path, or leave the option out for /run/kvmm/kvmm.sock)" --socket ""
bad "kvmmd: --socket: an empty path" --socket=
# a socket path under a file: no start makes it work (it was exit 1)
: >"$dir/sockfile"
bad "kvmmd: --socket $dir/sockfile/k.sock: Not a directory (a file on the path where a directory should be)" \
	--socket "$dir/sockfile/k.sock"
bad "kvmmd: --socket $dir/sockfile/sub/k.sock: Not a directory" \
	--socket "$dir/sockfile/sub/k.sock"
# --nvme-size 0 was "not given": "does not exist: give --nvme-size" of a
# new file, its own size for one that was there
bad "kvmmd: --nvme-size: 0 is no tier (leave the option out to use an existing file at its own size, a block device whole)" \
	--host-mem 16M --nvme-path "$dir/n0" --nvme-size 0
# the limit, not only "too many"
quotas=()
for i in $(seq 1000 1064); do quotas+=(--quota "$i=1G"); done
bad "kvmmd: --quota: more than 64 uids (set more with kvmmctl quota)" "${quotas[@]}"
# a config that is no regular file: a FIFO hung the start, a directory
# was "cannot read it" without a reason
mkfifo "$dir/conf.fifo"
bad "kvmmd: config $dir/conf.fifo: not a regular file (a FIFO)" --config "$dir/conf.fifo"
bad "kvmmd: config $dir: not a regular file (a directory)" --config "$dir"
bad "kvmmd: --socket-group: 'no-such-group-kvmm' is no group" --socket-group no-such-group-kvmm
# --nvme-path: a path under a file, or a missing file with no size to
# make it, failed only at the first publish (without
# --cache-block-pages), and left the cache off for good.  (A directory
# that does not exist yet is waited for since 1.15:
# tests/cache-nvme-join-late.c.)
: >"$dir/afile"
bad "kvmmd: --nvme-path $dir/afile/slots: Not a directory" \
	--host-mem 16M --nvme-path "$dir/afile/slots" --nvme-size 32M
bad "kvmmd: --nvme-path $dir/slots does not exist: give --nvme-size" \
	--host-mem 16M --nvme-path "$dir/slots"
[ -e "$dir/slots" ] && fail "--nvme-path without --nvme-size left a file"
: >"$dir/slots0"
bad "kvmmd: --nvme-path $dir/slots0 is an empty file: give --nvme-size" \
	--host-mem 16M --nvme-path "$dir/slots0"

# kvmmctl names itself, and refuses the same sizes
"$b/kvmmctl" --socket "$sock" quota 1000 " -1" 2>"$dir/err"
[ $? = 2 ] || fail "kvmmctl quota ' -1' not a usage error"
grep -qF "kvmmctl: quota: ' -1' is not a size" "$dir/err" || fail "kvmmctl quota: $(cat "$dir/err")"
"$b/kvmmctl" --socket "$sock" quota " 1000" 1G 2>"$dir/err"
[ $? = 2 ] || fail "kvmmctl quota ' 1000' not a usage error"
"$b/kvmmctl" --socket "$sock" quota 1000 99999999999999999999 2>"$dir/err"
[ $? = 2 ] || fail "kvmmctl quota 99999999999999999999 not a usage error"
grep -qF "kvmmctl: quota: '99999999999999999999' is too large" "$dir/err" || fail "kvmmctl quota: $(cat "$dir/err")"

# --cache-block-pages against the pool and the host tier, at start
# (exit 2, a bad option, though the page size it needs is the backend's):
# the host tier was silently gone
start_fails() { # expected-text option...
	local want=$1 rc
	shift
	timeout 10 "$b/kvmmd" --foreground --backend host --telemetry off \
		--socket "$sock" "$@" 2>"$dir/err" </dev/null
	rc=$?
	[ $rc = 2 ] || fail "$*: exit $rc, expected 2 ($(cat "$dir/err"))"
	grep -qF -- "$want" "$dir/err" || fail "$*: message $(cat "$dir/err")"
	[ -e "$sock" ] && fail "$*: left a socket"
	return 0
}
start_fails "--cache-block-pages 4294967294: a block is larger than the pool (4096 pages of 65536 bytes" \
	--host-mem 1G --cache-block-pages 4294967294
start_fails "--cache-block-pages 600: a block is larger than the pool (512 pages" \
	--gpu-mem 32M --cache-block-pages 600
# a host tier that holds no block with --nvme-path: the NVMe tier was
# silently off too (only a WARN about the host tier) and an empty file
# left behind
start_fails "--host-mem 65536 holds no block (the smallest, 2 pages, 131072 bytes): the NVMe tier (--nvme-path $dir/tiny) needs a host tier of at least one block" \
	--host-mem 64K --nvme-path "$dir/tiny" --nvme-size 1M
start_fails "--host-mem 196608 holds no block (--cache-block-pages 4, 262144 bytes): the NVMe tier (--nvme-path $dir/tiny) needs a host tier" \
	--host-mem 192K --nvme-path "$dir/tiny" --nvme-size 1M --cache-block-pages 4
# each named size's share by its weight: the 4-page size's 1/8 of 1 MiB
# holds no block of 256 KiB (the equal cut's 512 KiB would)
start_fails "--host-mem 1048576 holds no block (--cache-block-pages 4 in its share, 1/8: 131072 bytes, a block 262144 bytes): the NVMe tier (--nvme-path $dir/tiny) needs a host tier of at least one block for each size" \
	--host-mem 1M --nvme-path "$dir/tiny" --nvme-size 4M --cache-block-pages 2:7,4:1
[ -e "$dir/tiny" ] && fail "a refused start left the NVMe file"
# too many pages for a pool: the maximum, and exit 2 (was 1)
start_fails "--gpu-mem 1099511627776: 16777216 pages of 65536 bytes, more than a pool holds (16777215 pages: at most 1099511562240 bytes)" \
	--gpu-mem 1T
# a --profile that is not there (or not a profile): exit 2, it was 1
start_fails "ERR   kvmmd[" --telemetry shm --profile no-such-profile-kvmm
grep -qF -- "--profile no-such-profile-kvmm: unknown profile 'no-such-profile-kvmm'" "$dir/err" ||
	fail "--profile: $(cat "$dir/err")"
grep -qxF "kvmmd: cannot start: an option is wrong (above)" "$dir/err" ||
	fail "--profile: $(cat "$dir/err")"
printf 'not a profile\n' >"$dir/bad.profile"
start_fails "--profile $dir/bad.profile: " --telemetry shm --profile "$dir/bad.profile"
# a host tier smaller than one block is none: said at start (WARN), the
# cache runs on the GPU alone; without --cache-block-pages the block size
# comes later, and only a tier below the smallest block (2 pages) is
# known to be none at start
warns() { # expected-text option...
	local want=$1 pid
	shift
	"$b/kvmmd" --foreground --backend host --telemetry off \
		--socket "$sock" "$@" 2>"$dir/log" </dev/null &
	pid=$!
	for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
	[ -S "$sock" ] || fail "$*: did not start: $(cat "$dir/log")"
	kill $pid
	wait $pid
	grep "WARN" "$dir/log" | grep -qF -- "$want" ||
		fail "$*: no warning '$want' in: $(cat "$dir/log")"
}
warns "--host-mem 1048576 holds no block of --cache-block-pages 32 (2097152 bytes): no host tier" \
	--host-mem 1M --cache-block-pages 32
warns "--host-mem 65536 is smaller than the smallest block (2 pages, 131072 bytes): no host tier" \
	--host-mem 64K
# without --nvme-path a size whose share holds no block is a WARN too;
# a weight on a single size is taken (all of --host-mem is its share)
warns "--host-mem 1048576 holds no block (--cache-block-pages 4 in its share, 1/8: 131072 bytes, a block 262144 bytes): no host tier for that size" \
	--host-mem 1M --cache-block-pages 2:7,4:1
warns "--host-mem 1048576 holds no block of --cache-block-pages 32 (2097152 bytes): no host tier" \
	--host-mem 1M --cache-block-pages 32:5
echo ok
