# SPDX-License-Identifier: MIT
"""Block identity: kvmm_hash_seed(), kvmm_block_hash() and
kvmm_hash_chain(), the hashes a block is published and found under."""

import ctypes

from .errors import _check, _model_arg, _token_array, _u32_arg, _u64_arg
from .library import _c
from .structs import HashLayout


def hash_seed(layers, kv_heads, head_dim, dtype_bytes, tokens_per_block,
              model=None):
    """kvmm_hash_seed(): the seed of a model's KV layout (an int).  model:
    str (hashed as UTF-8), bytes or None (no name).  Region.hash_seed()
    takes the layout from a region."""
    lay = HashLayout()
    lay.size = ctypes.sizeof(lay)
    lay.model = _model_arg(model)
    lay.layers = _u32_arg("layers", layers)
    lay.kv_heads = _u32_arg("kv_heads", kv_heads)
    lay.head_dim = _u32_arg("head_dim", head_dim)
    lay.dtype_bytes = _u32_arg("dtype_bytes", dtype_bytes)
    lay.tokens_per_block = _u32_arg("tokens_per_block", tokens_per_block)
    seed = ctypes.c_uint64()
    _check(_c.hash_seed(ctypes.byref(lay), ctypes.byref(seed)),
           "kvmm_hash_seed")
    return seed.value


def block_hash(seed, parent, tokens, salt=0):
    """kvmm_block_hash(): the hash of one block of tokens whose previous
    block's hash is parent (0 for block 0)."""
    seed = _u64_arg("seed", seed)
    parent = _u64_arg("parent", parent)
    salt = _u64_arg("salt", salt)
    arr, n = _token_array(tokens)
    h = ctypes.c_uint64()
    _check(_c.block_hash(seed, parent, salt, arr, n, ctypes.byref(h)),
           "kvmm_block_hash")
    return h.value


def hash_chain(seed, tokens, tokens_per_block, salt=0):
    """kvmm_hash_chain(): the hashes of the full blocks of tokens (a list
    of ints, len(tokens) // tokens_per_block of them; a partial tail block
    is not hashed), for Region.publish() and Region.open_prefix()."""
    seed = _u64_arg("seed", seed)
    salt = _u64_arg("salt", salt)
    tpb = _u32_arg("tokens_per_block", tokens_per_block)
    arr, n = _token_array(tokens)
    nblocks = n // tpb if tpb else 0
    out = (ctypes.c_uint64 * max(nblocks, 1))()
    got = _check(_c.hash_chain(seed, salt, arr, n, tpb, out, nblocks),
                 "kvmm_hash_chain")
    return list(out[:got])
