# SPDX-License-Identifier: MIT
"""Connection: kvmm_connect() .. kvmm_disconnect(), with its regions, steps,
revocations, statistics and pins, and the fork handler that closes a
parent's connections in a forked child."""

import contextlib
import ctypes
import errno as _errno
import os
import weakref

from .constants import (_NAME_MAX, PIN_F_DEMOTE, PIN_F_PRIORITY,
                        PIN_F_PRIORITY_ONLY, PIN_F_TTL, TIER_STATS_SIZES)
from .errors import (KvmmError, PinQuotaError, _bool_arg, _bytes_arg,
                     _check, _hash_array, _int_arg, _u32_arg, _u64_arg)
from .library import _c
from .region import Region
from .results import PinInfo, Stats, _backend_name
from .structs import (ConnectOpts, DaemonInfoStruct, PinOpts, RegionOpts,
                      StatsStruct, TierInfoStruct, TierStatsStruct)

# Connections open in this process, closed in a forked child before it
# runs anything else (Connection._forget_inherited()).
_live_connections = weakref.WeakSet()


def _after_fork_in_child():
    for conn in list(_live_connections):
        conn._forget_inherited()
    _live_connections.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _pin_opts(ttl_ns, priority, priority_only, demote):
    """struct kvmm_pin_opts for pin() and pin_many()."""
    # a truthy string or number set a flag the caller never meant (an
    # EINVAL from C naming nothing): bools only, as open_prefix()'s
    priority_only = _bool_arg("priority_only", priority_only)
    demote = _bool_arg("demote", demote)
    o = PinOpts()
    o.size = ctypes.sizeof(o)
    if ttl_ns is not None:
        o.flags |= PIN_F_TTL
        o.ttl_ns = _u64_arg("ttl_ns", ttl_ns)
    if priority is not None:
        o.flags |= PIN_F_PRIORITY
        o.priority = _int_arg("priority", priority, -(1 << 31),
                              (1 << 31) - 1)
    if priority_only:
        o.flags |= PIN_F_PRIORITY_ONLY
    if demote:
        o.flags |= PIN_F_DEMOTE
    return o


class Connection:
    """kvmm_connect() .. kvmm_disconnect(); a context manager.

    socket_path: None for $KVMM_SOCKET or /run/kvmm/kvmm.sock.
    map_ahead_blocks: None for libkvmm's default (1); 0 turns it off.
    """

    def __init__(self, socket_path=None, name=None, *, map_ahead_blocks=None,
                 sq_entries=0, spin_us=0):
        self._forked = False
        o = ConnectOpts()
        o.size = ctypes.sizeof(o)
        o.socket_path = _bytes_arg("socket_path", socket_path)
        o.name = _bytes_arg("name", name, _NAME_MAX)
        if map_ahead_blocks is not None:
            o.map_ahead_blocks = _u32_arg("map_ahead_blocks",
                                          map_ahead_blocks)
            o.map_ahead_set = 1
        o.sq_entries = _u32_arg("sq_entries", sq_entries)
        o.spin_us = _u32_arg("spin_us", spin_us)
        h = ctypes.c_void_p()
        self._h = None
        self._regions = []
        _check(_c.connect(ctypes.byref(o), ctypes.byref(h)), "kvmm_connect")
        self._h = h
        _live_connections.add(self)
        try:
            st = self.stats()
        except BaseException:
            self.close()
            raise
        self.session_id = st.session_id
        self.backend = st.backend_name
        self.page_size = st.page_size

    # -- life cycle
    @property
    def closed(self):
        """True after close() (or in a forked child): every call then
        raises ValueError."""
        return self._h is None

    def _handle(self):
        if self._h is None:
            if getattr(self, "_forked", False):
                raise ValueError("kvmm connection was inherited through "
                                 "fork(): connect again in this process")
            raise ValueError("kvmm connection is closed")
        return self._h

    def _forget_inherited(self):
        """In a forked child: closed, without a lock another thread of the
        parent may have held.  libkvmm's disconnect of an inherited
        connection (kc_conn_drop_inherited()) takes no lock and sends
        nothing: it frees this process's memory and closes and unmaps its
        copies.  Without it a worker kept the parent's session socket open,
        so a dead engine's session and pages lived as long as the worker,
        and the worker could still write the parent's KV through a buffer
        taken before the fork."""
        for r in self._regions:
            r._forget_inherited()
        self._regions = []
        h, self._h = self._h, None
        self._forked = True
        if h is not None:
            _c.disconnect(h)

    def close(self):
        """kvmm_disconnect(): unmaps everything; every Region and view of
        this connection becomes unusable.  A second close does nothing."""
        if self._h is None:
            return
        for r in self._regions:
            r._forget()
        self._regions = []
        h, self._h = self._h, None
        _c.disconnect(h)

    disconnect = close

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        # a Connection dropped without close(): say goodbye (as a file does)
        try:
            if getattr(self, "_h", None) is not None and _c is not None:
                self.close()
        except Exception:
            pass

    def __repr__(self):
        if self._h is None:
            return "<kvmm.Connection closed>"
        return "<kvmm.Connection session %d, %s backend>" % (
            self.session_id, self.backend)

    # -- regions
    def region(self, layers, kv_heads, head_dim, dtype_bytes, max_seqs,
               max_tokens, salt=0):
        """kvmm_region_create(): a Region (a context manager)."""
        o = RegionOpts()
        o.size = ctypes.sizeof(o)
        o.layers = _u32_arg("layers", layers)
        o.kv_heads = _u32_arg("kv_heads", kv_heads)
        o.head_dim = _u32_arg("head_dim", head_dim)
        o.dtype_bytes = _u32_arg("dtype_bytes", dtype_bytes)
        o.max_seqs = _u32_arg("max_seqs", max_seqs)
        o.max_tokens = _u32_arg("max_tokens", max_tokens)
        o.salt = _u64_arg("salt", salt)
        h = ctypes.c_void_p()
        _check(_c.region_create(self._handle(), ctypes.byref(o),
                                ctypes.byref(h)), "kvmm_region_create")
        r = Region(self, h, o)
        self._regions.append(r)
        return r

    create_region = region

    # -- steps and revocations
    def step_begin(self):
        """kvmm_step_begin(): a step (a decode or prefill pass over every
        open sequence of the connection) begins; revocations pending are
        applied first, and the views they cut released."""
        try:
            _check(_c.step_begin(self._handle()), "kvmm_step_begin")
        finally:
            self._revalidate_views()

    def step_end(self):
        """kvmm_step_end(): the step ends; revocations that came during it
        are applied now, and the views they cut released."""
        try:
            _check(_c.step_end(self._handle()), "kvmm_step_end")
        finally:
            self._revalidate_views()

    @contextlib.contextmanager
    def step(self):
        """step_begin(), the body, step_end() (also when the body raises;
        the body's exception wins)."""
        self.step_begin()
        try:
            yield self
        except BaseException:
            try:
                self.step_end()
            except KvmmError:
                pass
            raise
        self.step_end()

    def poll_fd(self):
        """kvmm_poll_fd(): readable when the daemon posted revocations
        (poll it, then process_revocations())."""
        return _check(_c.poll_fd(self._handle()), "kvmm_poll_fd")

    fileno = poll_fd

    def process_revocations(self):
        """kvmm_process_revocations(): mappings given back now (one per
        revocation entry: a page mapped twice counts twice)."""
        try:
            return _check(_c.process_revocations(self._handle()),
                          "kvmm_process_revocations")
        finally:
            self._revalidate_views()

    def _revalidate_views(self):
        for r in self._regions:
            r._revalidate_views()

    # -- misc
    def nop(self, via_socket=False):
        """kvmm_nop(): one round trip through the ring (or the socket)."""
        via_socket = _bool_arg("via_socket", via_socket)
        _check(_c.nop(self._handle(), int(via_socket)), "kvmm_nop")

    def stats(self):
        """kvmm_get_stats() as a Stats (frozen dataclass; .as_dict())."""
        st = StatsStruct()
        st.size = ctypes.sizeof(st)
        _check(_c.get_stats(self._handle(), ctypes.byref(st)),
               "kvmm_get_stats")
        if st.size != ctypes.sizeof(st):
            # libkvmm copies min(its size, ours) and says how much
            raise KvmmError(_errno.EPROTO, "kvmm_get_stats",
                            "libkvmm's struct kvmm_stats is %d bytes, this "
                            "binding's %d" % (st.size, ctypes.sizeof(st)))
        v = {f: getattr(st, f) for f, _ in StatsStruct._fields_[1:]}
        v["backend_id"] = v["backend"]
        v["backend"] = _backend_name(v["backend"])
        return Stats(**v)

    get_stats = stats

    def daemon_info(self):
        """kvmm_get_daemon_info(): what the daemon said at connect, as a
        dict: abi_major, abi_minor (check it before using a feature a
        later minor added), backend (its name, "host" or "cuda", as
        Connection.backend), backend_id (the C field's number),
        revoke_timeout_ms, page_size, pages_total, quota_pages, gpu_uuid
        (16 bytes)."""
        d = DaemonInfoStruct()
        d.size = ctypes.sizeof(d)
        _check(_c.get_daemon_info(self._handle(), ctypes.byref(d)),
               "kvmm_get_daemon_info")
        info = {f: bytes(getattr(d, f)) if f == "gpu_uuid" else getattr(d, f)
                for f, _ in DaemonInfoStruct._fields_[1:]}
        info["backend_id"] = info["backend"]
        info["backend"] = _backend_name(info["backend"])
        return info

    def tier_stats(self, block_pages=0):
        """kvmm_tier_stats() (ABI 1.19's public call; TIER_STATS, which
        any session may send): kvmmd's block cache counters as a dict, the
        C fields by name in C order ("size": the bytes the daemon sent,
        fields past them read 0) and "tiers" a list of three dicts (GPU,
        host, NVMe) of struct kvmm_tier_info's fields.  The daemon's, not
        this connection's: every engine of the kvmmd together.

        block_pages (ABI 1.21, kvmm_tier_stats_size()): 0, every block
        size's cache summed; N, the cache of blocks of N pages alone
        (ENOENT: no such size cached; EOPNOTSUPP: a daemon before 1.21,
        nothing sent).  "sizes" lists the sizes cached (nr_sizes of
        them; empty from a daemon before 1.21), "weights" their weights
        in the same order (ABI 1.25: --cache-block-pages N:W, 1 without
        :W, 0 for a size taken from a region, not named; empty from a
        daemon before 1.25)."""
        st = TierStatsStruct()
        _check(_c.tier_stats_size(self._handle(),
                                  _u32_arg("block_pages", block_pages),
                                  ctypes.byref(st), ctypes.sizeof(st)),
               "kvmm_tier_stats_size" if block_pages else "kvmm_tier_stats")
        out = {}
        for f, _ in TierStatsStruct._fields_:
            if f == "tiers":
                out[f] = [{t: getattr(ti, t)
                           for t, _ in TierInfoStruct._fields_}
                          for ti in st.tiers]
            elif f in ("sizes", "weights"):
                # nr_sizes of each; no weights from a daemon before 1.25
                # (its reply ends before them)
                n = min(st.nr_sizes, TIER_STATS_SIZES)
                end = TierStatsStruct.weights.offset + ctypes.sizeof(st.weights)
                if f == "weights" and st.size < end:
                    n = 0
                out[f] = [getattr(st, f)[i] for i in range(n)]
            else:
                out[f] = getattr(st, f)
        return out

    # -- pins
    def pin(self, hash, *, ttl_ns=None, priority=None, priority_only=False,
            demote=False):
        """kvmm_block_pin(): ttl_ns sets KVMM_PIN_F_TTL, priority
        KVMM_PIN_F_PRIORITY (with priority_only: only that), demote
        KVMM_PIN_F_DEMOTE.  Returns a PinInfo.  At the connection's
        quota of pins: PinQuotaError (a KvmmError, EDQUOT) with .pins and
        .pin_quota."""
        o = _pin_opts(ttl_ns, priority, priority_only, demote)
        hash = _u64_arg("hash", hash)
        rc = _c.block_pin(self._handle(), hash, ctypes.byref(o))
        if rc == -_errno.EDQUOT:
            # libkvmm fills pins and pin_quota from the refusal (ABI
            # 1.13): the caller needs them to decide what to unpin
            raise PinQuotaError("kvmm_block_pin", o.pins, o.pin_quota)
        _check(rc, "kvmm_block_pin")
        return PinInfo(o.tier, o.pins, o.pin_quota, o.expires_ns)

    def pin_many(self, hashes, *, ttl_ns=None, priority=None,
                 priority_only=False, demote=False):
        """kvmm_block_pin_many() (ABI 1.19): pin() of each hash, in order,
        in one round trip, with the same options.  Returns a list with
        one entry per hash: its tier (0 GPU, 1 host, 2 NVMe) when pinned,
        else the negative errno its own pin() would have had (-ENOENT not
        cached, -EDQUOT past the quota).  KvmmError for the whole call
        (bad options; EOPNOTSUPP from a daemon before 1.19)."""
        arr, n = _hash_array("hashes", hashes)
        o = _pin_opts(ttl_ns, priority, priority_only, demote)
        res = (ctypes.c_int32 * max(n, 1))()
        _check(_c.block_pin_many(self._handle(), arr, n, ctypes.byref(o),
                                 res), "kvmm_block_pin_many")
        return list(res[:n])

    def unpin(self, hash):
        """kvmm_block_unpin()."""
        _check(_c.block_unpin(self._handle(), _u64_arg("hash", hash)),
               "kvmm_block_unpin")
