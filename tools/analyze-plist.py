#!/usr/bin/env python3
# make analyze's reader of clang's findings: the plist clang --analyze
# wrote for one object (tools/analyze-cc.sh), as the lines
# tools/analyze.sh compares with the baseline, one a finding:
#
#   clang | FILE | FUNCTION | CHECKER | MESSAGE<TAB>FILE:LINE:COL
#
# FILE is the one the finding is in (a header's static inline function:
# the header), FUNCTION the function clang names for it (issue_context;
# '-' outside one).  No line in the key, as for gcc's and cppcheck's.
#
#   tools/analyze-plist.py OBJECT.clang.plist >OBJECT.clang
#
# With --path, each finding is followed by the path clang took to it,
# one step a line (FILE:LINE:COL: note: what it assumed or saw), as
# clang --analyzer-output text prints it: how to read a finding
# (Documentation/build.md, "Static analysis").
import plistlib
import sys


def main():
    args = sys.argv[1:]
    path_too = args[:1] == ["--path"]
    if path_too:
        args = args[1:]
    if len(args) != 1:
        print("usage: analyze-plist.py [--path] OBJECT.clang.plist",
              file=sys.stderr)
        return 2
    with open(args[0], "rb") as f:
        p = plistlib.load(f)
    files = [f[2:] if f.startswith("./") else f for f in p.get("files", [])]
    for d in p.get("diagnostics", []):
        loc = d["location"]
        path = files[loc["file"]]
        fn = d.get("issue_context") or "-"
        if d.get("issue_context_kind", "function") != "function":
            fn = "-"
        msg = " ".join(d["description"].split())
        print("clang | %s | %s | %s | %s\t%s:%d:%d" %
              (path, fn, d["check_name"], msg, path, loc["line"],
               loc["col"]))
        if not path_too:
            continue
        for step in d.get("path", []):
            if step.get("kind") != "event":
                continue
            at = step["location"]
            print("  %s:%d:%d: note: %s" %
                  (files[at["file"]], at["line"], at["col"],
                   " ".join(step["message"].split())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
