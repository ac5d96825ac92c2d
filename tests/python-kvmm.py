#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Python binding (kvmm/python/kvmm.py) against a real kvmmd.

Run by the tests/python-*.sh wrappers, one case each:
  python-kvmm.py share    a writer process fills and publishes two blocks,
                          this process opens the prefix and reads them
  python-kvmm.py errors   each C error raises its errno, each bad Python
                          argument its TypeError/ValueError; the
                          connection keeps working after every one
  python-kvmm.py layout   every mirrored struct's size and field offsets
                          against the C compiler's
  python-kvmm.py stats    kvmm_get_stats() values after known operations
  python-kvmm.py revoke   an admin revocation: poll_fd readable,
                          process_revocations() count, views released
  python-kvmm.py viewrace a revocation another thread applies while
                          k_view() is being made (forced by hooks) leaves
                          no view over unmapped memory: it is released
                          (ValueError) or covers what is still backed
  python-kvmm.py fork     a child of os.fork() finds the parent's
                          Connection and Region closed (ValueError,
                          no call into libkvmm), leaves 'with' without
                          a hang and connects on its own; the parent's
                          session goes on, and is quarantined when cut
                          off
  python-kvmm.py tierstats  Connection.tier_stats() (kvmm_tier_stats(); of
                            one block size, kvmm_tier_stats_size(), ABI 1.21):
                          the counters after a publish and an open, as
                          kvmmctl shows them
  python-kvmm.py olddaemon  against kvmmd playing ABI 1.18: query_prefix
                          and pin_many raise EOPNOTSUPP without a round
                          trip, what 1.18 had works
  python-kvmm.py example  the example of Documentation/python.md runs and
                          prints what the document says
  python-kvmm.py hash     hash_seed/block_hash/hash_chain give the golden
                          values of tests/hash-golden.c (and of the byte
                          layout packed here, hashed by libxxhash itself);
                          a writer process publishes under its own chain,
                          this process opens the prefix with its own
Each starts its own kvmmd (host backend, 64 KiB pages) on a socket in a
temporary directory and stops it (exit status 0) at the end.
"""
import array
import ast
import ctypes
import ctypes.util
import errno
import json
import os
import pickle
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

SRC = os.environ.get("KVMM_SRC") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("KVMM_BUILD") or os.path.join(SRC, "build")
os.environ.setdefault("KVMM_LIB", os.path.join(BUILD, "libkvmm.so.1"))


def asan_reexec():
    """The ASan build's libkvmm (make SANITIZE=1) loads into python3 only
    with the ASan runtime preloaded: run again that way.  Leak checking is
    off (the interpreter itself keeps memory to the end)."""
    if os.environ.get("KVMM_PY_ASAN"):
        return
    try:
        ldd = subprocess.run(["ldd", os.environ["KVMM_LIB"]],
                             capture_output=True, text=True).stdout
    except OSError:
        return
    if "libasan" not in ldd:
        return
    rt = subprocess.run([os.environ.get("CC", "cc"),
                         "-print-file-name=libasan.so"],
                        capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(rt):
        print("skip: the ASan runtime (libasan.so) is not found for "
              "LD_PRELOAD")
        sys.exit(77)
    env = dict(os.environ, KVMM_PY_ASAN="1", LD_PRELOAD=rt,
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=0")
    print("ASan build: LD_PRELOAD=%s" % rt, flush=True)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


asan_reexec()
sys.path.insert(0, os.path.join(SRC, "kvmm", "python"))
import kvmm  # noqa: E402

# the region of tests/daemon-prefix-share.c: 2 layers, 256 bytes a token
# per layer and K|V, so 256 tokens (one 64 KiB page each) per block
REGION = dict(layers=2, kv_heads=2, head_dim=64, dtype_bytes=2, max_seqs=4,
              max_tokens=2048, salt=7)
TPB = 256
PPB = 4
HASHES = [0x1111, 0x2222, 0x3333]


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def check_eq(got, want, what):
    if got != want:
        fail("%s: got %r, want %r" % (what, got, want))


def raises(exc, err, fn, *args, **kw):
    """fn(*args) raises exc (with .errno err when err is not None)."""
    try:
        fn(*args, **kw)
    except exc as e:
        if err is not None and e.errno != err:
            fail("%s%r: errno %s (%s), want %s" % (
                getattr(fn, "__name__", fn), args, e.errno, e,
                errno.errorcode.get(err, err)))
        return e
    fail("%s%r did not raise %s" % (getattr(fn, "__name__", fn), args,
                                     exc.__name__))


def pattern(tag, n):
    """n bytes that differ per tag and per position."""
    row = bytes((tag * 37 + i * 11) & 0xff for i in range(251))
    return (row * (n // len(row) + 1))[:n]


class Daemon:
    def __init__(self, *extra, env=None):
        self.dir = tempfile.mkdtemp(prefix="kvmm-py-")
        self.sock = os.path.join(self.dir, "kvmm.sock")
        self.log = os.path.join(self.dir, "kvmmd.log")
        argv = [os.path.join(BUILD, "kvmmd"), "--foreground", "--backend",
                "host", "--socket", self.sock, "--page-size", "64K",
                "--gpu-mem", "64M", "--telemetry", "off"] + list(extra)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                env=dict(os.environ, **env) if env else None)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.dump()
                fail("kvmmd exited with %d" % self.proc.returncode)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                s.connect(self.sock)
                return
            except OSError:
                time.sleep(0.02)
            finally:
                s.close()
        self.dump()
        fail("kvmmd socket did not answer")

    def dump(self):
        with open(self.log, errors="replace") as f:
            sys.stdout.write(f.read()[-4000:])

    def ctl(self, *args):
        out = subprocess.run([os.path.join(BUILD, "kvmmctl"), "--socket",
                              self.sock] + list(args), capture_output=True,
                             text=True, timeout=30)
        if out.returncode:
            fail("kvmmctl %s: %d %s" % (args, out.returncode, out.stderr))
        return out.stdout

    def status(self):
        return json.loads(self.ctl("status", "--json"))

    def wait_idle(self):
        """No page mapped, no sequence open (the status session only)."""
        for _ in range(300):
            st = self.status()
            if not st["pages"]["mapped"] and not st["sequences"] and \
               st["sessions"] == 1:
                return st
            time.sleep(0.01)
        fail("daemon not idle: %r" % st)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "timeout"
        if rc != 0:
            self.dump()
            fail("kvmmd exit status %s" % rc)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *rest):
        if exc_type is None:
            self.stop()
            return False
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.dump()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


# ---- share -----------------------------------------------------------------

def writer(sock):
    """The other process: fill a sequence, publish its two full blocks,
    say their page ids on stdout, wait for a line on stdin."""
    with kvmm.Connection(sock, "py-writer") as c, \
            c.region(**REGION) as r, r.open_seq() as s:
        s.extend(2 * TPB + 10)
        for layer in range(REGION["layers"]):
            s.k_view(layer, 2 * TPB)[:] = pattern(2 * layer, 2 * TPB * 256)
            s.v_view(layer, 2 * TPB)[:] = pattern(2 * layer + 1,
                                                  2 * TPB * 256)
        n = s.publish(0, HASHES[:2])
        ids = [s.block_pages(0), s.block_pages(1)]
        print(json.dumps({"published": n, "ids": ids,
                          "session": c.session_id}), flush=True)
        sys.stdin.readline()
    return 0


def case_share():
    with Daemon() as d:
        w, a = published_by_writer(d)
        check(a["session"] != 0, "writer session id")

        c = kvmm.Connection(d.sock, "py-reader")
        check(c.session_id != a["session"], "a session of its own")
        check_eq(c.backend, "host", "backend")
        check_eq(c.page_size, 64 * 1024, "page size")
        r = c.region(**REGION)
        check_eq(r.tokens_per_block, TPB, "tokens per block")
        # asked first, without opening: both blocks on the GPU, a chain
        # cut at its first block never cached, nothing imported
        check_eq(r.query_prefix(HASHES), ["gpu", "gpu"], "query_prefix")
        check_eq(r.query_prefix([HASHES[0], 0x5eed, HASHES[1]]), ["gpu"],
                 "query_prefix cut at a miss")
        check_eq(r.query_prefix([0x5eed]), [], "query_prefix of a miss")
        check_eq(c.stats().pages_imported, 0, "nothing imported by a query")
        p = r.open_prefix(HASHES)
        check_eq(p.nr_blocks, 2, "prefix blocks")
        check_eq(p.actions, None, "no actions without plan")
        s1 = p.seq
        check_eq(len(s1), 2 * TPB, "prefix sequence length")
        for b in range(2):
            check_eq(s1.block_pages(b), a["ids"][b],
                     "block %d page ids (the writer's pages)" % b)
        for layer in range(REGION["layers"]):
            check(s1.k_view(layer).tobytes() ==
                  pattern(2 * layer, 2 * TPB * 256),
                  "layer %d K bytes differ from the writer's" % layer)
            check(s1.v_view(layer).tobytes() ==
                  pattern(2 * layer + 1, 2 * TPB * 256),
                  "layer %d V bytes differ from the writer's" % layer)
        imported = c.stats().pages_imported
        check_eq(imported, 2 * PPB, "pages imported for the prefix")

        # the plan variant: both blocks shared on the GPU tier, nothing
        # imported again (this process holds the pages)
        q = r.open_prefix(HASHES, plan=True)
        check_eq(q.nr_blocks, 2, "plan prefix blocks")
        check(q.seq.id != s1.id, "a second sequence")
        check_eq(q.actions, ["gpu-shared", "gpu-shared"], "actions")
        check_eq(q.action_codes, [kvmm.BLOCK_GPU_SHARED] * 2, "action codes")
        check_eq((q.shared, q.reloaded_host, q.reloaded_nvme, q.recompute),
                 (2, 0, 0, 0), "plan counts")
        check_eq(c.stats().pages_imported, imported, "no new import")
        s2 = q.seq
        check_eq(s2.v_view(1)[TPB * 256 + 5],
                 pattern(3, 2 * TPB * 256)[TPB * 256 + 5], "s2 V byte")
        # past the prefix: a private block, writable, on pages of its own
        s2.extend(2 * TPB + 1)
        own = s2.block_pages(2)
        check_eq(len(own), PPB, "private block pages")
        check(not set(own) & set(a["ids"][0] + a["ids"][1]),
              "private block on shared pages")
        # the shared blocks are read-only (libkvmm maps them so): a view
        # over them refuses a write with TypeError, the bytes unchanged;
        # a view of the private block alone is writable
        check_eq([s2.block_readonly(b) for b in range(3)],
                 [True, True, False], "read-only blocks")
        whole = s2.k_view(0)
        check(whole.readonly, "a view over shared blocks is read-only")
        raises(TypeError, None, whole.__setitem__, 0, 0xee)
        raises(TypeError, None, s1.v_view(1).__setitem__, 5, 0xee)
        check_eq(whole[0], pattern(0, 1)[0], "shared byte after the write")
        del whole
        tail = s2.k_view(0, start=2 * TPB)
        check(not tail.readonly, "the private block's view is writable")
        check_eq(len(tail), 256, "one token from start")
        tail[:] = b"\x5a" * 256
        check_eq(s2.k_view(0)[2 * TPB * 256 + 255], 0x5a, "private write")
        del tail
        raises(ValueError, None, s2.k_view, 0, 2, 2 * TPB)  # past len
        # copy-on-write (ABI 1.20): block 1 becomes s2's own, the same
        # bytes, writable; s1 (the publisher's pages, the cache's copy)
        # unchanged; a second unshare copies nothing
        s2.block_unshare(1)
        check_eq([s2.block_readonly(b) for b in range(3)],
                 [True, False, False], "block 1 unshared")
        mine = s2.k_view(0, tokens=TPB, start=TPB)
        check(not mine.readonly, "the unshared block's view is writable")
        check_eq(mine[7], pattern(0, 2 * TPB * 256)[TPB * 256 + 7],
                 "unshared byte copied")
        mine[7] = 0xee
        check_eq(s2.k_view(0)[TPB * 256 + 7], 0xee, "write after unshare")
        check_eq(s1.k_view(0)[TPB * 256 + 7],
                 pattern(0, 2 * TPB * 256)[TPB * 256 + 7],
                 "the cache's copy unchanged")
        del mine
        s2.block_unshare(1)
        check_eq(c.stats().blocks_unshared, 1, "one block unshared")

        st = d.status()
        check_eq(st["cache"]["publishes"], 2, "daemon: blocks published")
        check_eq(st["cache"]["prefix_blocks_asked"], 6,
                 "daemon: prefix blocks asked")
        check_eq(st["cache"]["prefix_blocks_hit"], 4,
                 "daemon: prefix blocks hit")
        check_eq(st["sessions"], 3, "daemon: sessions (writer, reader, ctl)")

        # segments: a hash in no tier between the two is a hole to
        # recompute, the block after it is shared all the same
        g = r.open_prefix([HASHES[0], 0x5e6, HASHES[1]], segments=True)
        check_eq(g.actions, ["gpu-shared", "recompute", "gpu-shared"],
                 "segments actions")
        check_eq((g.nr_blocks, g.shared, g.recompute), (3, 2, 1),
                 "segments counts")
        check(not set(g.seq.block_pages(1)) & set(a["ids"][0] + a["ids"][1]),
              "the hole on pages of its own")
        # the hole is the sequence's own: writable, the others not
        check_eq([g.seq.block_readonly(b) for b in range(3)],
                 [True, False, True], "segments: read-only blocks")
        hole = g.seq.v_view(0, TPB, TPB)
        check(not hole.readonly, "the hole's view is writable")
        hole[:] = b"\x11" * len(hole)
        del hole
        g.seq.close()
        # early (ABI 1.8): the same blocks, nothing to reload: ready
        g = r.open_prefix([HASHES[0], 0x5e6, HASHES[1]], segments=True,
                          early=True)
        check_eq(g.actions, ["gpu-shared", "recompute", "gpu-shared"],
                 "early actions")
        rd = g.seq.wait_ready(3, poll=True)
        check_eq((rd.failed, rd.pending), ([], 0), "early: nothing loading")
        check_eq(g.seq.wait_ready(3).failed, [], "early: ready")
        raises(kvmm.KvmmError, errno.ERANGE, g.seq.wait_ready, 4)
        g.seq.close()

        s1.close()
        # s2 still reads the shared pages after s1 unmapped them
        check_eq(s2.k_view(0)[77], pattern(0, 78)[77], "s2 after s1 closed")
        s2.close()
        w.stdin.write("go\n")
        w.stdin.close()
        check_eq(w.wait(30), 0, "writer exit status")
        r.destroy()
        c.close()
        st = d.wait_idle()
        check_eq(st["pages"]["mapped"], 0, "pages mapped at the end")


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

def published_by_writer(d):
    """A writer process publishes HASHES[:2] and waits: returns it and
    what it said (its session, the pages of each block)."""
    w = subprocess.Popen([sys.executable, __file__, "writer", d.sock],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    line = w.stdout.readline()
    if not line:
        w.wait()
        d.dump()
        fail("writer failed: %d" % w.returncode)
    a = json.loads(line)
    check_eq(a["published"], 2, "blocks the writer published")
    return w, a


def writer_done(w):
    w.stdin.write("\n")
    w.stdin.flush()
    check_eq(w.wait(), 0, "writer exit status")


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
        one = c.tier_stats(block_pages=PPB)
        check_eq((one["block_pages"], one["publishes"],
                  one["tiers"][0]["used_blocks"], one["sizes"]),
                 (PPB, 2, 2, [PPB]), "that size's own")
        raises(kvmm.KvmmError, errno.ENOENT, c.tier_stats, block_pages=PPB + 1)
        writer_done(w)
        r.destroy()
        c.close()
        raises(ValueError, None, c.tier_stats)  # closed: no call made


def case_olddaemon():
    """kvmmd playing ABI 1.18 (KVMMD_TEST_ABI_1_18=1): the 1.19 calls are
    EOPNOTSUPP without a round trip (the session's socket commands do not
    move), what 1.18 had works."""
    with Daemon(env={"KVMMD_TEST_ABI_1_18": "1"}) as d:
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


# ---- fork ------------------------------------------------------------------

def fork_child(sock, c, r, s, view):
    signal.alarm(20)  # a hang shows as SIGALRM
    check(c.closed and r.destroyed, "inherited objects closed")
    e = raises(ValueError, None, c.nop)
    check("fork" in str(e), "the error says fork: %s" % e)
    raises(ValueError, None, s.extend, 3 * TPB)
    raises(ValueError, None, view.__getitem__, 0)
    # what a worker leaving the parent's 'with' block does (sys.exit)
    c.__exit__(SystemExit, SystemExit(0), None)
    c.close()
    with kvmm.Connection(sock, "py-fork-child") as own:
        own.nop()
        own.nop(via_socket=True)


def case_fork():
    with Daemon() as d:
        c = kvmm.Connection(d.sock, "py-fork")  # map-ahead on
        r = c.region(**REGION)
        s = r.open_seq()
        s.extend(2 * TPB)
        view = s.k_view(0)
        view[:] = pattern(5, 2 * TPB * 256)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                fork_child(d.sock, c, r, s, view)
                code = 0
            except SystemExit:
                pass  # fail() said why
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        check_eq(os.waitstatus_to_exitcode(status), 0, "child's exit")
        check(not c.closed, "the parent's connection stays open")
        c.nop()
        c.nop(via_socket=True)
        check_eq(view.tobytes(), pattern(5, 2 * TPB * 256), "parent's KV")
        s.extend(REGION["max_tokens"])  # every block: map-ahead is done
        held = c.stats().pages_held
        check_eq(held, REGION["max_tokens"] // TPB * PPB, "pages held")
        d.ctl("kill", str(c.session_id))
        for _ in range(1000):
            if d.status()["pages"]["quarantined"] == held:
                break
            time.sleep(0.01)
        check_eq(d.status()["pages"]["quarantined"], held,
                 "pages quarantined after the cut-off")
        c.close()
        fork_engine_dies(d)


def fork_engine_dies(d):
    """An engine forks a worker that never uses kvmm, then dies: the
    worker dropped its inherited copy at the fork, so kvmmd sees the
    engine's socket close and frees its pages while the worker lives (it
    kept them until the worker exited)."""
    base = d.status()  # the cut-off parent's pages stay quarantined
    pids_r, pids_w = os.pipe()
    go_r, go_w = os.pipe()
    engine = os.fork()
    if engine == 0:
        try:
            os.close(pids_r)
            os.close(go_w)
            c = kvmm.Connection(d.sock, "py-fork-engine", map_ahead_blocks=0)
            s = c.region(**REGION).open_seq()
            s.extend(2 * TPB)
            worker = os.fork()
            if worker == 0:
                os.close(pids_w)
                os.read(go_r, 1)  # until the test is done (or EOF)
                os._exit(0)
            os.write(pids_w, b"%d\n" % worker)
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    os.close(pids_w)
    os.close(go_r)
    worker = int(os.read(pids_r, 64))
    os.close(pids_r)
    os.waitpid(engine, 0)
    try:
        for _ in range(1000):
            st = d.status()
            if st["pages"]["allocated"] == base["pages"]["allocated"] \
               and st["sessions"] == base["sessions"]:
                break
            time.sleep(0.01)
        check_eq(st["pages"]["allocated"], base["pages"]["allocated"],
                 "the dead engine's pages freed, its worker alive")
        check_eq(st["sessions"], base["sessions"], "its session ended")
        os.kill(worker, 0)  # still alive: the test did not wait for it
    finally:
        os.close(go_w)


# ---- pin quota -------------------------------------------------------------

def case_pinquota():
    with Daemon("--pin-quota", "2") as d:
        c = kvmm.Connection(d.sock, "py-pinquota", map_ahead_blocks=0)
        r = c.region(**REGION)
        s = r.open_seq()
        s.extend(3 * TPB)
        check_eq(s.publish(0, HASHES), 3, "published")
        check_eq(c.pin(HASHES[0]).pins, 1, "first pin")
        check_eq(c.pin(HASHES[1]).pins, 2, "second pin")
        # the refusal says what the connection holds and may hold
        e = raises(kvmm.PinQuotaError, errno.EDQUOT, c.pin, HASHES[2])
        check(isinstance(e, kvmm.KvmmError), "a KvmmError")
        check_eq((e.pins, e.pin_quota), (2, 2), "pins, pin_quota")
        check_eq(e.function, "kvmm_block_pin", "function")
        check_eq(str(e), "[Errno %d] kvmm_block_pin: %s (pin quota: 2 of 2 "
                 "pins held)" % (errno.EDQUOT, kvmm.strerror(errno.EDQUOT)),
                 "the message")
        p = pickle.loads(pickle.dumps(e))
        check_eq((type(p), p.errno, p.function, p.pins, p.pin_quota,
                  str(p)), (kvmm.PinQuotaError, errno.EDQUOT,
                            "kvmm_block_pin", 2, 2, str(e)),
                 "a pickled PinQuotaError")
        # nothing was pinned: one unpin makes room for it
        raises(kvmm.KvmmError, errno.ENOENT, c.unpin, HASHES[2])
        c.unpin(HASHES[0])
        pin = c.pin(HASHES[2])
        check_eq((pin.pins, pin.pin_quota), (2, 2), "pin after an unpin")
        # pin_many (ABI 1.19): one round trip, one result a hash, in
        # order: a repin keeps its record (the quota is not passed), a
        # hash never cached is -ENOENT, a new pin past the quota -EDQUOT
        c.unpin(HASHES[1])
        check_eq(c.pin_many([HASHES[2], 0x5eed, HASHES[0], HASHES[1]]),
                 [0, -errno.ENOENT, 0, -errno.EDQUOT], "pin_many results")
        raises(kvmm.KvmmError, errno.ENOENT, c.unpin, HASHES[1])
        c.unpin(HASHES[0])
        check_eq(c.pin_many([HASHES[1]], ttl_ns=10**9), [0],
                 "pin_many with a TTL")
        check_eq(c.pin_many([0]), [-errno.EINVAL], "pin_many of hash 0")
        raises(kvmm.KvmmError, errno.EINVAL, c.pin_many, [])
        c.close()
        d.wait_idle()


# ---- revoke ----------------------------------------------------------------

def case_revoke():
    with Daemon() as d:
        c = kvmm.Connection(d.sock, "py-revoke", map_ahead_blocks=0)
        r = c.region(**REGION)  # the daemon's first region: id 1
        s = r.open_seq()
        s.extend(3 * TPB)
        head, whole = s.k_view(0, TPB), s.k_view(0)
        whole[:] = pattern(9, 3 * TPB * 256)
        fd = c.poll_fd()
        check(fd >= 0 and c.fileno() == fd, "poll fd")
        check_eq(select.select([fd], [], [], 0)[0], [], "nothing posted yet")
        # blocks 1 and 2 of the sequence; kvmmctl answers once posted
        d.ctl("revoke", str(c.session_id), "1", str(s.id), "1")
        check_eq(select.select([c], [], [], 10)[0], [c],
                 "poll fd readable after the revocation")
        check_eq(c.process_revocations(), 2 * PPB, "pages given back")
        check_eq(len(s), TPB, "length cut to the kept block")
        check_eq(head[:256].tobytes(), pattern(9, 256), "kept block intact")
        raises(ValueError, None, whole.__getitem__, 0)
        check_eq(c.stats().pages_revoked, 2 * PPB, "pages revoked")
        check_eq(c.process_revocations(), 0, "nothing more")
        # the sequence grows again on fresh pages
        s.extend(3 * TPB)
        check_eq(len(s.block_pages(2)), PPB, "backed again")
        # revoked again, and this time an extend inside the old length
        # meets it (ENODATA from the ring), applies it and fetches again:
        # the range is mapped again (fresh pages), but the length is where
        # the revocation left it (block 1 on is lost, the engine
        # recomputes it), so the view over the lost blocks is released;
        # growing it again takes the ring
        whole = s.k_view(0)
        waits = c.stats().extend_waits
        d.ctl("revoke", str(c.session_id), "1", str(s.id), "1")
        check_eq(select.select([c], [], [], 10)[0], [c], "readable again")
        s.extend(3 * TPB)
        check_eq(len(s), TPB, "length after the extend: the revocation's")
        s.extend(3 * TPB)
        check_eq(len(s), 3 * TPB, "length after the next extend")
        st = c.stats()
        check_eq(st.pages_revoked, 4 * PPB, "pages revoked by the extend")
        check_eq(st.extend_waits, waits + 1, "the extend fetched again")
        try:
            whole[-1] = 7
            fail("a view over blocks the revocation took still works")
        except ValueError:
            pass
        whole = s.k_view(0)
        whole[-1] = 7  # mapped: writable
        check_eq(s.k_view(0)[-1], 7, "the fresh pages")
        with c.step():
            pass
        c.close()
        d.wait_idle()


def case_viewrace():
    with Daemon() as d:
        c = kvmm.Connection(d.sock, "py-viewrace", map_ahead_blocks=0)
        r = c.region(**REGION)  # the daemon's first region: id 1
        s = r.open_seq()
        s.extend(3 * TPB)
        h = r._h

        def revoke_in_thread(seq):
            # the admin revokes the whole sequence; another thread applies
            # it (libkvmm unmaps, then the binding revalidates its views)
            d.ctl("revoke", str(c.session_id), "1", str(seq), "0")
            t = threading.Thread(target=c.process_revocations)
            t.start()
            for _ in range(10000):
                if kvmm._c.seq_len(h, seq) == 0:  # unmapped by libkvmm
                    break
                time.sleep(0.001)
            check_eq(kvmm._c.seq_len(h, seq), 0, "revocation applied")
            return t

        # 1. Right after k_view() read the length: the applying thread's
        # revalidation must come after the view is registered and release
        # it.  (It used to run first, find no view and return: the view
        # was handed out over unmapped memory, and v[0] was SIGSEGV.)
        orig_len = kvmm.Region.seq_len
        threads = []

        def len_hook(self, seq):
            n = orig_len(self, seq)
            kvmm.Region.seq_len = orig_len
            t = revoke_in_thread(seq)
            t.join(0.5)  # done unless it waits for the view lock
            threads.append(t)
            return n  # the length before the revocation

        kvmm.Region.seq_len = len_hook
        try:
            v = s.k_view(0)
        finally:
            kvmm.Region.seq_len = orig_len
        threads[0].join()
        check_eq(len(s), 0, "length after the revocation")
        raises(ValueError, None, v.__getitem__, 0)

        # 2. Between the pointer and the length (the reviewer's hook):
        # the view covers the new length, nothing
        s.extend(3 * TPB)
        orig_k = kvmm.Region.k_ptr

        def ptr_hook(self, seq, layer):
            p = orig_k(self, seq, layer)
            revoke_in_thread(seq).join()
            return p

        kvmm.Region.k_ptr = ptr_hook
        try:
            v = s.k_view(0)
        finally:
            kvmm.Region.k_ptr = orig_k
        check_eq(v.nbytes, 0, "a view of what is backed: nothing")
        raises(IndexError, None, v.__getitem__, 0)
        s.close()
        c.close()
        d.wait_idle()


# ---- hash ------------------------------------------------------------------

# tests/hash-golden.c and Documentation/abi.md
SEED_LLAMA = 0xf234da226931a53d  # 32, 8, 128, 2, 16, "llama-3-8b"
SEED_NONAME = 0x949cc5b8f5a0bbba  # 2, 2, 64, 2, 256, no model
CHAIN_SALT0 = [0x9b181b5d6511112f, 0xbde7f21ef799c998, 0x20e531c6ba1f825f]
CHAIN_SALT7 = [0x723cd10a9bb80fff, 0xe9f77681e7d98748, 0x58a161e40377d114]
GOLDEN_TOKENS = [(i * 2654435761) & 0xffffffff for i in range(50)]
HASH_MODEL = "py-hash-model"


def hash_prompt(n, variant=0):
    return [((i * 40503 + 11) & 0xffffffff) ^ (variant if i >= 2 * TPB
                                               else 0) for i in range(n)]


def independent_chain():
    """The golden values from the documented byte layout alone: packed
    here, hashed by libxxhash (not libkvmm).  None without libxxhash."""
    path = ctypes.util.find_library("xxhash")
    if not path:
        return None
    x = ctypes.CDLL(path)
    x.XXH3_64bits.restype = ctypes.c_uint64
    x.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    x.XXH3_64bits_withSeed.restype = ctypes.c_uint64
    x.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                       ctypes.c_uint64]
    b = struct.pack("<5I", 32, 8, 128, 2, 16) + b"llama-3-8b"
    seed = x.XXH3_64bits(b, len(b))
    b = struct.pack("<5I", 2, 2, 64, 2, 256)
    noname = x.XXH3_64bits(b, len(b))
    chains = []
    for salt in (0, 7):
        parent, chain = 0, []
        for blk in range(3):
            toks = GOLDEN_TOKENS[blk * 16:(blk + 1) * 16]
            b = struct.pack("<QQ16I", parent, salt, *toks)
            parent = x.XXH3_64bits_withSeed(b, len(b), seed)
            chain.append(parent)
        chains.append(chain)
    return seed, noname, chains[0], chains[1]


def hash_writer(sock):
    """The other process: publish three blocks under its own chain, say
    their page ids (never the hashes), wait for a line on stdin."""
    with kvmm.Connection(sock, "py-hash-writer") as c, \
            c.region(**REGION) as r, r.open_seq() as s:
        toks = hash_prompt(3 * TPB + 10)
        hs = kvmm.hash_chain(r.hash_seed(HASH_MODEL), toks,
                             r.tokens_per_block)
        s.extend(len(toks))
        for layer in range(REGION["layers"]):
            s.k_view(layer, 3 * TPB)[:] = pattern(layer, 3 * TPB * 256)
        n = s.publish(0, hs)
        print(json.dumps({"published": n, "nhashes": len(hs),
                          "ids": [s.block_pages(b) for b in range(3)]}),
              flush=True)
        sys.stdin.readline()
    return 0


def case_hash():
    # golden values, three ways to pass tokens
    try:
        seed = kvmm.hash_seed(32, 8, 128, 2, 16, "llama-3-8b")
    except kvmm.KvmmError as e:
        if e.errno != errno.ENOTSUP:
            raise
        print("skip: libkvmm built without libxxhash")
        sys.exit(77)
    check_eq(seed, SEED_LLAMA, "seed")
    check_eq(kvmm.hash_seed(32, 8, 128, 2, 16, b"llama-3-8b"), SEED_LLAMA,
             "seed of a bytes name")
    check_eq(kvmm.hash_seed(2, 2, 64, 2, 256), SEED_NONAME, "unnamed seed")
    check_eq(kvmm.hash_seed(2, 2, 64, 2, 256, ""), SEED_NONAME, "'' seed")
    check_eq(kvmm.hash_chain(seed, GOLDEN_TOKENS, 16), CHAIN_SALT0, "chain")
    check_eq(kvmm.hash_chain(seed, tuple(GOLDEN_TOKENS), 16, salt=7),
             CHAIN_SALT7, "salted chain")
    check_eq(kvmm.hash_chain(seed, array.array("I", GOLDEN_TOKENS), 16),
             CHAIN_SALT0, "chain of an array")
    check_eq(kvmm.hash_chain(seed, GOLDEN_TOKENS[:47], 16), CHAIN_SALT0[:2],
             "a partial tail block is not hashed")
    check_eq(kvmm.hash_chain(seed, [], 16), [], "no tokens")
    check_eq(kvmm.hash_chain(seed, range(5), 16), [], "no full block")
    parent = 0
    for b in range(3):
        parent = kvmm.block_hash(seed, parent, GOLDEN_TOKENS[16 * b:
                                                           16 * (b + 1)])
        check_eq(parent, CHAIN_SALT0[b], "block %d" % b)
    check_eq(kvmm.block_hash(seed, CHAIN_SALT7[0], GOLDEN_TOKENS[16:32],
                             salt=7), CHAIN_SALT7[1], "salted block")
    ind = independent_chain()
    if ind is None:
        print("note: no libxxhash for the independent computation")
    else:
        check_eq(ind, (SEED_LLAMA, SEED_NONAME, CHAIN_SALT0, CHAIN_SALT7),
                 "the byte layout hashed by libxxhash itself")
        print("golden values equal the layout hashed by libxxhash itself")

    # bad arguments: Python's errors before C, C's errno after
    raises(ValueError, None, kvmm.hash_chain, seed, [1, 1 << 32], 1)
    raises(ValueError, None, kvmm.hash_chain, seed, [-1], 1)
    raises(TypeError, None, kvmm.hash_chain, seed, [1.0], 1)
    raises(TypeError, None, kvmm.hash_chain, seed, [True], 1)
    raises(TypeError, None, kvmm.hash_chain, seed, "abc", 1)
    raises(TypeError, None, kvmm.hash_chain, seed, b"abc", 1)
    raises(TypeError, None, kvmm.hash_chain, seed, 5, 1)
    raises(ValueError, None, kvmm.hash_chain, 1 << 64, [1], 1)
    raises(ValueError, None, kvmm.hash_chain, seed, [1], 1, salt=-1)
    raises(ValueError, None, kvmm.block_hash, seed, 0, [1 << 32])
    raises(ValueError, None, kvmm.hash_seed, 1, 1, 1, 1, 1, "a\0b")
    raises(TypeError, None, kvmm.hash_seed, 1, 1, 1, 1, 1, 5)
    raises(ValueError, None, kvmm.hash_seed, 1, 1, 1, 1, -1)
    e = raises(kvmm.KvmmError, errno.EINVAL, kvmm.hash_chain, seed,
               [1, 2], 0)
    check_eq(e.function, "kvmm_hash_chain", "function")
    raises(kvmm.KvmmError, errno.EINVAL, kvmm.block_hash, seed, 0, [])
    for i in range(5):
        args = [1] * 5
        args[i] = 0
        raises(kvmm.KvmmError, errno.EINVAL, kvmm.hash_seed, *args)

    # Region.hash_seed, and sharing between two processes' own chains
    with Daemon() as d:
        w = subprocess.Popen([sys.executable, __file__, "hashwriter",
                              d.sock], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        line = w.stdout.readline()
        if not line:
            w.wait()
            d.dump()
            fail("hash writer failed: %d" % w.returncode)
        a = json.loads(line)
        check_eq((a["published"], a["nhashes"]), (3, 3), "writer's blocks")
        with kvmm.Connection(d.sock, "py-hash") as c:
            r = c.region(**REGION)
            check_eq(r.hash_seed(), SEED_NONAME, "region seed, no model")
            rs = r.hash_seed(HASH_MODEL)
            check_eq(rs, kvmm.hash_seed(2, 2, 64, 2, TPB, HASH_MODEL),
                     "region seed")
            for variant, want in ((0, 3), (0x5a5a, 2)):
                hs = kvmm.hash_chain(rs, hash_prompt(3 * TPB + 3, variant),
                                     TPB)
                with r.open_prefix(hs).seq as s:
                    check_eq(len(s), want * TPB, "prefix of variant %#x"
                             % variant)
                    for b in range(want):
                        check_eq(s.block_pages(b), a["ids"][b],
                                 "block %d: the writer's pages" % b)
                    check(s.k_view(1).tobytes() ==
                          pattern(1, want * TPB * 256), "the writer's K")
            other = kvmm.hash_chain(r.hash_seed("other"),
                                    hash_prompt(3 * TPB), TPB)
            with r.open_prefix(other).seq as s:
                check_eq(len(s), 0, "another model's chain shares nothing")
            r.destroy()
            raises(ValueError, None, r.hash_seed)
        w.stdin.write("go\n")
        w.stdin.close()
        check_eq(w.wait(30), 0, "writer exit status")


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


CASES = {"example": case_example, "share": case_share, "errors": case_errors,
         "layout": case_layout, "stats": case_stats, "revoke": case_revoke,
         "viewrace": case_viewrace, "hash": case_hash, "fork": case_fork,
         "pinquota": case_pinquota, "tierstats": case_tierstats,
         "olddaemon": case_olddaemon}

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "writer":
        sys.exit(writer(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "hashwriter":
        sys.exit(hash_writer(sys.argv[2]))
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: python-kvmm.py %s" % "|".join(CASES), file=sys.stderr)
        sys.exit(2)
    CASES[sys.argv[1]]()
    print("ok")
