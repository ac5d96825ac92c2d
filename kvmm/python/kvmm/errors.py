# SPDX-License-Identifier: MIT
"""kvmm_strerror(), the names of the C enums (kvmm_block_action_string(),
kvmm_query_tier_string()), the exceptions a failed call raises (KvmmError
and its PinQuotaError and LengthError), and the checks that turn a Python
argument into the C parameter or raise TypeError / ValueError."""

import array
import ctypes
import errno as _errno
import operator
import os

from .constants import _U32_MAX, _U64_MAX
from .library import _c


def strerror(err):
    """kvmm_strerror(): the text for an errno (either sign)."""
    err = _int_arg("err", err, -(1 << 31), (1 << 31) - 1)
    return _c.strerror(err).decode("utf-8", "replace")


def block_action_string(action):
    """kvmm_block_action_string(): "gpu-shared", ... or "unknown"."""
    action = _int_arg("action", action, 0, 255)
    return _c.block_action_string(action).decode("ascii", "replace")


def query_tier_string(tier):
    """kvmm_query_tier_string(): "gpu", "host", "nvme", "moving" (QUERY_*)
    or "unknown"; also the name of a pin's tier (0..2)."""
    tier = _int_arg("tier", tier, 0, 255)
    return _c.query_tier_string(tier).decode("ascii", "replace")


class KvmmError(OSError):
    """A libkvmm call failed: .errno is the positive errno, .strerror
    kvmm_strerror()'s text, .function the C function."""

    def __init__(self, err, function, detail=None):
        text = strerror(err)
        if detail:
            text = "%s (%s)" % (text, detail)
        super().__init__(err, text)
        self.function = function
        self.detail = detail

    def __reduce__(self):  # pickling (multiprocessing) keeps every field
        return (KvmmError, (self.errno, self.function, self.detail))

    def __str__(self):
        return "[Errno %d] %s: %s" % (self.errno, self.function,
                                      self.strerror)


class PinQuotaError(KvmmError):
    """Connection.pin()'s EDQUOT: the connection holds its quota of pins.
    .pins is how many it holds, .pin_quota how many it may (what the
    daemon's refusal says; both 0 from a daemon older than ABI 1.13).
    Nothing was pinned: unpin one before pinning another."""

    def __init__(self, function, pins, pin_quota):
        if pin_quota:
            detail = "pin quota: %d of %d pins held" % (pins, pin_quota)
        else:
            detail = "pin quota"
        super().__init__(_errno.EDQUOT, function, detail)
        self.pins = pins
        self.pin_quota = pin_quota

    def __reduce__(self):
        return (PinQuotaError, (self.function, self.pins, self.pin_quota))


class LengthError(KvmmError, ValueError):
    """Sequence.extend(n)'s EINVAL when n is no length to grow to: n
    is the new length (\"grow to\", not \"grow by\"), so less than the
    sequence has, or more than the region's max_tokens.  Both a KvmmError
    (errno EINVAL, as before) and a ValueError.  Nothing changed."""

    def __init__(self, function, message):
        super().__init__(_errno.EINVAL, function, message)
        self.message = message

    def __reduce__(self):
        return (LengthError, (self.function, self.message))

    def __str__(self):
        return self.message


def _check(rc, function):
    if rc < 0:
        raise KvmmError(-rc, function)
    return rc


def _int_arg(name, v, lo, hi):
    # ints and what converts to one exactly (numpy integers), never bools
    # or floats
    if isinstance(v, bool):
        raise TypeError("%s must be an int, not bool" % name)
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError("%s must be an int, not %s"
                        % (name, type(v).__name__)) from None
    if v < lo or v > hi:
        raise ValueError("%s=%d is out of range [%d, %d]" % (name, v, lo, hi))
    return v


def _bool_arg(name, v):
    """A flag argument: True or False only (numpy's bool_ too, not 1 or
    "yes", which would set a flag the caller may not have meant)."""
    if isinstance(v, bool):
        return v
    if type(v).__name__ == "bool_":  # numpy.bool_, without importing numpy
        return bool(v)
    raise TypeError("%s must be a bool, not %s" % (name, type(v).__name__))


def _u32_arg(name, v):
    return _int_arg(name, v, 0, _U32_MAX)


def _u64_arg(name, v):
    return _int_arg(name, v, 0, _U64_MAX)


def _bytes_arg(name, v, max_len=None):
    """A str/bytes/PathLike argument as NUL-free bytes, or None."""
    if v is None:
        return None
    if isinstance(v, str) or isinstance(v, os.PathLike):
        b = os.fsencode(v)
    elif isinstance(v, bytes):
        b = v
    else:
        raise TypeError("%s must be str, bytes or a path, not %s"
                        % (name, type(v).__name__))
    if b"\0" in b:
        raise ValueError("%s contains a NUL byte" % name)
    if max_len is not None and len(b) > max_len:
        raise ValueError("%s is %d bytes; at most %d are kept"
                         % (name, len(b), max_len))
    return b


def _hash_array(name, hashes):
    if isinstance(hashes, (str, bytes)) or not hasattr(hashes, "__iter__"):
        raise TypeError("%s must be a sequence of ints" % name)
    hs = [_u64_arg("%s[%d]" % (name, i), h) for i, h in enumerate(hashes)]
    return (ctypes.c_uint64 * max(len(hs), 1))(*hs), len(hs)


def _token_array(tokens):
    """A sequence of token ids (ints of 32 bits) as a ctypes uint32 array
    and its length."""
    if isinstance(tokens, (str, bytes, bytearray)) or \
            not hasattr(tokens, "__iter__"):
        raise TypeError("tokens must be a sequence of ints, not %s"
                        % type(tokens).__name__)
    ts = list(tokens)
    n = len(ts)
    if not all(type(t) is int for t in ts):
        # bools, floats, numpy integers: one by one
        ts = [_u32_arg("tokens[%d]" % i, t) for i, t in enumerate(ts)]
    try:
        # plain ints (the usual prompt): array checks the range in C
        arr = array.array("I", ts or [0])
    except OverflowError:
        for i, t in enumerate(ts):
            _u32_arg("tokens[%d]" % i, t)
        raise
    if arr.itemsize != 4:  # (unsigned int is 32 bits wherever libkvmm is)
        return (ctypes.c_uint32 * max(n, 1))(*ts), n
    return (ctypes.c_uint32 * len(arr)).from_buffer(arr), n


def _model_arg(model):
    """A model name as the bytes hashed into the seed: str as UTF-8."""
    if isinstance(model, str):
        model = model.encode("utf-8")
    elif model is not None and not isinstance(model, bytes):
        raise TypeError("model must be str, bytes or None, not %s"
                        % type(model).__name__)
    return _bytes_arg("model", model)
