# SPDX-License-Identifier: MIT
"""Region (kvmm_region_create() .. kvmm_region_destroy()) and its
Sequence objects: extend, truncate, close, pointers and the host
backend's memoryviews (released when the range behind them may go), the
read-only blocks of a shared prefix, publish, prefix open and query,
wait_ready."""

import ctypes
import errno as _errno
import inspect
import sys
import threading

from .constants import (PREFIX_MAX_BLOCKS, PREFIX_OPEN_EARLY,
                        PREFIX_OPEN_SEGMENTS, WAIT_READY_POLL)
from .errors import (KvmmError, LengthError, _bool_arg, _check, _hash_array,
                     _model_arg, _u32_arg, _u64_arg, block_action_string,
                     query_tier_string)
from .library import _c
from .results import PrefixResult, Readiness
from .structs import PrefixOpts


class Region:
    """kvmm_region_create() .. kvmm_region_destroy(); a context manager.

    Methods taking a sequence id mirror the C calls; Sequence objects
    (open_seq(), open_prefix(), seq()) call them for one id.

    Attributes: the layout it was made with (layers, kv_heads, head_dim,
    dtype_bytes, max_seqs, max_tokens, salt), conn, tokens_per_block
    (kvmm_region_tokens_per_block(), asked once), token_bytes (one
    token of one layer's K or V) and pages_per_block (2 * layers).
    """

    def __init__(self, conn, handle, o):
        self.conn = conn
        self._h = handle
        self.layers = o.layers
        self.kv_heads = o.kv_heads
        self.head_dim = o.head_dim
        self.dtype_bytes = o.dtype_bytes
        self.max_seqs = o.max_seqs
        self.max_tokens = o.max_tokens
        self.salt = o.salt
        self.tokens_per_block = _c.region_tokens_per_block(handle)
        # bytes of one token in one layer's K (or V)
        self.token_bytes = o.kv_heads * o.head_dim * o.dtype_bytes
        self.pages_per_block = 2 * o.layers
        # views handed out: seq -> [most tokens any covers, [[tokens,
        # memoryview], ...]], under _views_lock
        self._views = {}
        self._views_lock = threading.Lock()

    @property
    def destroyed(self):
        """True after destroy() (or the connection's close()): every call
        then raises ValueError."""
        return self._h is None

    def _handle(self):
        if self._h is None:
            raise ValueError("kvmm region is destroyed")
        self.conn._handle()  # (a closed connection clears _h too)
        return self._h

    def _forget(self):
        with self._views_lock:
            for seq in list(self._views):
                self._release_views_locked(seq, -1)
        self._h = None

    def _forget_inherited(self):
        # _views_lock is as the parent's threads left it: a fresh one
        self._views_lock = threading.Lock()
        for seq in list(self._views):
            self._release_views_locked(seq, -1)
        self._h = None

    def destroy(self):
        """kvmm_region_destroy(): closes its sequences, unmaps its ranges.
        A second destroy does nothing."""
        if self._h is None:
            return
        h = self._handle()
        self._forget()
        if self in self.conn._regions:
            self.conn._regions.remove(self)
        _check(_c.region_destroy(h), "kvmm_region_destroy")

    close = destroy

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False

    def __repr__(self):
        return "<kvmm.Region %s%d layers, %d tokens per block>" % (
            "destroyed, " if self._h is None else "", self.layers,
            self.tokens_per_block)

    # -- sequences by id (the C calls)
    def seq(self, seq_id):
        """A Sequence object for an id (no call: libkvmm checks it on use)."""
        return Sequence(self, _u32_arg("seq_id", seq_id))

    def open_seq(self):
        """kvmm_seq_open(): a new, empty Sequence."""
        s = ctypes.c_uint32()
        _check(_c.seq_open(self._handle(), ctypes.byref(s)), "kvmm_seq_open")
        return Sequence(self, s.value)

    def seq_extend(self, seq, new_len):
        """kvmm_seq_extend(): grow the sequence to new_len tokens (the new
        length, not an increment; up to max_tokens): every layer's K and V
        are backed up to new_len on return.  new_len below the length, or
        past max_tokens, raises LengthError (a KvmmError EINVAL and a
        ValueError) saying which; the same length does nothing.  From a
        length inside a read-only block it unshares that block first
        (block_unshare()).  When a revocation took blocks below new_len
        meanwhile, the range is backed but len() is shorter: recompute
        from there and extend again."""
        h = self._handle()
        seq = _u32_arg("seq", seq)
        new_len = _u32_arg("new_len", new_len)
        try:
            rc = _c.seq_extend(h, seq, new_len)
            if rc == -_errno.EINVAL:
                self._extend_einval(seq, new_len)
            _check(rc, "kvmm_seq_extend")
        finally:
            # an extend that finds its blocks revoked applies the pending
            # revocations of every sequence of the connection
            self.conn._revalidate_views()

    def _extend_einval(self, seq, new_len):
        # what is wrong with new_len, when it is that (a bare EINVAL sent
        # extend(len(tokens) - len(seq)) callers looking elsewhere)
        if new_len > self.max_tokens:
            raise LengthError(
                "kvmm_seq_extend",
                "extend(n) grows to n tokens: %d is more than the "
                "region's max_tokens (%d)" % (new_len, self.max_tokens))
        have = _c.seq_len(self._handle(), seq)
        if have > new_len:
            raise LengthError(
                "kvmm_seq_extend",
                "extend(n) grows to n tokens; the sequence already has %d "
                "(n = %d: truncate() shortens)" % (have, new_len))

    def seq_truncate(self, seq, new_len):
        """kvmm_seq_truncate(): shorten the sequence to new_len tokens
        (above the length: KvmmError EINVAL); whole blocks past it go back
        to kvmmd, and the views reaching past it are released."""
        h = self._handle()
        seq = _u32_arg("seq", seq)
        new_len = _u32_arg("new_len", new_len)
        try:
            _check(_c.seq_truncate(h, seq, new_len), "kvmm_seq_truncate")
        finally:
            # libkvmm unmaps before asking the daemon: error or not, the
            # length says what is still mapped
            self._revalidate_views(seq)

    def seq_close(self, seq):
        """kvmm_seq_close(): unmap the sequence and give its blocks back
        (published blocks stay cached); its views are released.  A closed
        or unknown id: KvmmError EINVAL."""
        h = self._handle()
        seq = _u32_arg("seq", seq)
        try:
            _check(_c.seq_close(h, seq), "kvmm_seq_close")
        finally:
            self._revalidate_views(seq)

    def seq_len(self, seq):
        """kvmm_seq_len(): length in tokens."""
        return _check(_c.seq_len(self._handle(), _u32_arg("seq", seq)),
                      "kvmm_seq_len")

    def _ptr(self, fn, name, seq, layer):
        p = fn(self._handle(), _u32_arg("seq", seq),
               _u32_arg("layer", layer))
        if not p:
            raise KvmmError(_errno.EINVAL, name,
                            "sequence %d or layer %d out of range"
                            % (seq, layer))
        return p

    def k_ptr(self, seq, layer):
        """kvmm_seq_k_ptr(): the address of the sequence's K in layer (a
        host address, or a CUdeviceptr on the cuda backend)."""
        return self._ptr(_c.seq_k_ptr, "kvmm_seq_k_ptr", seq, layer)

    def v_ptr(self, seq, layer):
        """kvmm_seq_v_ptr(): as k_ptr(), for V."""
        return self._ptr(_c.seq_v_ptr, "kvmm_seq_v_ptr", seq, layer)

    def _view(self, which, seq, layer, tokens, start):
        seq = _u32_arg("seq", seq)
        layer = _u32_arg("layer", layer)
        start = _u32_arg("start", start)
        if self.conn.backend != "host":
            raise KvmmError(_errno.EOPNOTSUPP, "%s_view" % which,
                            "the %s backend's pointers are device addresses:"
                            " use %s_ptr() with torch or cupy"
                            % (self.conn.backend, which))
        if tokens is not None:
            tokens = _u32_arg("tokens", tokens)
        # the address never changes: taken before the lock
        if which == "k":
            p = self.k_ptr(seq, layer)
        else:
            p = self.v_ptr(seq, layer)
        # The length is read and the view registered under one hold of
        # _views_lock: a revocation another thread applies in between
        # revalidates after it (it takes the lock), so it finds this view
        # and releases it.  Read before the lock, a revocation applied
        # there checked the views already registered and left this one
        # over unmapped memory.
        with self._views_lock:
            length = self.seq_len(seq)
            if start > length:
                raise ValueError("start=%d is past the sequence's length "
                                 "%d" % (start, length))
            if tokens is None:
                tokens = length - start
            if start + tokens > length:
                raise ValueError("start + tokens = %d is past the "
                                 "sequence's length %d (extend it first)"
                                 % (start + tokens, length))
            n = tokens * self.token_bytes
            mv = memoryview((ctypes.c_ubyte * n).from_address(
                p + start * self.token_bytes)).cast("B")
            # A cached block a prefix open shared is mapped read-only
            # (writing it would fault): a view over any of it is
            # read-only, so that a write raises TypeError instead
            tpb = self.tokens_per_block
            h = self._handle()
            for b in range(start // tpb, (start + tokens + tpb - 1) // tpb):
                if _c.seq_block_readonly(h, seq, b) == 1:
                    mv = mv.toreadonly()
                    break
            ent = self._views.setdefault(seq, [0, []])
            # views nobody but this list holds are gone: forget them
            # (2: the list's reference and getrefcount's argument)
            ent[1] = [v for v in ent[1] if sys.getrefcount(v[1]) > 2]
            ent[1].append([start + tokens, mv])
            ent[0] = max(v[0] for v in ent[1])
        return mv

    def k_view(self, seq, layer, tokens=None, start=0):
        """Tokens [start, start + tokens) (tokens default: to the end) of
        the sequence's K in layer as a memoryview (host backend only; see
        the module documentation for how long it stays valid): writable
        over the sequence's own blocks, read-only when it covers a cached
        block a prefix open shared (block_readonly())."""
        return self._view("k", seq, layer, tokens, start)

    def v_view(self, seq, layer, tokens=None, start=0):
        """As k_view(), for V."""
        return self._view("v", seq, layer, tokens, start)

    def block_readonly(self, seq, block):
        """kvmm_seq_block_readonly(): True for a cached block a prefix
        open shared (mapped read-only), False for the sequence's own."""
        return bool(_check(_c.seq_block_readonly(
            self._handle(), _u32_arg("seq", seq), _u32_arg("block", block)),
            "kvmm_seq_block_readonly"))

    def block_unshare(self, seq, block):
        """kvmm_seq_block_unshare() (ABI 1.20): make a read-only block
        (a cached block a prefix open shared) the sequence's own: kvmmd
        copies it into fresh pages, mapped read-write at the same
        addresses, so block_readonly() is False and a view taken after
        this is writable (one taken before stays read-only: take it
        again).  The cache's copy, which other readers get, is unchanged.
        Nothing to do for a block that is the sequence's own already.
        Raises EDQUOT (the uid's quota, the block stays shared),
        EOPNOTSUPP (a daemon before 1.20), ENODATA (not backed)."""
        _check(_c.seq_block_unshare(self._handle(), _u32_arg("seq", seq),
                                    _u32_arg("block", block)),
               "kvmm_seq_block_unshare")

    def _release_views_locked(self, seq, length):
        """Release the views of seq that reach past length tokens."""
        ent = self._views.get(seq)
        if ent is None or ent[0] <= length:
            return
        keep = []
        for v in ent[1]:
            if v[0] <= length:
                keep.append(v)
                continue
            try:
                v[1].release()
            except BufferError:
                pass  # exported (numpy...): documented, nothing to do
        if keep:
            self._views[seq] = [max(v[0] for v in keep), keep]
        else:
            del self._views[seq]

    def _revalidate_views(self, only=None):
        """Release the views (of sequence only, or all) that reach past
        their sequence's length now: closed, truncated, revoked."""
        h = self._h
        if h is None:
            return
        # _views is looked at under the lock only: a view being made
        # (_view) is registered before the lock is free
        with self._views_lock:
            for seq in [only] if only is not None else list(self._views):
                if seq in self._views:
                    # -errno (closed) is below every view
                    self._release_views_locked(seq, _c.seq_len(h, seq))

    def hash_seed(self, model=None):
        """kvmm_region_hash_seed(): the seed of this region's layout
        (layers, kv_heads, head_dim, dtype_bytes, tokens_per_block) and
        model (str as UTF-8, bytes or None), for hash_chain()."""
        h = self._handle()
        seed = ctypes.c_uint64()
        _check(_c.region_hash_seed(h, _model_arg(model), ctypes.byref(seed)),
               "kvmm_region_hash_seed")
        return seed.value

    def block_pages(self, seq, block):
        """kvmm_seq_block_pages(): the daemon page ids of one block (layer
        0 K, layer 0 V, ...), a list of pages_per_block ints."""
        ids = (ctypes.c_uint32 * self.pages_per_block)()
        n = _check(_c.seq_block_pages(self._handle(), _u32_arg("seq", seq),
                                      _u32_arg("block", block), ids,
                                      self.pages_per_block),
                   "kvmm_seq_block_pages")
        return list(ids[:n])

    def publish(self, seq, first_block, hashes, parent_hash=0):
        """kvmm_block_publish(): publish blocks first_block.. under hashes
        (one per block); returns how many of them the cache now holds."""
        h = self._handle()
        seq = _u32_arg("seq", seq)
        first_block = _u32_arg("first_block", first_block)
        parent_hash = _u64_arg("parent_hash", parent_hash)
        arr, n = _hash_array("hashes", hashes)
        return _check(_c.block_publish(h, seq, first_block, n, parent_hash,
                                       arr), "kvmm_block_publish")

    def wait_ready(self, seq, upto_block, poll=False):
        """kvmm_seq_wait_ready() (ABI 1.8): after an early open, wait until
        no block below upto_block still loads (poll=True: do not wait); a
        Readiness with the blocks whose reload failed."""
        poll = _bool_arg("poll", poll)
        upto = _u32_arg("upto_block", upto_block)
        cap = max(min(upto, PREFIX_MAX_BLOCKS), 1)
        failed = (ctypes.c_uint32 * cap)()
        pending = ctypes.c_uint32()
        n = _check(_c.seq_wait_ready(self._handle(), _u32_arg("seq", seq),
                                     upto, WAIT_READY_POLL if poll else 0,
                                     failed, cap, ctypes.byref(pending)),
                   "kvmm_seq_wait_ready")
        return Readiness(list(failed[:min(n, cap)]), pending.value)

    def query_prefix(self, hashes):
        """kvmm_prefix_query() (ABI 1.19): the tiers of the longest cached
        prefix of hashes, one name a block ("gpu", "host", "nvme",
        "moving"); [] when the first block is not cached.  Opens nothing
        and changes nothing (no restore, pin or policy use)."""
        h = self._handle()
        arr, n = _hash_array("hashes", hashes)
        tiers = (ctypes.c_uint8 * max(n, 1))()
        nr = _check(_c.prefix_query(h, arr, n, tiers, 0), "kvmm_prefix_query")
        return [query_tier_string(t) for t in tiers[:nr]]

    def open_prefix(self, hashes, plan=False, segments=False, early=False):
        """kvmm_seq_open_prefix(), or with plan=True
        kvmm_seq_open_prefix_opts() with per-block actions: a
        PrefixResult.  segments=True (implies plan=True) sets
        PREFIX_OPEN_SEGMENTS: blocks cached after a hole are reused, each
        hole a "recompute" block.  early=True (implies plan=True) sets
        PREFIX_OPEN_EARLY (ABI 1.8): it returns before the reloads are done;
        wait_ready() says when they are."""
        h = self._handle()
        plan = _bool_arg("plan", plan)
        segments = _bool_arg("segments", segments)
        early = _bool_arg("early", early)
        plan = plan or segments or early
        arr, n = _hash_array("hashes", hashes)
        seq = ctypes.c_uint32()
        nr = ctypes.c_uint32()
        if not plan:
            _check(_c.seq_open_prefix(h, arr, n, ctypes.byref(seq),
                                      ctypes.byref(nr)),
                   "kvmm_seq_open_prefix")
            return PrefixResult(Sequence(self, seq.value), nr.value)
        acts = (ctypes.c_uint8 * max(n, 1))()
        o = PrefixOpts()
        o.size = ctypes.sizeof(o)
        o.flags = ((PREFIX_OPEN_SEGMENTS if segments else 0) |
                   (PREFIX_OPEN_EARLY if early else 0))
        o.actions = ctypes.cast(acts, ctypes.POINTER(ctypes.c_uint8))
        _check(_c.seq_open_prefix_opts(h, arr, n, ctypes.byref(seq),
                                       ctypes.byref(nr), ctypes.byref(o)),
               "kvmm_seq_open_prefix_opts")
        codes = list(acts[:nr.value])
        return PrefixResult(Sequence(self, seq.value), nr.value,
                            [block_action_string(a) for a in codes], codes,
                            o.shared, o.reloaded_host, o.reloaded_nvme,
                            o.recompute)


class Sequence:
    """One sequence of a Region, by id; a context manager that closes it.

    len(seq) is kvmm_seq_len(); the methods are Region's for this id
    (seq.extend(n) is region.seq_extend(seq.id, n), seq.k_view(layer)
    region.k_view(seq.id, layer)), with Region's documentation.
    """

    def __init__(self, region, seq_id):
        self.region = region
        self.id = seq_id
        self._closed = False

    def extend(self, new_len):
        self.region.seq_extend(self.id, new_len)

    def truncate(self, new_len):
        self.region.seq_truncate(self.id, new_len)

    def close(self):
        """kvmm_seq_close(); closing an already closed sequence raises the
        errno libkvmm gives (EINVAL)."""
        self.region.seq_close(self.id)
        self._closed = True

    def __len__(self):
        return self.region.seq_len(self.id)

    @property
    def length(self):
        """kvmm_seq_len(): the length in tokens, as len(seq)."""
        return self.region.seq_len(self.id)

    def k_ptr(self, layer):
        return self.region.k_ptr(self.id, layer)

    def v_ptr(self, layer):
        return self.region.v_ptr(self.id, layer)

    def k_view(self, layer, tokens=None, start=0):
        return self.region.k_view(self.id, layer, tokens, start)

    def v_view(self, layer, tokens=None, start=0):
        return self.region.v_view(self.id, layer, tokens, start)

    def block_readonly(self, block):
        return self.region.block_readonly(self.id, block)

    def block_unshare(self, block):
        return self.region.block_unshare(self.id, block)

    def block_pages(self, block):
        return self.region.block_pages(self.id, block)

    def wait_ready(self, upto_block, poll=False):
        return self.region.wait_ready(self.id, upto_block, poll)

    def publish(self, first_block, hashes, parent_hash=0):
        return self.region.publish(self.id, first_block, hashes, parent_hash)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # only if still open through this object and its region
        if not self._closed and not self.region.destroyed:
            self.close()
        return False

    def __repr__(self):
        return "<kvmm.Sequence %d%s>" % (self.id,
                                         " closed" if self._closed else "")


def _sequence_docs():
    """Each Sequence method that is Region's for the sequence's id gets
    Region's docstring (help(seq.extend) names kvmm_seq_extend() and says
    what it does), under a line that says so."""
    same = {"extend": "seq_extend", "truncate": "seq_truncate",
            "k_ptr": "k_ptr", "v_ptr": "v_ptr", "k_view": "k_view",
            "v_view": "v_view", "block_readonly": "block_readonly",
            "block_unshare": "block_unshare", "block_pages": "block_pages",
            "wait_ready": "wait_ready", "publish": "publish"}
    for mine, theirs in same.items():
        getattr(Sequence, mine).__doc__ = (
            "Region.%s() for this sequence's id:\n\n%s"
            % (theirs, inspect.cleandoc(getattr(Region, theirs).__doc__)))


_sequence_docs()
