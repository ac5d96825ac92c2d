#!/bin/bash
# An NVMe tier that stops kvmmd's start (Documentation/admin.md, kvmmd
# options, "exit codes"; tiers.md, NVMe tier): a value the operator must
# change exits 2 with its line and "kvmmd: cannot start: an option is
# wrong (above)", anything else exits 1; either way the
# --nvme-path file this start made is gone, and a file that was there
# before keeps its size and bytes.  Until 7 December each case exited 1,
# and the file the start made stayed behind, preallocated to --nvme-size.
#   - a --nvme-size that holds no slot of the named size (one size);
#   - a partition of the file, by the sizes' weights, that holds no slot
#     (two sizes, the second's partition and the first's);
#   - a file that existed, too small for a slot of the size, with and
#     without an --nvme-size that would have grown it, and one whose
#     second partition is too small (the first was formatted): untouched;
#   - a file system without O_DIRECT (ramfs, in a mount namespace of its
#     own; root): a new file, with no size named, one and two named;
#     an existing file untouched;
#   - not refused: a full disk as the tier grows the file (a 2 MiB
#     tmpfs, where the kernel gives tmpfs O_DIRECT), one size named and
#     two: kvmmd starts without the tier (until 7 December: exit 1), its
#     file gone at the stop; a file that was there kept; once the disk
#     clears both partitions join and the file stays;
#   - a --pid-file that cannot be written after all that (its directory
#     missing: exit 2, 1 until 7 December), the file gone.
set -u
b=${KVMM_BUILD:-build}
[ -x "$b/kvmmd" ] || { echo "skip: $b/kvmmd not built"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-nvmeref-XXXXXX")
# the NVMe tier needs O_DIRECT: not on tmpfs before Linux 6.6
ndir=$(mktemp -d "${KVMM_NVME_TEST_DIR:-/var/tmp}/kvmm-nvmeref-XXXXXX")
trap 'rm -rf "$dir" "$ndir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sock=$dir/k.sock

# refused: expected-exit expected-line file option...  The start must
# be refused with that exit, the line in stderr, no socket left, and
# the file gone.
refused() {
	local want_rc=$1 want=$2 f=$3 rc
	shift 3
	timeout 20 "$b/kvmmd" --foreground --backend host --telemetry off \
		--socket "$sock" "$@" 2>"$dir/err" </dev/null
	rc=$?
	[ $rc = "$want_rc" ] ||
		fail "$*: exit $rc, expected $want_rc ($(cat "$dir/err"))"
	grep -qF -- "$want" "$dir/err" || fail "$*: no '$want' in: $(cat "$dir/err")"
	if [ "$want_rc" = 2 ]; then
		grep -qxF "kvmmd: cannot start: an option is wrong (above)" "$dir/err" ||
			fail "$*: no 'an option is wrong' line: $(cat "$dir/err")"
	fi
	[ -e "$sock" ] && fail "$*: left a socket"
	[ -e "$f" ] && fail "$*: a refused start left the NVMe file it made ($(stat -c %s "$f") bytes)"
	return 0
}

# kept: file expected-size expected-md5 what: a file that was there
kept() {
	[ -e "$1" ] || fail "$4: the file that was there is gone"
	[ "$(stat -c %s "$1")" = "$2" ] || fail "$4: its size changed: $(stat -c %s "$1"), was $2"
	[ "$(md5sum <"$1")" = "$3" ] || fail "$4: its bytes changed"
}
# refused_kept WHAT FILE SIZE ARGS...: kvmmd with ARGS over FILE, a file
# of SIZE bytes that was there, exits 2 and leaves it as it was
refused_kept() {
	local what=$1 f=$2 size=$3 sum rc
	shift 3
	sum=$(md5sum <"$f")
	timeout 20 "$b/kvmmd" --foreground --backend host --telemetry off \
		--socket "$sock" "$@" 2>"$dir/err" </dev/null
	rc=$?
	[ $rc = 2 ] || fail "$what: exit $rc ($(cat "$dir/err"))"
	kept "$f" "$size" "$sum" "$what"
}

# the file system under $ndir must take O_DIRECT (else every case here
# is the no-O_DIRECT one)
if ! dd if=/dev/zero of="$ndir/probe" bs=4096 count=1 oflag=direct 2>/dev/null; then
	echo "skip: no O_DIRECT in ${KVMM_NVME_TEST_DIR:-/var/tmp}"
	exit 77
fi
rm -f "$ndir/probe"

# a size that holds no slot: 1 MiB, a block of 32 pages 2 MiB + its 4 KiB
# header (the tier's line, then the cache's)
refused 2 "tier_nvme: $ndir/a: 1048576 bytes hold no slot of 2101248 bytes" "$ndir/a" \
	--host-mem 16M --nvme-path "$ndir/a" --nvme-size 1M --cache-block-pages 32
grep -qF "cache: the NVMe tier $ndir/a cannot open at start: Invalid argument" "$dir/err" ||
	fail "no line from the cache: $(cat "$dir/err")"
# two sizes, equal weights: each partition 2 MiB, no slot of 32 pages;
# the second size's partition, then the first's
refused 2 "tier_nvme: $ndir/b (partition 1 of 2): 2097152 bytes hold no slot of 2101248 bytes" "$ndir/b" \
	--host-mem 8M --nvme-path "$ndir/b" --nvme-size 4M --cache-block-pages 2,32
refused 2 "tier_nvme: $ndir/b (partition 0 of 2): 2097152 bytes hold no slot of 2101248 bytes" "$ndir/b" \
	--host-mem 8M --nvme-path "$ndir/b" --nvme-size 4M --cache-block-pages 32,2
# weights: 2 pages 7/8 of the file, 4 pages 1/8 (128 KiB, no slot of
# 256 KiB); with weights the partition is named the same way
refused 2 "(partition 1 of 2): 131072 bytes hold no slot of 266240 bytes" "$ndir/b" \
	--host-mem 8M --nvme-path "$ndir/b" --nvme-size 1M --cache-block-pages 2:7,4:1

# a file that was there stays as it was: a tier of 1 MiB a run made (no
# --nvme-size: its own size), and a file of zeros that a --nvme-size of
# 1 MiB would have grown before the tier found no slot in it
"$b/kvmmd" --foreground --backend host --telemetry off --socket "$sock" \
	--host-mem 16M --nvme-path "$ndir/old" --nvme-size 1M \
	--cache-block-pages 2 2>"$dir/log" </dev/null &
pid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "the 1 MiB tier did not start: $(cat "$dir/log")"
kill $pid
wait $pid
refused_kept "an existing tier too small" "$ndir/old" 1048576 \
	--host-mem 16M --nvme-path "$ndir/old" --cache-block-pages 32
head -c 4096 /dev/zero >"$ndir/zeros"
refused_kept "an existing file, --nvme-size too small" "$ndir/zeros" 4096 \
	--host-mem 16M --nvme-path "$ndir/zeros" --nvme-size 1M \
	--cache-block-pages 32
# two sizes over a file that was there, the second's partition too small:
# every partition is checked before the first opens, which formatted its
# own (a superblock written over the zeros) before the second refused
head -c 4194304 /dev/zero >"$ndir/zeros"
refused_kept "an existing file, a partition too small" "$ndir/zeros" 4194304 \
	--host-mem 8M --nvme-path "$ndir/zeros" --cache-block-pages 2,32
grep -qF "tier_nvme: $ndir/zeros (partition 1 of 2): 2097152 bytes hold no slot" "$dir/err" ||
	fail "an existing file, a partition too small: $(cat "$dir/err")"

# the cases that need file systems of their own: ramfs (no O_DIRECT) and
# a small tmpfs (a full disk), in a mount namespace of this test's
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null ||
	! unshare -m true 2>/dev/null; then
	echo "ok (the ramfs and full-disk cases skipped: they need root and unshare -m)"
	exit 0
fi
mkdir "$dir/ram" "$dir/small"
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m bash -c '
	set -u
	b=$1 dir=$2
	sock=$dir/k.sock
	fail() { echo "FAIL: $*"; exit 1; }
	'"$(declare -f refused kept)"'
	mount -t ramfs none "$dir/ram" || { echo "no ramfs"; exit 0; }
	why="put the NVMe tier on a disk-backed file system or a block device"
	refused 2 "tier_nvme: $dir/ram/a does not support O_DIRECT" "$dir/ram/a" \
		--host-mem 16M --nvme-path "$dir/ram/a" --nvme-size 4M
	grep -qF "$why" "$dir/err" || fail "no O_DIRECT: $(cat "$dir/err")"
	refused 2 "tier_nvme: $dir/ram/a does not support O_DIRECT" "$dir/ram/a" \
		--host-mem 16M --nvme-path "$dir/ram/a" --nvme-size 4M --cache-block-pages 4
	refused 2 "tier_nvme: $dir/ram/a does not support O_DIRECT" "$dir/ram/a" \
		--host-mem 16M --nvme-path "$dir/ram/a" --nvme-size 4M --cache-block-pages 2,4
	head -c 8192 /dev/urandom >"$dir/ram/old"
	refused_kept "an existing file without O_DIRECT" "$dir/ram/old" 8192 \
		--host-mem 16M --nvme-path "$dir/ram/old" --nvme-size 4M \
		--cache-block-pages 4
	echo "no O_DIRECT (ramfs): 4 cases passed"

	# a full disk as the tier grows the file: waited out, as at the
	# claim (until 7 December the start stopped, exit 1): kvmmd starts,
	# the tier out and waiting, and joins once there is room
	mount -t tmpfs -o size=2M none "$dir/small" || fail "mount tmpfs"
	if ! dd if=/dev/zero of="$dir/small/probe" bs=4096 count=1 oflag=direct 2>/dev/null; then
		echo "full disk: skipped (no O_DIRECT on tmpfs before Linux 6.6)"
		exit 0
	fi
	rm -f "$dir/small/probe"
	# starts f option...: kvmmd started (its pid in $pid, its log in
	# $dir/err) with the NVMe tier waiting on a full disk
	starts() {
		local f=$1 i
		shift
		KVMMD_TEST_CACHE_RETRY_MS=100 "$b/kvmmd" --foreground \
			--backend host --telemetry off --socket "$sock" \
			--host-mem 16M --nvme-path "$f" "$@" 2>"$dir/err" </dev/null &
		pid=$!
		for i in $(seq 400); do [ -S "$sock" ] && break; sleep 0.05; done
		[ -S "$sock" ] || fail "full disk, $*: no start: $(cat "$dir/err")"
		grep -qF "tier_nvme: sizing $f: No space left on device" "$dir/err" ||
			fail "full disk, $*: no sizing line: $(cat "$dir/err")"
		grep -qF "cannot open (attempt 1): No space left on device; the cache runs without it and tries again" "$dir/err" ||
			fail "full disk, $*: no line says it waits: $(cat "$dir/err")"
		"$b/kvmmctl" --socket "$sock" status >"$dir/status" ||
			fail "full disk, $*: kvmmctl status"
		grep -q "^tier nvme    WAITING: No space left on device" "$dir/status" ||
			fail "full disk, $*: status: $(cat "$dir/status")"
	}
	stops() {
		kill $pid
		wait $pid || fail "full disk: exit $? after SIGTERM: $(cat "$dir/err")"
	}
	for sizes in 4 2,4; do
		starts "$dir/small/a" --nvme-size 8M --cache-block-pages $sizes
		[ -f "$dir/small/a" ] || fail "full disk, $sizes: no file claimed"
		stops
		# never written: the file the claim made goes at the stop
		[ -e "$dir/small/a" ] && fail "full disk, $sizes: the stop left the file the claim made"
	done
	# a file that was there: as it was (a preallocation that failed
	# is cut back), the stop too
	head -c 4096 /dev/zero >"$dir/small/old"
	sum=$(md5sum <"$dir/small/old")
	starts "$dir/small/old" --nvme-size 8M --cache-block-pages 4
	stops
	kept "$dir/small/old" 4096 "$sum" "full disk, a file that was there"
	rm -f "$dir/small/old"
	# the disk clears: the tier joins, and its file stays at the stop
	head -c 1572864 /dev/zero >"$dir/small/filler"
	starts "$dir/small/a" --nvme-size 1M --cache-block-pages 2,4
	rm "$dir/small/filler"
	for i in $(seq 200); do
		[ "$(grep -c "joined the cache" "$dir/err")" = 2 ] && break
		sleep 0.05
	done
	[ "$(grep -c "joined the cache" "$dir/err")" = 2 ] ||
		fail "full disk cleared: the partitions did not join: $(cat "$dir/err")"
	"$b/kvmmctl" --socket "$sock" status >"$dir/status" ||
		fail "full disk cleared: kvmmctl status"
	[ "$(grep -c "^  tier nvme    joined at attempt" "$dir/status")" = 2 ] ||
		fail "full disk cleared: status: $(cat "$dir/status")"
	stops
	[ "$(stat -c %s "$dir/small/a" 2>/dev/null)" = 1048576 ] ||
		fail "full disk cleared: the tier file after the stop: $(ls -l "$dir/small")"
	echo "full disk (tmpfs of 2 MiB): waited out, 4 cases passed"
	exit 0
' inner "$b" "$dir" || exit 1

# a start refused after the NVMe tier opened: its --pid-file cannot be
# written (exit 2: no such directory), the file it made and formatted gone
refused 2 "kvmmd: --pid-file $dir/nodir/pid: No such file or directory" "$ndir/c" \
	--host-mem 16M --nvme-path "$ndir/c" --nvme-size 4M --cache-block-pages 4 \
	--pid-file "$dir/nodir/pid"
echo ok
