# SPDX-License-Identifier: MIT
"""The binding's calls one by one: errors (each C error its errno, each
bad argument its TypeError/ValueError), layout (the mirrored structs
against the C compiler's), stats, tierstats, olddaemon (against kvmmd
playing ABI 1.18) and example (Documentation/python.md's example).
Split from tests/python-kvmm.py, which runs them."""
import ast
import errno
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time

from kvmm_test import (kvmm, BUILD, Daemon, HASHES, PPB, REGION, SRC, TPB,
                       check, check_eq, fail, published_by_writer, raises,
                       writer_done)


class Three:
    def __index__(self):
        return 3


def s2_len_after_index(r):
    with r.open_seq() as t:
        t.extend(Three())
        return len(t)


# ---- errors ----------------------------------------------------------------

def case_errors():
    with Daemon() as d:
        c = kvmm.Connection(d.sock, "py-errors", map_ahead_blocks=0)

        def still_works():
            c.nop()
            c.nop(via_socket=True)
            with r.open_seq() as t:
                t.extend(TPB + 1)
                v = t.v_view(1)
                v[-1] = 0xee
                check_eq(t.v_view(1)[(TPB + 1) * 256 - 1], 0xee,
                         "write after an error")

        # C errors: each raises its errno, the connection goes on
        e = raises(kvmm.KvmmError, errno.EINVAL, c.region, layers=0,
                   kv_heads=2, head_dim=64, dtype_bytes=2, max_seqs=4,
                   max_tokens=2048)
        check(isinstance(e, OSError), "KvmmError is an OSError")
        check_eq(e.function, "kvmm_region_create", "function")
        check_eq(e.strerror, kvmm.strerror(errno.EINVAL), "strerror text")
        r = c.region(**REGION)
        still_works()
        s = r.open_seq()
        e = raises(kvmm.KvmmError, errno.EINVAL, s.truncate, 1)
        check_eq(str(e), "[Errno %d] kvmm_seq_truncate: %s" % (
            errno.EINVAL, os.strerror(errno.EINVAL)), "the message")
        # extend(n) grows to n: a length it cannot grow to says why (a
        # bare EINVAL sent extend(len(tokens) - len(seq)) callers looking
        # elsewhere), a ValueError and still the KvmmError EINVAL
        e = raises(kvmm.LengthError, errno.EINVAL, s.extend, 2049)
        check(isinstance(e, ValueError) and isinstance(e, kvmm.KvmmError),
              "LengthError is a ValueError and a KvmmError")
        check_eq(str(e), "extend(n) grows to n tokens: 2049 is more than "
                 "the region's max_tokens (2048)", "past max_tokens")
        still_works()
        s.extend(TPB)
        e = raises(ValueError, errno.EINVAL, s.extend, 10)  # shrink
        check_eq(str(e), "extend(n) grows to n tokens; the sequence already "
                 "has %d (n = 10: truncate() shortens)" % TPB, "shrink")
        check_eq(e.function, "kvmm_seq_extend", "function")
        check_eq(len(s), TPB, "length after a refused extend")
        s.extend(TPB)  # the same length: nothing to do, no error
        raises(kvmm.KvmmError, errno.EINVAL, s.truncate, TPB + 1)
        raises(kvmm.KvmmError, errno.ENODATA, s.block_pages, 3)  # unbacked
        raises(kvmm.KvmmError, errno.EINVAL, s.block_pages, 8)  # past max
        # publishing a block that is not full is refused
        raises(kvmm.KvmmError, errno.EINVAL, s.publish, 1, [0x77])
        raises(kvmm.KvmmError, errno.EINVAL, s.publish, 0, [0])  # hash 0
        raises(kvmm.KvmmError, errno.EINVAL, s.publish, 0, [])
        raises(kvmm.KvmmError, errno.EINVAL, r.open_prefix, [])
        raises(kvmm.KvmmError, errno.ENOENT, c.pin, 0x4242)
        raises(kvmm.KvmmError, errno.ENOENT, c.unpin, 0x4242)
        raises(kvmm.KvmmError, errno.EINVAL, c.pin, 0)
        still_works()
        # a bad sequence id
        bad = r.seq(99)
        raises(kvmm.KvmmError, errno.EINVAL, bad.extend, 10)
        raises(kvmm.KvmmError, errno.EINVAL, len, bad)
        raises(kvmm.KvmmError, errno.EINVAL, bad.k_ptr, 0)
        raises(kvmm.KvmmError, errno.EINVAL, bad.close)
        raises(kvmm.KvmmError, errno.EINVAL, r.seq_extend, 3, 10)  # not open
        raises(kvmm.KvmmError, errno.EINVAL, s.v_ptr, 2)  # bad layer
        still_works()
        # a publish, a pin on it, its info
        check_eq(s.publish(0, [0x9999]), 1, "published")
        pin = c.pin(0x9999, ttl_ns=10**9, priority=3)
        check_eq((pin.tier, pin.pins), (0, 1), "pin tier and count")
        check(pin.pin_quota >= 1 and pin.expires_ns > 0, "pin quota, expiry")
        raises(kvmm.KvmmError, errno.ERANGE, c.pin, 0x9999, priority=200)
        c.unpin(0x9999)
        raises(kvmm.KvmmError, errno.ENOENT, c.unpin, 0x9999)
        # an unknown prefix: a sequence with no blocks
        p = r.open_prefix([0xabc, 0xdef])
        check_eq((p.nr_blocks, len(p.seq)), (0, 0), "empty prefix")
        p.seq.close()
        # use after close: libkvmm's EINVAL, views released
        view = s.k_view(0)
        view[0] = 1
        s.close()
        raises(ValueError, None, view.__getitem__, 0)
        raises(kvmm.KvmmError, errno.EINVAL, s.extend, 10)
        raises(kvmm.KvmmError, errno.EINVAL, len, s)
        raises(kvmm.KvmmError, errno.EINVAL, s.k_view, 0)
        raises(kvmm.KvmmError, errno.EINVAL, s.close)
        still_works()
        # truncate releases the views it cuts, keeps the others
        with r.open_seq() as t:
            t.extend(2 * TPB)
            short, long_ = t.k_view(0, TPB), t.k_view(0)
            t.truncate(TPB)
            short[0] = 3
            raises(ValueError, None, long_.__getitem__, 0)
            raises(ValueError, None, t.k_view, 0, TPB + 1)  # past len
        # bad Python arguments: nothing reaches C
        raises(TypeError, None, r.seq_extend, 0, "10")
        raises(TypeError, None, r.seq_extend, 0, 1.5)
        raises(TypeError, None, r.seq_extend, 0, True)
        raises(ValueError, None, r.seq_extend, 0, -1)
        raises(ValueError, None, r.seq_extend, 0, 1 << 32)
        raises(ValueError, None, r.publish, 0, 0, [1 << 64])
        raises(TypeError, None, r.publish, 0, 0, 0x1111)
        raises(TypeError, None, r.open_prefix, ["x"])
        raises(ValueError, None, kvmm.Connection, d.sock, "n" * 32)
        raises(ValueError, None, kvmm.Connection, d.sock + "\0x")
        raises(TypeError, None, kvmm.Connection, 5)
        raises(TypeError, None, c.nop, 1)
        # a flag is a bool: a truthy string set PIN_F_PRIORITY_ONLY (C's
        # bare EINVAL) and demote=1 PIN_F_DEMOTE
        e = raises(TypeError, None, c.pin, 0x4242, priority_only="no")
        check_eq(str(e), "priority_only must be a bool, not str",
                 "pin's flag")
        raises(TypeError, None, c.pin, 0x4242, ttl_ns=10**9, demote=1)
        raises(TypeError, None, c.pin_many, [0x4242], demote="yes")
        raises(TypeError, None, r.open_prefix, [1], plan=1)
        raises(TypeError, None, r.wait_ready, 0, 1, poll=None)
        # pin_many's hashes are checked as publish's and open_prefix's
        e = raises(TypeError, None, c.pin_many, 0x4242)
        check_eq(str(e), "hashes must be a sequence of ints", "pin_many(int)")
        raises(TypeError, None, c.pin_many, "ab")
        e = raises(ValueError, None, c.pin_many, [1, -2])
        check_eq(str(e), "hashes[1]=-2 is out of range [0, %d]"
                 % ((1 << 64) - 1), "pin_many's bad hash")
        # C's own refusals of a pin's values: their errno
        raises(kvmm.KvmmError, errno.ERANGE, c.pin, 0x4242,
               ttl_ns=kvmm.PIN_TTL_MAX_NS + 1)
        raises(kvmm.KvmmError, errno.EINVAL, c.pin, 0x4242, demote=True)
        raises(kvmm.KvmmError, errno.EINVAL, c.pin_many,
               list(range(1, kvmm.PIN_MANY_MAX + 2)))
        # block indexes past the region's: EINVAL, not a crash
        with r.open_seq() as t:
            t.extend(1)
            for fn in (t.block_readonly, t.block_unshare, t.block_pages):
                raises(kvmm.KvmmError, errno.EINVAL, fn, 10**6)
            raises(kvmm.KvmmError, errno.EINVAL, t.wait_ready, 10**6)
            raises(ValueError, None, t.block_pages, -1)
        # an exact integer type other than int is taken (numpy's are)
        check_eq(s2_len_after_index(r), 3, "an __index__ length")
        e = pickle.loads(pickle.dumps(kvmm.KvmmError(errno.ENODATA, "f")))
        check_eq((type(e), e.errno, e.function, e.strerror),
                 (kvmm.KvmmError, errno.ENODATA, "f",
                  kvmm.strerror(errno.ENODATA)), "a pickled KvmmError")
        # a socket nobody listens on: connect's errno
        raises(kvmm.KvmmError, errno.ENOENT, kvmm.Connection,
               os.path.join(d.dir, "nope.sock"))
        still_works()
        # a destroyed region, a closed connection: ValueError, not C
        r2 = c.region(**REGION)
        t = r2.open_seq()
        t.extend(1)
        v = t.k_view(0)
        r2.destroy()
        r2.destroy()  # again: nothing
        raises(ValueError, None, v.__getitem__, 0)
        raises(ValueError, None, t.extend, 2)
        raises(ValueError, None, r2.open_seq)
        still_works()
        view = r.open_seq().k_view(0, 0)
        c.close()
        c.close()
        check(c.closed and r.destroyed, "closed")
        raises(ValueError, None, view.__getitem__, 0)
        raises(ValueError, None, c.nop)
        raises(ValueError, None, c.stats)
        raises(ValueError, None, r.open_seq)
        # strerror: kvmm's own texts
        check_eq(kvmm.strerror(-errno.ENODATA),
                 "sequence range has no pages (revoked?)", "strerror")
        check_eq(kvmm.strerror(errno.ENOMEM),
                 "no memory left in the page pool", "strerror")
        check_eq(kvmm.block_action_string(4), "recompute", "action string")
        check_eq(kvmm.block_action_string(9), "unknown", "action string")
        d.wait_idle()
    # no library: ImportError naming what was tried
    env = dict(os.environ, KVMM_LIB=os.path.join(BUILD, "nope.so"),
               PYTHONPATH=os.path.join(SRC, "kvmm", "python"))
    env.pop("LD_PRELOAD", None)
    out = subprocess.run([sys.executable, "-c", "import kvmm"], env=env,
                         capture_output=True, text=True, timeout=30)
    check(out.returncode != 0 and "ImportError: kvmm: libkvmm.so.1 not "
          "found" in out.stderr and "nope.so (KVMM_LIB)" in out.stderr,
          "ImportError without the library: %s" % out.stderr)


# ---- layout ----------------------------------------------------------------

def case_layout():
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    check(cc is not None, "no C compiler (cc)")
    lines = ["#include <stddef.h>", "#include <stdio.h>",
             '#include "kvmm/kvmm.h"', "int main(void) {"]
    ours = []
    for name, cls in kvmm.STRUCTS.items():
        lines.append('printf("%s %%zu\\n", sizeof(struct %s));'
                     % (name, name))
        ours.append("%s %d" % (name, kvmm.ctypes.sizeof(cls)))
        for f, _ in cls._fields_:
            lines.append('printf("%s.%s %%zu %%zu\\n", '
                         'offsetof(struct %s, %s), '
                         'sizeof(((struct %s *)0)->%s));'
                         % (name, f, name, f, name, f))
            fd = getattr(cls, f)
            ours.append("%s.%s %d %d" % (name, f, fd.offset, fd.size))
    lines += ["return 0;", "}"]
    tmp = tempfile.mkdtemp(prefix="kvmm-py-layout-")
    try:
        src = os.path.join(tmp, "layout.c")
        exe = os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        out = subprocess.run([cc, "-I", os.path.join(SRC, "kvmm", "include"),
                              "-o", exe, src], capture_output=True, text=True)
        if out.returncode:
            fail("layout program: %s" % out.stderr)
        theirs = subprocess.run([exe], capture_output=True, text=True,
                             check=True).stdout.split("\n")[:-1]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for o, t in zip(ours, theirs):
        check_eq(o, t, "ctypes mirror (got) vs the C compiler (want)")
    check_eq(len(ours), len(theirs), "lines")
    # every field of the C structs is mirrored: the sizes above match and
    # the last field ends where the struct (less its tail padding) does
    print("%d structs, %d fields match" % (len(kvmm.STRUCTS),
                                           len(ours) - len(kvmm.STRUCTS)))


# ---- stats -----------------------------------------------------------------

def case_stats():
    with Daemon() as d:
        # map-ahead off: every count below is exact
        c = kvmm.Connection(d.sock, "py-stats", map_ahead_blocks=0)
        st = c.stats()
        check_eq(st.session_id, c.session_id, "session id")
        # a name, as Connection.backend (it was 0 beside c.backend "host");
        # the number is backend_id
        check_eq((st.backend, st.backend_name, st.backend_id, c.backend),
                 ("host", "host", kvmm.BACKEND_HOST, "host"), "backend")
        check_eq(st.page_size, 64 * 1024, "page size")
        # HELLO, the STATS of the constructor and this one
        check_eq(st.cmds_socket, 3, "socket commands after connect")
        check_eq((st.extends, st.extend_waits, st.pages_imported,
                  st.pages_mapped, st.pages_revoked, st.map_ahead_blocks,
                  st.cmds_ring, st.pages_held, st.blocks_lent,
                  st.extends_lent, st.map_ahead_backoffs,
                  st.blocks_lent_on_request), (0,) * 12,
                 "fresh counters")
        keys = list(st.as_dict())
        check_eq(keys, [f for f, _ in kvmm.StatsStruct._fields_[1:]],
                 "dict keys in C order")
        di = c.daemon_info()  # kvmm_get_daemon_info(): no round trip
        check_eq((di["abi_major"], di["backend"], di["backend_id"],
                  di["page_size"], di["pages_total"], di["quota_pages"],
                  di["gpu_uuid"]),
                 (1, "host", kvmm.BACKEND_HOST, 64 * 1024, 1024, 0,
                  bytes(16)), "daemon info")
        check(di["abi_minor"] >= 13, "daemon ABI minor %d" % di["abi_minor"])

        r = c.region(**REGION)  # socket: REGION_CREATE
        s = r.open_seq()  # socket: SEQ_OPEN
        s.extend(2 * TPB + 10)  # socket: SEQ_EXTEND, 3 blocks fetched
        s.extend(3 * TPB)  # within the blocks: the ring
        c.nop()  # ring
        c.nop(via_socket=True)  # socket
        with c.step():  # ring: STEP_BEGIN, STEP_END
            pass
        st = c.stats()
        check_eq(st.extends, 2, "extends")
        check_eq(st.extend_waits, 1, "extend waits")
        check_eq(st.pages_imported, 3 * PPB, "pages imported")
        check_eq(st.pages_mapped, 3 * PPB, "pages mapped")
        check_eq(st.pages_held, 3 * PPB, "pages held (the daemon's view)")
        check_eq(st.pages_revoked, 0, "pages revoked")
        check_eq(st.map_ahead_blocks, 0, "map-ahead blocks")
        check_eq(st.cmds_ring, 4, "ring commands")
        # 3 + REGION_CREATE, SEQ_OPEN, SEQ_EXTEND, NOP, STATS
        check_eq(st.cmds_socket, 3 + 5, "socket commands")
        s.truncate(TPB)  # socket: 2 blocks go back
        st = c.stats()
        check_eq(st.pages_held, PPB, "pages held after truncate")
        # + SEQ_TRUNCATE, STATS
        check_eq(st.cmds_socket, 3 + 5 + 2, "socket commands")
        check_eq(st.cmds_ring, 4, "ring commands")
        s.close()
        check_eq(c.stats().pages_held, 0, "pages held after close")
        r.destroy()
        c.close()

        # with map-ahead on, the background thread maps blocks ahead
        with kvmm.Connection(d.sock, "py-ahead", map_ahead_blocks=2) as c2, \
                c2.region(**REGION) as r2, r2.open_seq() as s2:
            s2.extend(1)
            st = c2.stats()
            check_eq(st.pages_held, 3 * PPB, "1 block + 2 ahead held")
            check_eq(st.extend_waits, 1, "first extend waits")
            for n in range(2, 3 * TPB + 1, 64):
                s2.extend(n)
            for _ in range(500):
                st = c2.stats()
                # (the daemon counts the pages before the thread has
                # mapped them and counted its blocks)
                if st.pages_held == 5 * PPB and st.map_ahead_blocks >= 2:
                    break
                time.sleep(0.01)
            check_eq(st.pages_held, 5 * PPB, "3 blocks + 2 ahead held")
            check_eq(st.extend_waits, 1, "later extends did not wait")
            # blocks 4 and 5: the thread's, whatever its fetches were
            check_eq(st.map_ahead_blocks, 2, "blocks the thread mapped")
        d.wait_idle()



# ---- tier stats and an older daemon ----------------------------------------


def case_tierstats():
    with Daemon() as d:
        c = kvmm.Connection(d.sock, "py-tierstats")
        ts = c.tier_stats()
        check_eq(ts["size"], kvmm.ctypes.sizeof(kvmm.TierStatsStruct),
                 "bytes the daemon sent")
        check_eq(list(ts), [f for f, _ in kvmm.TierStatsStruct._fields_],
                 "keys in C order")
        check_eq((ts["nr_tiers"], ts["publishes"], ts["prefix_opens"]),
                 (3, 0, 0), "a fresh cache")
        check_eq(len(ts["tiers"]), 3, "three tiers")
        check_eq(list(ts["tiers"][0]),
                 [f for f, _ in kvmm.TierInfoStruct._fields_],
                 "tier keys in C order")
        w, _ = published_by_writer(d)
        r = c.region(**REGION)
        g = r.open_prefix(HASHES, plan=True)
        check_eq(g.nr_blocks, 2, "prefix blocks")
        g.seq.close()
        ts = c.tier_stats()
        check_eq((ts["publishes"], ts["prefix_opens"],
                  ts["prefix_blocks_asked"], ts["prefix_blocks_hit"],
                  ts["misses"]), (2, 1, 3, 2, 1), "after a publish and "
                 "an open")
        check_eq((ts["tiers"][0]["used_blocks"], ts["tiers"][0]["hits"],
                  ts["tiers"][0]["block_bytes"]), (2, 2, PPB * 64 * 1024),
                 "the GPU tier")
        # the same numbers kvmmctl shows, and the calls are counted in
        # ADMIN_STATUS (ABI 1.20): the two above, not kvmmctl's own yet
        st = d.status()
        check_eq((st["cache"]["publishes"], st["cache"]["prefix_blocks_hit"]),
                 (2, 2), "kvmmctl --json status's cache")
        check_eq(st["router"]["tier_stats_calls"], 2,
                 "TIER_STATS counted in ADMIN_STATUS")
        # ABI 1.21: the sizes cached, and one size's cache alone
        check_eq((ts["block_pages"], ts["nr_sizes"], ts["sizes"]),
                 (0, 1, [PPB]), "the sum, of the one size cached")
        # ABI 1.25: its weight, 0 (no --cache-block-pages: taken from
        # the region, it shares by no weight)
        check_eq(ts["weights"], [0], "the one size's weight")
        one = c.tier_stats(block_pages=PPB)
        check_eq((one["block_pages"], one["publishes"],
                  one["tiers"][0]["used_blocks"], one["sizes"],
                  one["weights"]),
                 (PPB, 2, 2, [PPB], [0]), "that size's own")
        raises(kvmm.KvmmError, errno.ENOENT, c.tier_stats, block_pages=PPB + 1)
        writer_done(w)
        r.destroy()
        c.close()
        raises(ValueError, None, c.tier_stats)  # closed: no call made


def case_olddaemon():
    """kvmmd playing ABI 1.18 (KVMMD_TEST_ABI_MINOR=18): the 1.19 calls are
    EOPNOTSUPP without a round trip (the session's socket commands do not
    move), what 1.18 had works.  Then kvmmd playing 1.24: tier_stats()
    lists the size cached and no weight (ABI 1.25's weights[])."""
    with Daemon(env={"KVMMD_TEST_ABI_MINOR": "18"}) as d:
        w, _ = published_by_writer(d)
        c = kvmm.Connection(d.sock, "py-old", map_ahead_blocks=0)
        check_eq(c.daemon_info()["abi_minor"], 18, "the daemon's minor")
        r = c.region(**REGION)
        before = c.stats().cmds_socket
        raises(kvmm.KvmmError, errno.EOPNOTSUPP, r.query_prefix, HASHES)
        raises(kvmm.KvmmError, errno.EOPNOTSUPP, c.pin_many, HASHES[:2])
        check_eq(c.stats().cmds_socket, before + 1, "nothing sent but STATS")
        # what 1.18 had
        g = r.open_prefix(HASHES, plan=True)
        check_eq((g.nr_blocks, g.actions), (2, ["gpu-shared"] * 2),
                 "prefix open")
        g.seq.close()
        check_eq(c.pin(HASHES[0]).tier, 0, "a single pin")
        c.unpin(HASHES[0])
        ts = c.tier_stats()
        check_eq((ts["publishes"], ts["prefix_blocks_hit"]), (2, 2),
                 "tier stats")
        check_eq(ts["sizes"], [], "no sizes listed before 1.21")
        before = c.stats().cmds_socket
        raises(kvmm.KvmmError, errno.EOPNOTSUPP, c.tier_stats,
               block_pages=PPB)
        check_eq(c.stats().cmds_socket, before + 1, "nothing sent but STATS")
        check("router" not in d.status(), "no ABI 1.20 counters")
        writer_done(w)
        r.destroy()
        c.close()
    # a kvmmd of 1.24: the size listed, its weight not (the reply ends
    # before weights[]), where this build's daemon says [0]
    with Daemon(env={"KVMMD_TEST_ABI_MINOR": "24"}) as d:
        w, _ = published_by_writer(d)
        c = kvmm.Connection(d.sock, "py-old-24")
        ts = c.tier_stats()
        check_eq((ts["size"], ts["sizes"], ts["weights"]),
                 (kvmm.TierStatsStruct.weights.offset, [PPB], []),
                 "1.24: 728 bytes, the size and no weight")
        writer_done(w)
        c.close()



# ---- example ---------------------------------------------------------------

def case_example():
    with open(os.path.join(SRC, "Documentation", "python.md")) as f:
        doc = f.read()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    check('"/tmp/k.sock"' in code, "the example's socket path")
    with Daemon() as d:
        code = code.replace('"/tmp/k.sock"', repr(d.sock))
        env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "kvmm",
                                                        "python"))
        out = subprocess.run([sys.executable, "-c", code], env=env,
                             capture_output=True, text=True, timeout=60)
        if out.returncode:
            fail("example: %d\n%s%s" % (out.returncode, out.stdout,
                                        out.stderr))
        lines = out.stdout.splitlines()
        check_eq(lines[0], "1 ['gpu-shared']", "the example's first line")
        st = ast.literal_eval(lines[1])
        check_eq((st["backend"], st["pages_imported"], st["pages_held"]),
                 ("host", 4 * PPB, PPB), "the example's stats")
        d.wait_idle()
