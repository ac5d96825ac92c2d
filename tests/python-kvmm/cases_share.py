# SPDX-License-Identifier: MIT
"""Blocks shared between processes through the binding: share (a
writer's two blocks opened and read by this process, one unshared) and
hash (the golden hash values, and two processes' own chains meeting).
Split from tests/python-kvmm.py, which runs them."""
import array
import ctypes
import ctypes.util
import errno
import json
import struct
import subprocess
import sys

from kvmm_test import (kvmm, Daemon, HASHES, PPB, REGION, RUNNER, TPB, check,
                       check_eq, fail, pattern, published_by_writer, raises)


# ---- share -----------------------------------------------------------------

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
        w = subprocess.Popen([sys.executable, RUNNER, "hashwriter",
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
