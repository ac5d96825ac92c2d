#!/bin/bash
# kvmmd's start-up checks an operator relies on (Documentation/admin.md,
# Socket and permissions, Config file; tiers.md, NVMe tier):
#   - --socket PATH at a file that is not a socket: refused, exit 2, the
#     file kept (it was deleted and replaced by the socket);
#   - a socket path whose directories are missing: all of them created
#     (only one level was: bind failed, naming the temporary file);
#   - --socket-group: the socket's group;
#   - --nvme-path at a file that holds something else than a kvmm tier:
#     refused, exit 2, the file untouched (it was truncated and
#     formatted); --nvme-format formats it; a file of zeros is taken;
#   - --nvme-path at a kvmm tier file without --nvme-size: its own size;
#   - admin.md's example config starts (it did not: a tenant host limit
#     with no --host-mem), and a check made after parsing names the
#     config file's line.
set -u
b=${KVMM_BUILD:-build}
[ -x "$b/kvmmd" ] || { echo "skip: $b/kvmmd not built"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-startchk-XXXXXX")
# the NVMe tier needs O_DIRECT: not on tmpfs
ndir=$(mktemp -d "${KVMM_NVME_TEST_DIR:-/var/tmp}/kvmm-startchk-XXXXXX")
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$dir" "$ndir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null; exit 1; }
doc=$(dirname "$0")/../Documentation/admin.md

kvmmd() { timeout 20 "$b/kvmmd" --foreground --backend host --telemetry off "$@" </dev/null; }
# start in the background, wait for the socket; $pid
start() { # socket option...
	local sock=$1
	shift
	"$b/kvmmd" --foreground --backend host --telemetry off --socket "$sock" \
		"$@" 2>"$dir/log" </dev/null &
	pid=$!
	for _ in $(seq 200); do [ -S "$sock" ] && return 0; sleep 0.05; done
	fail "$*: no socket at $sock"
}
stop() {
	kill $pid
	wait $pid
	pid=
}

# --socket at a file that is not a socket
echo precious >"$dir/x.conf"
kvmmd --socket "$dir/x.conf" 2>"$dir/err"
rc=$?
[ $rc = 2 ] || fail "--socket at a file: exit $rc ($(cat "$dir/err"))"
grep -qxF "kvmmd: --socket $dir/x.conf: exists and is not a socket" "$dir/err" ||
	fail "--socket at a file: $(cat "$dir/err")"
[ "$(cat "$dir/x.conf")" = precious ] || fail "the file at --socket is gone"
mkdir "$dir/sockdir"
kvmmd --socket "$dir/sockdir" 2>"$dir/err"
[ $? = 2 ] || fail "--socket at a directory accepted"
[ -d "$dir/sockdir" ] || fail "the directory at --socket is gone"

# every missing directory of the socket path
start "$dir/a/b/c/k.sock"
[ "$(stat -c %a "$dir/a/b")" = 755 ] || fail "made dir mode $(stat -c %a "$dir/a/b")"
grep -qF "created $dir/a/b/c" "$dir/log" || fail "no 'created' line"
stop
[ -e "$dir/a/b/c/k.sock" ] && fail "socket left after the stop"

# --socket-group: as root, a group that is not root's; else our own
grp=$(id -gn)
if [ "$(id -u)" = 0 ]; then
	for g in daemon nogroup users; do
		getent group $g >/dev/null && { grp=$g; break; }
	done
fi
start "$dir/g.sock" --socket-group "$grp"
[ "$(stat -c %G "$dir/g.sock")" = "$grp" ] || fail "socket group $(stat -c %G "$dir/g.sock"), expected $grp"
[ "$(stat -c %a "$dir/g.sock")" = 660 ] || fail "socket mode $(stat -c %a "$dir/g.sock")"
stop
gid=$(getent group "$grp" | cut -d: -f3)
printf 'socket-group %s\n' "$gid" >"$dir/g.conf"
start "$dir/g.sock" --config "$dir/g.conf"
[ "$(stat -c %g "$dir/g.sock")" = "$gid" ] || fail "config socket-group $gid: $(stat -c %g "$dir/g.sock")"
stop

# an NVMe file that is not a kvmm tier
head -c 20M /dev/urandom >"$ndir/data"
cp "$ndir/data" "$dir/data.orig"
for cbp in "" "--cache-block-pages 4"; do
	# shellcheck disable=SC2086
	kvmmd --socket "$dir/n.sock" --host-mem 16M --nvme-path "$ndir/data" \
		--nvme-size 16M $cbp 2>"$dir/err"
	rc=$?
	[ $rc = 2 ] || fail "foreign NVMe file ($cbp): exit $rc ($(cat "$dir/err"))"
	grep -qF "tier_nvme: $ndir/data holds something that is not a kvmm NVMe tier (20971520 bytes, no kvmm superblock): not formatting it; give --nvme-format" "$dir/err" ||
		fail "foreign NVMe file: $(cat "$dir/err")"
	cmp -s "$ndir/data" "$dir/data.orig" || fail "foreign NVMe file changed ($cbp)"
	[ -e "$dir/n.sock" ] && fail "foreign NVMe file: a socket"
done
start "$dir/n.sock" --host-mem 16M --nvme-path "$ndir/data" --nvme-size 16M \
	--cache-block-pages 4 --nvme-format
grep -qF "formatted" "$dir/log" || fail "--nvme-format did not format"
stop
[ "$(stat -c %s "$ndir/data")" = 16777216 ] || fail "formatted size $(stat -c %s "$ndir/data")"
# now a kvmm tier: taken without --nvme-format, its slots kept
start "$dir/n.sock" --host-mem 16M --nvme-path "$ndir/data" --nvme-size 16M \
	--cache-block-pages 4
grep -qF "recovered 0 of" "$dir/log" || fail "kvmm tier not recovered"
stop
# a tier file that exists opens at its own size without --nvme-size (it
# was exit 2, "is a file: give --nvme-size"); a smaller size cuts it
# (63 slots of 4 KiB + 256 KiB in 16 MiB, 31 in 8 MiB)
start "$dir/n.sock" --host-mem 16M --nvme-path "$ndir/data" --cache-block-pages 4
grep -qF "recovered 0 of 63 slots" "$dir/log" || fail "tier at its own size: $(cat "$dir/log")"
stop
[ "$(stat -c %s "$ndir/data")" = 16777216 ] || fail "size without --nvme-size $(stat -c %s "$ndir/data")"
start "$dir/n.sock" --host-mem 16M --nvme-path "$ndir/data" --nvme-size 8M \
	--cache-block-pages 4
grep -qF "shrank from 63 to 31 slots: 0 cached blocks past the new end are lost" "$dir/log" ||
	fail "shrink line: $(cat "$dir/log")"
stop
[ "$(stat -c %s "$ndir/data")" = 8388608 ] || fail "shrunk size $(stat -c %s "$ndir/data")"
# zeros (a file made and never formatted) are no data
truncate -s 16M "$ndir/zero"
start "$dir/n.sock" --host-mem 16M --nvme-path "$ndir/zero" --nvme-size 16M \
	--cache-block-pages 4
stop

# admin.md's example config, as printed there (the backend and the host
# tier's size made to fit a test machine: the command line wins)
sed -n '/^# \/etc\/kvmm\/kvmmd.conf$/,/^```$/p' "$doc" | sed '$d' >"$dir/example.conf"
grep -q '^gpu-mem' "$dir/example.conf" || fail "no example config in $doc"
start "$dir/e.sock" --config "$dir/example.conf" --host-mem 16M
"$b/kvmmctl" --socket "$dir/e.sock" status >"$dir/status" || fail "status"
stop

# checks made after parsing name the file's line
printf 'backend host\n# a host limit, no host tier\ntenant-limit 1001=gpu:10,host:20\n' >"$dir/t.conf"
kvmmd --socket "$dir/t.sock" --config "$dir/t.conf" 2>"$dir/err"
rc=$?
[ $rc = 2 ] || fail "tenant-limit without host-mem: exit $rc"
grep -qxF "kvmmd: $dir/t.conf:3: --tenant-limit 1001: there is no host tier (--host-mem) to limit" "$dir/err" ||
	fail "tenant-limit line: $(cat "$dir/err")"
printf '\nnvme-size 1G\n' >"$dir/z.conf"
kvmmd --socket "$dir/t.sock" --config "$dir/z.conf" 2>"$dir/err"
grep -qxF "kvmmd: $dir/z.conf:2: --nvme-size without --nvme-path: there is no NVMe tier to size" "$dir/err" ||
	fail "nvme-size line: $(cat "$dir/err")"
# ... and not on the command line
kvmmd --socket "$dir/t.sock" --nvme-size 1G 2>"$dir/err"
grep -qxF "kvmmd: --nvme-size without --nvme-path: there is no NVMe tier to size" "$dir/err" ||
	fail "nvme-size: $(cat "$dir/err")"
echo ok
