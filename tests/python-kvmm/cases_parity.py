# SPDX-License-Identifier: MIT
"""parity: the binding against the C API it binds, read from the headers
themselves, so that a call, a struct or a constant kvmm.h gains without
its Python counterpart fails here: every function of kvmm.h is bound in
kvmm._c, has a Python counterpart whose docstring names it (help() says
which C call it is), and a row in Documentation/python.md's API table;
every struct kvmm.h defines is mirrored (tests/python-layout.sh compares
the layouts); every public constant equals the C compiler's value, the
ABI minor included; every public method and function has a docstring.
No daemon.  Split from tests/python-kvmm.py, which runs it."""
import inspect
import os
import re
import shutil
import subprocess
import tempfile

from kvmm_test import kvmm, SRC, check, check_eq, fail

HEADER = os.path.join(SRC, "kvmm", "include", "kvmm", "kvmm.h")

# C function -> the Python names that call it (each docstring names it)
COUNTERPARTS = {
    "kvmm_connect": ["Connection"],
    "kvmm_disconnect": ["Connection.close"],
    "kvmm_region_create": ["Connection.region"],
    "kvmm_region_destroy": ["Region.destroy"],
    "kvmm_region_tokens_per_block": ["Region"],
    "kvmm_seq_open": ["Region.open_seq"],
    "kvmm_seq_extend": ["Region.seq_extend", "Sequence.extend"],
    "kvmm_seq_truncate": ["Region.seq_truncate",
                          "Sequence.truncate"],
    "kvmm_seq_close": ["Region.seq_close", "Sequence.close"],
    "kvmm_seq_len": ["Region.seq_len", "Sequence.length"],
    "kvmm_seq_k_ptr": ["Region.k_ptr", "Sequence.k_ptr"],
    "kvmm_seq_v_ptr": ["Region.v_ptr", "Sequence.v_ptr"],
    "kvmm_seq_block_pages": ["Region.block_pages",
                             "Sequence.block_pages"],
    "kvmm_seq_block_readonly": ["Region.block_readonly",
                                "Sequence.block_readonly"],
    "kvmm_seq_block_unshare": ["Region.block_unshare",
                               "Sequence.block_unshare"],
    "kvmm_hash_seed": ["hash_seed"],
    "kvmm_region_hash_seed": ["Region.hash_seed"],
    "kvmm_block_hash": ["block_hash"],
    "kvmm_hash_chain": ["hash_chain"],
    "kvmm_block_publish": ["Region.publish", "Sequence.publish"],
    "kvmm_seq_open_prefix": ["Region.open_prefix"],
    "kvmm_seq_open_prefix_opts": ["Region.open_prefix"],
    "kvmm_block_action_string": ["block_action_string"],
    "kvmm_prefix_query": ["Region.query_prefix"],
    "kvmm_query_tier_string": ["query_tier_string"],
    "kvmm_seq_wait_ready": ["Region.wait_ready",
                            "Sequence.wait_ready"],
    "kvmm_block_pin": ["Connection.pin"],
    "kvmm_block_unpin": ["Connection.unpin"],
    "kvmm_block_pin_many": ["Connection.pin_many"],
    "kvmm_step_begin": ["Connection.step_begin"],
    "kvmm_step_end": ["Connection.step_end"],
    "kvmm_poll_fd": ["Connection.poll_fd"],
    "kvmm_process_revocations": ["Connection.process_revocations"],
    "kvmm_nop": ["Connection.nop"],
    "kvmm_get_stats": ["Connection.stats"],
    "kvmm_tier_stats": ["Connection.tier_stats"],
    "kvmm_tier_stats_size": ["Connection.tier_stats"],
    "kvmm_strerror": ["strerror", "KvmmError"],
    "kvmm_get_daemon_info": ["Connection.daemon_info"],
}


def resolve(name):
    """kvmm.NAME ("Region.seq_extend"), or a failure naming it."""
    obj = kvmm
    for part in name.split("."):
        if part not in vars(obj) and not hasattr(obj, part):
            fail("kvmm.%s does not exist" % name)
        # the property itself, not what it returns on the class
        obj = vars(obj)[part] if part in vars(obj) else getattr(obj, part)
    return obj


def c_code(path):
    """The header without its comments."""
    with open(path) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def api_table():
    """The rows of python.md's API table (from '## API' to the next
    '## '), each a line starting with '|'."""
    with open(os.path.join(SRC, "Documentation", "python.md")) as f:
        doc = f.read()
    api = doc.split("\n## API\n", 1)[1].split("\n## ", 1)[0]
    return [ln for ln in api.splitlines() if ln.startswith("|")]


def c_values(names):
    """The C compiler's value of each KVMM_NAME (macros and enums)."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    check(cc is not None, "no C compiler (cc)")
    lines = ["#include <stdio.h>", '#include "kvmm/kvmm.h"',
             "int main(void) {"]
    for n in names:
        lines.append('printf("%%llu\\n", (unsigned long long)(KVMM_%s));'
                     % n)
    lines += ["return 0;", "}"]
    tmp = tempfile.mkdtemp(prefix="kvmm-py-parity-")
    try:
        src = os.path.join(tmp, "values.c")
        exe = os.path.join(tmp, "values")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        out = subprocess.run([cc, "-I", os.path.join(SRC, "kvmm", "include"),
                              "-o", exe, src], capture_output=True, text=True)
        if out.returncode:
            fail("constants program: %s" % out.stderr)
        got = subprocess.run([exe], capture_output=True, text=True,
                             check=True).stdout.split()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dict(zip(names, (int(v) for v in got)))


def case_parity():
    code = c_code(HEADER)
    funcs = sorted(set(re.findall(r"\b(kvmm_[a-z0-9_]+)\s*\(", code)))
    check(len(funcs) >= 39, "functions found in kvmm.h: %d" % len(funcs))
    table = api_table()
    for fn in funcs:
        check(hasattr(kvmm._c, fn[len("kvmm_"):]),
              "%s is not bound (kvmm/python/kvmm/library.py)" % fn)
        if fn not in COUNTERPARTS:
            fail("kvmm.h's %s has no Python counterpart: bind it, give it "
                 "a row in python.md and an entry in COUNTERPARTS" % fn)
        for name in COUNTERPARTS[fn]:
            doc = inspect.getdoc(resolve(name)) or ""
            check(re.search(r"\b%s\b" % fn, doc),
                  "the docstring of kvmm.%s does not name %s: %r"
                  % (name, fn, doc[:120]))
        check(any(re.search(r"`%s`" % fn, row) for row in table),
              "python.md's API table has no row naming `%s`" % fn)
    check_eq(sorted(set(COUNTERPARTS) - set(funcs)), [],
             "COUNTERPARTS not in kvmm.h")

    # every struct kvmm.h defines is mirrored (python-layout checks them)
    structs = set(re.findall(r"\bstruct\s+(kvmm_[a-z0-9_]+)\s*\{", code))
    check_eq(sorted(structs - set(kvmm.STRUCTS)), [],
             "kvmm.h's structs without a mirror in kvmm.STRUCTS")

    # the constants: each public one is the C value of KVMM_ its name
    names = [n for n in kvmm.__all__ if n.isupper()]
    want = c_values(names)
    for n in names:
        if n == "ABI_MINOR" and getattr(kvmm, n) != want[n]:
            fail("kvmm.ABI_MINOR is %d, uapi.h's KVMM_ABI_MINOR %d: bind "
                 "what 1.%d added (Documentation/abi.md's table), then "
                 "set it in kvmm/python/kvmm/constants.py"
                 % (kvmm.ABI_MINOR, want[n], want[n]))
        check_eq(getattr(kvmm, n), want[n], "kvmm.%s (got) vs KVMM_%s "
                 "(want)" % (n, n))
    for n in ("QUERY_GPU", "QUERY_HOST", "QUERY_NVME", "QUERY_MOVING"):
        check_eq(kvmm.query_tier_string(getattr(kvmm, n)),
                 n[len("QUERY_"):].lower(), "query_tier_string(%s)" % n)
    check_eq(kvmm.query_tier_string(9), "unknown", "query_tier_string(9)")

    # help() says something for each public name
    undocumented = []
    for cls in (kvmm.Connection, kvmm.Region, kvmm.Sequence):
        for name, obj in vars(cls).items():
            if name.startswith("_") or not (callable(obj) or
                                            isinstance(obj, property)):
                continue
            if not (getattr(obj, "__doc__", None) or "").strip():
                undocumented.append("%s.%s" % (cls.__name__, name))
    for name in kvmm.__all__:
        obj = getattr(kvmm, name)
        if callable(obj) and not (obj.__doc__ or "").strip():
            undocumented.append(name)
    check_eq(undocumented, [], "public names without a docstring")
    print("%d functions, %d structs, %d constants" % (
        len(funcs), len(structs), len(names)))
