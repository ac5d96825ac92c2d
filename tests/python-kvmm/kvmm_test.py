# SPDX-License-Identifier: MIT
"""What the cases of tests/python-kvmm.py share: the binding (kvmm/python/
kvmm.py, loaded once the ASan build's runtime is in place), the region
every case maps, the checks that fail a case with one line, a kvmmd of
its own for each case (Daemon), and the writer process that publishes
two known blocks.  Split from tests/python-kvmm.py, which runs the
cases (cases_share.py, cases_api.py, cases_sessions.py)."""
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("KVMM_SRC") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("KVMM_BUILD") or os.path.join(SRC, "build")
os.environ.setdefault("KVMM_LIB", os.path.join(BUILD, "libkvmm.so.1"))
# the runner: the other processes some cases start are a mode of it
RUNNER = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "python-kvmm.py")



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



# ---- the writer process (share, tierstats, olddaemon) ----------------------

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



def published_by_writer(d):
    """A writer process publishes HASHES[:2] and waits: returns it and
    what it said (its session, the pages of each block)."""
    w = subprocess.Popen([sys.executable, RUNNER, "writer", d.sock],
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

