# SPDX-License-Identifier: MIT
"""restore: what an engine does with blocks in a lower tier, through the
binding, against a kvmmd whose GPU tier holds 2 blocks (--cache-gpu-blocks
2, a host tier of 4, --restore-mode reload, --pin-quota 8): three blocks
published, one goes down to host memory; query_prefix() says where each
is, pins say the same tier (pin(), pin_many(), query_tier_string()), a TTL
pin's expiry is the daemon's CLOCK_MONOTONIC (time.monotonic_ns()) plus
its ttl_ns and its record ends by itself, a priority-only and a demotable
pin replace a record; an early prefix open follows the restore plan the
query predicts (reloaded-host for the host block), wait_ready() reports
nothing failed, and every layer's K and V bytes are the ones written.
Split from tests/python-kvmm.py, which runs it."""
import errno
import time

from kvmm_test import (kvmm, Daemon, HASHES, PPB, REGION, TPB, check,
                       check_eq, fail, pattern, raises)

ARGS = ("--cache-gpu-blocks", "2", "--host-mem", "1M", "--cache-policy",
        "lru", "--restore-mode", "reload", "--pin-quota", "8")
NB = len(HASHES)
# the action an open takes for a block where query_prefix() found it
ACTION = {"gpu": "gpu-shared", "host": "reloaded-host",
          "nvme": "reloaded-nvme"}


def settled(c, r):
    """query_prefix() once no block is moving between tiers."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        tiers = r.query_prefix(HASHES)
        if "moving" not in tiers and len(tiers) == NB:
            return tiers
        time.sleep(0.02)
    fail("blocks still moving or gone: %r" % tiers)


def check_pins(c, tiers):
    hb = tiers.index("host")
    gb = tiers.index("gpu")
    p = c.pin(HASHES[hb])
    check_eq((p.tier, kvmm.query_tier_string(p.tier), p.pins, p.pin_quota,
              p.expires_ns), (kvmm.QUERY_HOST, "host", 1, 8, 0),
             "a plain pin of the host block")
    # a TTL pin ends at the daemon's CLOCK_MONOTONIC + ttl_ns
    ttl = 5 * 10**9
    t0 = time.monotonic_ns()
    p = c.pin(HASHES[gb], ttl_ns=ttl)
    t1 = time.monotonic_ns()
    check_eq((p.tier, p.pins), (kvmm.QUERY_GPU, 2), "a TTL pin")
    check(t0 + ttl <= p.expires_ns <= t1 + ttl,
          "expires_ns %d not within [%d, %d]" % (p.expires_ns, t0 + ttl,
                                                 t1 + ttl))
    # pinning a hash again replaces its record: the count stays
    p = c.pin(HASHES[gb], priority=5, priority_only=True)
    check_eq((p.pins, p.expires_ns), (2, 0), "a priority-only pin")
    p = c.pin(HASHES[gb], ttl_ns=ttl, demote=True)
    check_eq((p.tier, p.pins), (kvmm.QUERY_GPU, 2), "a demotable TTL pin")
    want = [{"gpu": kvmm.QUERY_GPU, "host": kvmm.QUERY_HOST}[t]
            for t in tiers]
    check_eq(c.pin_many(HASHES), want, "pin_many: each block's tier")
    for h in HASHES:
        c.unpin(h)
    # a TTL pin's record ends by itself: a pin after it counts one
    p = c.pin(HASHES[gb], ttl_ns=300 * 10**6)
    check_eq(p.pins, 1, "a short TTL pin")
    deadline = time.monotonic() + 10
    while True:
        if time.monotonic_ns() > p.expires_ns:
            n = c.pin(HASHES[hb]).pins  # (again: replaces itself)
            if n == 1:
                break
        if time.monotonic() > deadline:
            fail("the TTL pin still counts 10 s later")
        time.sleep(0.05)
    c.unpin(HASHES[hb])
    raises(kvmm.KvmmError, errno.ENOENT, c.unpin, HASHES[gb])


def check_open(c, r, tiers):
    before = c.tier_stats()
    p = r.open_prefix(HASHES, early=True)
    check_eq(p.actions, [ACTION[t] for t in tiers],
             "the restore plan is what query_prefix() said")
    check_eq(p.action_codes, [{"gpu": kvmm.BLOCK_GPU_SHARED,
                               "host": kvmm.BLOCK_RELOADED_HOST}[t]
                              for t in tiers], "action codes")
    check_eq((p.nr_blocks, p.shared, p.reloaded_host, p.reloaded_nvme,
              p.recompute), (NB, tiers.count("gpu"), tiers.count("host"),
                             0, 0), "the plan's counts")
    rd = p.seq.wait_ready(NB)
    check_eq((rd.failed, rd.pending), ([], 0), "every reload landed")
    check_eq(len(p.seq), NB * TPB, "the prefix's length")
    check_eq([p.seq.block_readonly(b) for b in range(NB)], [True] * NB,
             "shared and reloaded blocks are read-only")
    for layer in range(REGION["layers"]):
        check(p.seq.k_view(layer)[:] == pattern(2 * layer, NB * TPB * 256),
              "layer %d K restored byte for byte" % layer)
        check(p.seq.v_view(layer)[:] == pattern(2 * layer + 1,
                                                NB * TPB * 256),
              "layer %d V restored byte for byte" % layer)
    after = c.tier_stats()
    check_eq(after["tiers"][1]["hits"] - before["tiers"][1]["hits"],
             tiers.count("host"), "host tier hits")
    check_eq(after["prefix_blocks_hit"] - before["prefix_blocks_hit"], NB,
             "prefix blocks hit")
    p.seq.close()


def case_restore():
    with Daemon(*ARGS) as d:
        c = kvmm.Connection(d.sock, "py-restore", map_ahead_blocks=0)
        r = c.region(**REGION)
        with r.open_seq() as s:
            s.extend(NB * TPB)
            for layer in range(REGION["layers"]):
                s.k_view(layer)[:] = pattern(2 * layer, NB * TPB * 256)
                s.v_view(layer)[:] = pattern(2 * layer + 1, NB * TPB * 256)
            check_eq(s.publish(0, HASHES), NB, "published")
        tiers = settled(c, r)
        check_eq(sorted(tiers), ["gpu", "gpu", "host"],
                 "2 blocks on the GPU tier, 1 in host memory")
        ts = c.tier_stats()
        check_eq([t["used_blocks"] for t in ts["tiers"]], [2, 1, 0],
                 "tier_stats()'s blocks by tier")
        check_eq(ts["tiers"][1]["block_bytes"], PPB * 64 * 1024,
                 "a host block's bytes")
        check_pins(c, tiers)
        check_open(c, r, tiers)
        # again, as the cache is now (the reloaded block may stay above)
        check_open(c, r, settled(c, r))
        r.destroy()
        c.close()
        d.wait_idle()
