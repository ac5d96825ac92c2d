#!/bin/bash
# A reload that fails after an early prefix open, end to end: one real
# kvmmd (--restore-mode reload, small GPU and host tiers, an NVMe-tier
# file large enough that nothing is dropped, restores slowed down so the
# replies come before them) serves three tinylm --prefix-segments runs of
# the same work.  Between the first (fills the cache) and the second, the
# payload of every occupied NVMe slot is corrupted (one byte flipped: its
# CRC32C fails), so each block the second run reloads from NVMe fails
# after its early reply; SEQ_WAIT_READY reports it and tinylm recomputes
# it like a hole and publishes it again.  Asserted:
#   - every run's tokens and logit checksums equal the private-memory
#     reference bitwise;
#   - run 2 opens early, its reload_failures >= 1, each recomputed (its
#     recomputed_blocks equal reload_failures: nothing else was missing);
#   - kvmmd's counters over run 2 (kvmmctl status --json): checksum_failures
#     and early_reload_failures both equal tinylm's reload_failures, and
#     the NVMe tier's hits are its NVMe reloads less those that failed;
#   - run 3 gets every block from the cache again: no failure, nothing
#     recomputed, as many blocks reused as run 2 was handed;
#   - kvmmctl status (text), kvmmctl metrics and --metrics-listen show the
#     same early counters as status --json.
# Skips (77) where the NVMe file cannot be opened with O_DIRECT (put it
# elsewhere with KVMM_NVME_TEST_DIR).
# timeout: 180
set -u
# shellcheck source=tests/lib/tinylm-daemon.sh
. "$(dirname "$0")/lib/tinylm-daemon.sh" "${KVMM_BUILD:-build}/kvmmctl"
"$B/kvmmd" --help 2>&1 | grep -q -- --nvme-path || { echo "skip: kvmmd has no NVMe tier"; exit 77; }

nvme=${KVMM_NVME_TEST_DIR:-$tmp}/kvmm-reload-failure-$$.slots
sock=$tmp/kvmm.sock
ctl() { "$B/kvmmctl" --socket "$sock" "$@"; }

work=(--dim 64 --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300
	--conversations 6 --turns 3 --system-prompts 2 --system-tokens 64
	--user-tokens 16 --gen-tokens 8)
"$bin" "${work[@]}" | grep '^tok' | sort >"$tmp/ref" || fail "reference run"
[ -s "$tmp/ref" ] || fail "empty reference"

rm -f "$nvme"
python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600))' "$nvme" 2>"$tmp/err" || {
	echo "skip: O_DIRECT not possible for $nvme ($(tail -n 1 "$tmp/err")); set KVMM_NVME_TEST_DIR to a disk-backed directory"
	exit 77
}
rm -f "$nvme"
trap 'cleanup; rm -f "$nvme"' EXIT
KVMMD_TEST_RESTORE_DELAY_MS=${DELAY_MS:-5} start_daemon "$sock" \
	--page-size 4096 --gpu-mem 512K --cache-gpu-blocks 4 --host-mem 96K \
	--nvme-path "$nvme" --nvme-size 4M --restore-mode reload \
	--metrics-listen 127.0.0.1:0

# run NAME: one tinylm client of the daemon; its stats line into
# $tmp/json-NAME, kvmmd's status before and after into
# $tmp/before-NAME, $tmp/after-NAME
run() {
	local name=$1
	ctl status --json >"$tmp/before-$name" || fail "$name: kvmmctl status"
	"$bin" "${work[@]}" --kv kvmm --socket "$sock" --prefix-segments \
		>"$tmp/kv-$name" 2>"$tmp/err-$name" ||
		fail "$name: tinylm: $(tail -n 5 "$tmp/err-$name")"
	kill -0 "$daemon" || fail "$name: kvmmd died"
	check_output "$name"
	ctl status --json >"$tmp/after-$name" || fail "$name: kvmmctl status"
}

run fill

# Flip a payload byte of every slot holding a block (the superblock says
# the slot stride; a slot's header has its hash at offset 32).
python3 - "$nvme" >"$tmp/corrupted" <<'PY' || fail "corrupting the NVMe slots"
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    sb = f.read(4096)
    stride, payload, nslots = struct.unpack_from("<QQQ", sb, 16)
    n = 0
    for i in range(nslots):
        off = 4096 + i * stride
        f.seek(off + 32)
        (h,) = struct.unpack("<Q", f.read(8))
        if h == 0:
            continue
        f.seek(off + 4096 + 777)
        b = f.read(1)[0] ^ 0x20
        f.seek(off + 4096 + 777)
        f.write(bytes([b]))
        n += 1
    f.flush()
    import os
    os.fsync(f.fileno())
print(n)
PY
echo "corrupted $(cat "$tmp/corrupted") NVMe slots ($(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cache"]["tiers"]["nvme"]["used_blocks"])' "$tmp/after-fill") blocks on the NVMe tier)"
[ "$(cat "$tmp/corrupted")" -gt 0 ] || fail "no block on the NVMe tier after the first run"

run failed
run again

ctl status >"$tmp/status.txt" || fail "kvmmctl status"
ctl status --json >"$tmp/status.json" || fail "kvmmctl status --json"
ctl metrics >"$tmp/metrics.prom" || fail "kvmmctl metrics"
"$bin" --kvmm-stats --socket "$sock" >"$tmp/kvmm-stats.json" ||
	fail "tinylm --kvmm-stats"
port=$(grep -o 'metrics: serving http://[^ ]*' "$tmp/kvmmd.log" | sed 's/.*:\([0-9]*\)\/metrics$/\1/')
[ -n "$port" ] || fail "no 'metrics: serving' line"

python3 - "$tmp" "$port" <<'PY' || fail "counters"
import json, re, sys, urllib.request
d, port = sys.argv[1], sys.argv[2]
def js(name):
    return json.load(open("%s/%s" % (d, name)))
def delta(name, key, tier=None):
    a, b = js("before-" + name)["cache"], js("after-" + name)["cache"]
    if tier:
        return b["tiers"][tier][key] - a["tiers"][tier][key]
    return b[key] - a[key]
fill, failed, again = js("json-fill"), js("json-failed"), js("json-again")

# the fill: every block reused came from the cache, intact
assert fill["reload_failures"] == 0 and fill["recomputed_blocks"] == 0, fill
assert delta("fill", "checksum_failures") == 0
assert fill["restored_nvme"] > 0, fill

# the run after the corruption
n = failed["reload_failures"]
assert failed["early_opens"] > 0, failed
assert n >= 1, failed
assert failed["recomputed_blocks"] == n, failed
assert failed["restored_nvme"] >= n, failed
assert delta("failed", "checksum_failures") == n, (n, delta("failed", "checksum_failures"))
assert delta("failed", "early_reload_failures") == n
assert delta("failed", "migrations_failed") == 0
assert delta("failed", "early_opens") == failed["early_opens"]
assert delta("failed", "early_reloads") >= n
# a reload that failed is not a hit (the others landed)
assert delta("failed", "hits", "nvme") == failed["restored_nvme"] - n, \
    (delta("failed", "hits", "nvme"), failed["restored_nvme"], n)

# the third run: the recomputed blocks were published again
assert again["reload_failures"] == 0 and again["recomputed_blocks"] == 0, again
assert delta("again", "checksum_failures") == 0
assert delta("again", "early_reload_failures") == 0
reused = lambda r: r["shared_blocks"] + r["restored_host"] + r["restored_nvme"]
assert reused(again) == reused(failed), (again, failed)
assert again["prefix_blocks"] == failed["prefix_blocks"], (again, failed)

# every view of the early counters agrees
c = js("status.json")["cache"]
want = {k: c[k] for k in ("early_opens", "early_reloads",
                          "early_reload_failures", "checksum_failures")}
assert want["early_reload_failures"] == n, want
text = open(d + "/status.txt").read()
line = "early opens  %d replied while reloading, %d blocks handed out loading, %d reloads failed after the reply\n" % (
    want["early_opens"], want["early_reloads"], want["early_reload_failures"])
assert line in text, (line, text)
ks = js("kvmm-stats.json")  # tinylm --kvmm-stats, one JSON line
for k, v in want.items():
    assert ks[k] == v, ("tinylm --kvmm-stats", k, ks[k], v)
http = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10).read().decode()
for src, prom in (("kvmmctl metrics", open(d + "/metrics.prom").read()), ("http", http)):
    for k, v in want.items():
        m = re.search(r"^kvmm_cache_%s_total (\d+)$" % k, prom, re.M)
        assert m and int(m.group(1)) == v, (src, k, v, m and m.group(0))
print("run 2: NVMe tier: %d blocks moved up by a publish of the same content, %d dropped"
      % (delta("failed", "promotions_by_publish", "nvme"), delta("failed", "drops", "nvme")))
print("run 2: %d early opens, %d NVMe reloads of which %d failed and were recomputed (checksum_failures +%d, early_reload_failures +%d, NVMe hits +%d); run 3: %d blocks reused, none recomputed"
      % (failed["early_opens"], failed["restored_nvme"], n,
         delta("failed", "checksum_failures"),
         delta("failed", "early_reload_failures"),
         delta("failed", "hits", "nvme"), reused(again)))
PY
echo "ok: reloads failed after early replies were recomputed, bitwise identical"
