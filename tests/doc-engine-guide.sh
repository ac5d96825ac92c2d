#!/bin/bash
# Documentation/engines.md quotes tests/engine-guide-example.c: each
# quote, a ```c block after a line "<!-- snippet: NAME -->", must equal
# the lines between "/* snippet: NAME */" and "/* snippet end */" in the
# example, byte for byte (tabs included), so the guide's code is code
# that runs in `make check T=engine-guide`.  Every snippet of the example
# is quoted somewhere, and every quote names one.  It first checks
# itself: a copy of the guide with one quoted line changed, and one with
# a quote naming no snippet, must both be reported.
set -u
cd "$(dirname "$0")/.." || exit 1
command -v python3 >/dev/null || { echo "skip: no python3"; exit 77; }
exec python3 - Documentation/engines.md tests/engine-guide-example.c <<'PY'
import re, sys

doc_path, src_path = sys.argv[1], sys.argv[2]

def snippets(src):
    """NAME -> the lines between its markers in the example."""
    out, name, body = {}, None, []
    for n, line in enumerate(src.split("\n"), 1):
        m = re.fullmatch(r"/\* snippet: ([\w-]+) \*/", line)
        if m:
            if name:
                sys.exit("FAIL: %s:%d: snippet %s inside %s" % (src_path, n, m.group(1), name))
            name, body = m.group(1), []
        elif line == "/* snippet end */":
            if not name:
                sys.exit("FAIL: %s:%d: an end without a start" % (src_path, n))
            if name in out:
                sys.exit("FAIL: %s: snippet %s twice" % (src_path, name))
            out[name], name = "\n".join(body), None
        elif name:
            body.append(line)
    if name:
        sys.exit("FAIL: %s: snippet %s has no end" % (src_path, name))
    return out

def quotes(doc):
    """(line, NAME, the quoted block) for each quote in the guide."""
    out, lines = [], doc.split("\n")
    for i, line in enumerate(lines):
        m = re.fullmatch(r"<!-- snippet: ([\w-]+) -->", line)
        if not m:
            continue
        if i + 1 >= len(lines) or lines[i + 1] != "```c":
            out.append((i + 1, m.group(1), None))
            continue
        try:
            end = lines.index("```", i + 2)
        except ValueError:
            out.append((i + 1, m.group(1), None))
            continue
        out.append((i + 1, m.group(1), "\n".join(lines[i + 2:end])))
    return out

def check(doc, snips):
    errors, seen = [], set()
    for n, name, body in quotes(doc):
        where = "%s:%d" % (doc_path, n)
        seen.add(name)
        if body is None:
            errors.append("%s: snippet %s is not followed by a ```c block" % (where, name))
        elif name not in snips:
            errors.append("%s: no snippet %s in %s" % (where, name, src_path))
        elif body != snips[name]:
            a, b = body.split("\n"), snips[name].split("\n")
            for k in range(max(len(a), len(b))):
                x = a[k] if k < len(a) else "(nothing)"
                y = b[k] if k < len(b) else "(nothing)"
                if x != y:
                    break
            errors.append("%s: snippet %s differs from %s at its line %d:\n  guide: %r\n  code:  %r"
                          % (where, name, src_path, k + 1, x, y))
    for name in sorted(set(snips) - seen):
        errors.append("%s: snippet %s of %s is quoted nowhere" % (doc_path, name, src_path))
    return errors

doc = open(doc_path).read()
snips = snippets(open(src_path).read())
if not snips:
    sys.exit("FAIL: no snippets in %s" % src_path)

# Self-check: a changed line and an unknown name must be reported.
name = sorted(snips)[0]
first = snips[name].split("\n")[0]
marker = "<!-- snippet: %s -->\n```c\n" % name
if marker + first not in doc:
    sys.exit("FAIL: self-check: the guide does not quote %s" % name)
bad_line = doc.replace(marker + first, marker + first + " ", 1)
bad_name = doc.replace(marker, "<!-- snippet: no-such-snippet -->\n```c\n", 1)
for what, text in (("a changed line", bad_line), ("an unknown name", bad_name)):
    if not check(text, snips):
        sys.exit("FAIL: self-check: %s was not reported" % what)

errors = check(doc, snips)
for e in errors:
    print("FAIL: " + e)
if errors:
    sys.exit(1)
print("ok: %d quotes in %s equal %d snippets of %s" %
      (len(quotes(doc)), doc_path, len(snips), src_path))
PY
