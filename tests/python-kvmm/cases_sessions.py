# SPDX-License-Identifier: MIT
"""A session's end and its pages taken back: fork (a child finds the
parent's objects closed), pinquota, revoke (an admin revocation),
viewrace (a revocation while a view is being made) and lost (kvmmd killed
under the session).  Split from
tests/python-kvmm.py, which runs them."""
import errno
import os
import pickle
import select
import shutil
import signal
import sys
import threading
import time
import traceback

from kvmm_test import (kvmm, Daemon, HASHES, PPB, REGION, TPB, check, check_eq,
                       fail, pattern, raises)


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


# ---- kvmmd lost ------------------------------------------------------------

def case_lost():
    """kvmmd killed under a live session: every call that talks to it
    raises KvmmError ECONNRESET, and again (no hang, no crash); what the
    library knows still answers (lengths, pointers, page ids, views with
    the bytes written, daemon_info()); close() ends it at once and
    releases the views; a new Connection is refused (ECONNREFUSED)."""
    d = Daemon()
    try:
        c = kvmm.Connection(d.sock, "py-lost", map_ahead_blocks=0)
        r = c.region(**REGION)
        s = r.open_seq()
        s.extend(2 * TPB + 1)
        s.k_view(1)[:] = pattern(5, (2 * TPB + 1) * 256)
        check_eq(s.publish(0, HASHES[:2]), 2, "published")
        view = s.k_view(1)
        ptr, ids = s.k_ptr(1), s.block_pages(1)
        seed = r.hash_seed("m")
        d.proc.kill()
        d.proc.wait()

        talking = [
            ("nop", c.nop), ("nop via socket", lambda: c.nop(True)),
            ("stats", c.stats), ("tier_stats", c.tier_stats),
            ("open_seq", r.open_seq), ("extend", lambda: s.extend(3 * TPB)),
            ("publish", lambda: s.publish(0, HASHES[:1])),
            ("pin", lambda: c.pin(HASHES[0])),
            ("unpin", lambda: c.unpin(HASHES[0])),
            ("pin_many", lambda: c.pin_many(HASHES)),
            ("query_prefix", lambda: r.query_prefix(HASHES)),
            ("open_prefix", lambda: r.open_prefix(HASHES)),
            ("open_prefix plan", lambda: r.open_prefix(HASHES, plan=True)),
            ("wait_ready", lambda: s.wait_ready(1)),
            ("step_begin", c.step_begin), ("step_end", c.step_end),
        ]
        for _ in range(2):  # and it goes on doing so
            for what, fn in talking:
                e = raises(kvmm.KvmmError, errno.ECONNRESET, fn)
                check(e.function.startswith("kvmm_"),
                      "%s: the C function named: %r" % (what, e.function))
        # the library's own state: as it was, bytes included
        check_eq(len(s), 2 * TPB + 1, "length")
        check_eq((s.k_ptr(1), s.block_pages(1)), (ptr, ids),
                 "pointer and page ids")
        check_eq(s.block_readonly(0), False, "the sequence's own block")
        check(view[:] == pattern(5, (2 * TPB + 1) * 256),
              "the bytes written, still readable")
        check_eq(r.hash_seed("m"), seed, "the region's seed")
        di = c.daemon_info()
        check_eq((di["abi_major"], di["abi_minor"]),
                 (kvmm.ABI_MAJOR, kvmm.ABI_MINOR), "daemon_info()")
        t0 = time.monotonic()
        c.close()
        check(time.monotonic() - t0 < 5, "close() took %.1f s"
              % (time.monotonic() - t0))
        check(c.closed and r.destroyed, "closed")
        raises(ValueError, None, view.__getitem__, 0)
        raises(ValueError, None, c.nop)
        # the socket's file is left: nobody listens
        raises(kvmm.KvmmError, errno.ECONNREFUSED, kvmm.Connection, d.sock)
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        shutil.rmtree(d.dir, ignore_errors=True)
