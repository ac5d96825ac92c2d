#!/bin/bash
# The documentation (README.md, Documentation/*.md) against the tree:
# every name it mentions in `code` or in a link exists, and the values it
# states about the ABI, the metrics and the probes match the code.
#   - paths (tests/..., kvmm/..., build/..., ../shared/...), bare file
#     names (cache.c), Markdown links and their #anchors, quoted section
#     references (tiers.md, "Title"), tables a blank line broke in two;
#   - test names (also `make check T=...`), make targets, bench names
#     (`make bench B=...`);
#   - command-line options: of a named tool (kvmmd, kvmmctl and each
#     subcommand, kvmm-replay, kvmm-agentgen, kvmm-calibrate, tinylm,
#     build/bench/*) against that tool's --help and its own option
#     strings, any other `--option` against all of them, the tests'
#     options and a short list of other programs' (fio, node_exporter);
#   - C names with a project prefix (kvmm_*, kc_*, pol_*, KVMM_*, DEMO_*,
#     ...), $VARIABLES and BPF maps in the sources, kvmm_* metric names
#     in `kvmmctl metrics` of a running kvmmd; status fields (cache.NAME,
#     pages.NAME, ...) in its `kvmmctl --json status`; Python names and
#     keyword arguments (kvmm.NAME, region.NAME(x=...)) in the package
#     kvmm/python/kvmm/;
#   - struct field lists the docs spell out against uapi.h (its parts in
#     kvmm/include/kvmm/uapi/) / kvmm.h;
#     abi.md: the command table against enum kvmm_cmd, every "/* N bytes
#     */" struct comment against sizeof (a C program built here), the
#     ABI version it says it describes; admin.md: the kvmmd option block
#     against kvmmd --help (each option, each stated default), every
#     kvmmd option documented somewhere, the kvmmctl command block
#     against kvmmctl --help (each command, no other, and the options
#     its help line names), the metrics table against the
#     families `kvmmctl metrics` prints (each one, its type), the
#     per-size ones (kvmm_size_*) too, from build/bench/metrics-sizes
#     --text (a kvmmd caching one size prints none of them);
#     telemetry.md: the probe tables against ebpf/probes.h and the
#     binaries' USDT notes (names, argument sizes); README.md: the
#     fresh-machine set-up is exactly `make demo`, `make check`;
#   - sample outputs in code blocks: a `kvmmctl sessions` or `tenants`
#     header line is the one kvmmctl prints, and a `status --json` or
#     `cache-drop --json` object has the keys it prints, in its order
#     (admin.md's tenants table had lost five columns, two JSON samples
#     a key each, and nothing said so).
# It first checks itself: each of a list of wrong names and values (and
# a few wrong values put into a copy of admin.md) must be reported, and
# each kind of check must have found something to check.
# A name that is deliberately not in the tree is either a placeholder
# (NAME, PATH, N, <x>, ...: skipped) or listed in HISTORICAL below (gone
# or on an experiment branch, which the document says).
set -u
cd "$(dirname "$0")/.." || exit 1
b=${KVMM_BUILD:-build}
case "$b" in /*) ;; *) b=$PWD/$b ;; esac
command -v python3 >/dev/null || { echo "skip: no python3"; exit 77; }
command -v "${CC:-cc}" >/dev/null || { echo "skip: no C compiler"; exit 77; }
for t in kvmmd kvmmctl kvmm-replay kvmm-agentgen kvmm-calibrate tinylm; do
	[ -x "$b/$t" ] || { echo "skip: $b/$t not built"; exit 77; }
done
d=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-docnames.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$d"' EXIT

# Every tool's --help, one file each.
mkdir "$d/help"
for t in kvmmd kvmmctl kvmm-replay kvmm-agentgen kvmm-calibrate tinylm; do
	"$b/$t" --help >"$d/help/$t" 2>&1
	grep -q -- '--' "$d/help/$t" || { echo "FAIL: $t --help lists no option"; exit 1; }
done
for t in "$b"/bench/*; do
	[ -x "$t" ] || continue
	# every benchmark answers --help with its usage and runs nothing
	# (six ran their whole measurement before, tel-poll-delta until this
	# timeout; bench/bench.h's bench_help())
	timeout 10 "$t" --help >"$d/help/bench-$(basename "$t")" 2>&1
	[ $? = 124 ] && { echo "FAIL: $t --help ran for 10 s"; exit 1; }
	grep -q '^usage: ' "$d/help/bench-$(basename "$t")" ||
		{ echo "FAIL: $t --help prints no usage line"; exit 1; }
done

# A live kvmmd with every tier it was built with, for the metric and
# status names (the NVMe tier needs liburing).
nvme=()
grep -q '^#define HAVE_LIBURING 1' "$b/config.h" && nvme=(--nvme-path "$d/nvme" --nvme-size 16M)
"$b/kvmmd" --foreground --backend host --telemetry off --socket "$d/s" \
	--host-mem 1M "${nvme[@]}" 2>"$d/kvmmd.log" &
pid=$!
for _ in $(seq 200); do [ -S "$d/s" ] && break; sleep 0.05; done
"$b/kvmmctl" --socket "$d/s" --json status >"$d/status.json" &&
	"$b/kvmmctl" --socket "$d/s" metrics >"$d/metrics.txt" &&
	"$b/kvmmctl" --socket "$d/s" sessions >"$d/sessions.txt" &&
	"$b/kvmmctl" --socket "$d/s" tenants >"$d/tenants.txt" &&
	"$b/kvmmctl" --socket "$d/s" --json cache-drop >"$d/cache-drop.json" ||
	{ echo "FAIL: kvmmctl against kvmmd"; cat "$d/kvmmd.log"; exit 1; }
kill $pid && wait $pid
pid=
# The per-size families (kvmm_size_*), which a kvmmd caching one size
# never prints: the one formatter's text with two sizes cached and a
# tenant in each (build/bench/metrics-sizes --text).
"$b/bench/metrics-sizes" --text --tenants 1 >"$d/metrics-sizes.txt" ||
	{ echo "FAIL: $b/bench/metrics-sizes --text"; exit 1; }

# sizeof every struct of the wire ABI.
{
	echo '#include <stdio.h>'
	echo '#include "kvmm/uapi.h"'
	echo 'int main(void) {'
	cat kvmm/include/kvmm/uapi.h kvmm/include/kvmm/uapi/*.h |
		grep -o '^struct kvmm_[a-z0-9_]* {' |
		awk '{ printf "\tprintf(\"%s %%zu\\n\", sizeof(struct %s));\n", $2, $2 }'
	echo '	return 0; }'
} >"$d/sizes.c"
"${CC:-cc}" -Ikvmm/include -o "$d/sizes" "$d/sizes.c" && "$d/sizes" >"$d/sizes.txt" ||
	{ echo "FAIL: cannot build the sizeof program"; exit 1; }

# The USDT probes in the binaries: "NAME SIZE SIZE ..." per probe site.
readelf -n "$b/libkvmm.so.1" "$b/kvmmd" "$b/tinylm" 2>/dev/null |
	awk '/Provider: kvmm/ { p = 1; next }
	     p && /Name:/ { name = $2; next }
	     p && /Arguments:/ { line = name; for (i = 2; i <= NF; i++) { split($i, a, "@"); sub("-", "", a[1]); line = line " " a[1] }; print line; p = 0 }' |
	sort -u >"$d/probes.txt"

python3 - "$d" "$b" <<'PY'
import glob, json, os, re, subprocess, sys

tmp, build = sys.argv[1], sys.argv[2]
DOCS = ["README.md"] + sorted(glob.glob("Documentation/*.md"))

# ---- what the tree has --------------------------------------------------
tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True,
                         check=True).stdout.split()
tracked = [f for f in tracked if os.path.exists(f)]
untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"],
                           capture_output=True, text=True).stdout.split()
files = sorted(set(tracked) | set(untracked))
dirs = {os.path.dirname(f) for f in files}
for f in list(dirs):
    while f:
        f = os.path.dirname(f)
        dirs.add(f)
basenames = {os.path.basename(f) for f in files}
sources = [f for f in files if not f.startswith("Documentation/")
           and f != "README.md" and f != "tests/doc-names.sh"
           and not f.endswith((".png", ".svg", ".jsonl"))]
words = set()
for f in sources + [os.path.join(build, "config.h")]:
    try:
        with open(f, errors="replace") as fh:
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", fh.read()))
    except OSError:
        pass

tests = {os.path.basename(f)[:-2] for f in files
         if re.fullmatch(r"tests/[^/]+\.c", f)}
tests |= {os.path.basename(f)[:-3] for f in files
          if re.fullmatch(r"tests/[^/]+\.sh", f)} - {"run"}
benches = {os.path.basename(f)[:-2] for f in files
           if re.fullmatch(r"bench/[^/]+\.c", f)}
benches |= {os.path.basename(f)[:-3] for f in files
            if re.fullmatch(r"bench/[^/]+\.sh", f)} - {"run"}

make_targets = set()
for mk in ["Makefile"] + glob.glob("*/build.mk"):
    for line in open(mk):
        m = re.match(r"^([A-Za-z][\w. -]*?)\s*:(?!=)", line)
        if m:
            make_targets.update(m.group(1).split())
        if line.startswith(".PHONY:"):
            make_targets.update(line.split()[1:])

def opts(text):
    return set(re.findall(r"(?<![\w-])--[A-Za-z][\w.-]*[\w]", text))

helps = {}
for f in glob.glob(os.path.join(tmp, "help", "*")):
    name = os.path.basename(f)
    text = open(f).read()
    if name.startswith("bench-"):
        src = "bench/%s.c" % name[6:]
        # a benchmark without --help: its options are its sources' strings
        text += open(src).read() if os.path.exists(src) else ""
    tool_dir = "tools/%s" % name
    for src in glob.glob(tool_dir + "/*.c") if os.path.isdir(tool_dir) else []:
        text += "\n".join(re.findall(r'"(--[\w.-]+)', open(src).read()))
    helps[name] = opts(text)
for s in glob.glob("bench/*.sh"):
    helps["bench-" + os.path.basename(s)[:-3]] = opts(open(s).read())
helps["kvmmctl-calibrate"] = helps["kvmm-calibrate"]
for src in glob.glob("tools/kvmmctl/cmd_*.c"):  # kvmmctl SUBCOMMAND --option
    sub = os.path.basename(src)[4:-2].replace("_", "-")
    helps.setdefault("kvmmctl-" + sub, set()).update(
        re.findall(r'"(--[\w.-]+)', open(src).read()))
all_opts = set().union(*helps.values())
# Options of the test programs and scripts (a test's own knobs).
for f in files:
    if f.startswith("tests/") and f.endswith((".c", ".sh", ".py")) and f != "tests/doc-names.sh":
        all_opts |= set(re.findall(r"(?<![\w-])(--[A-Za-z][\w-]*\w)", open(f, errors="replace").read()))
# Other programs' options the docs quote (fio, node_exporter, bpftool).
FOREIGN_OPTS = {"--collector.textfile.directory", "--registerfiles",
                "--mem", "--rw", "--bs", "--iodepth", "--direct",
                "--ioengine", "--filename", "--size", "--name",
                "--library"}  # cppcheck's (build.md, "Static analysis")
# Files of other projects the docs name (CUDA headers, llama2.c's run.c).
FOREIGN_FILES = {"cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda_bf16.h",
                 "cuda_fp16.h", "run.c", "prometheus.yml"}
# Names the docs mention as removed or as living on an experiment branch
# only, each said so where it is mentioned; each must still be mentioned.
HISTORICAL = {
    "freq_sketch.[ch]": "policy.md: the old asym's sketch, removed",
    "AFT_MODE": "policy.md: branch aft-exp", "AFT_RUN": "branch aft-exp",
    "AFT_LEAF": "branch aft-exp", "AFT_SCAN": "branch aft-exp",
    "ASYM_TIME": "policy.md: branch clock-exp", "ASYM_DUMP": "branch clock-exp",
    "ASYM_PROTECT_UPPER": "branch clock-exp", "ASYM_PROTECT_CLOCK": "branch clock-exp",
}
kvmmctl_cmds = set(re.findall(r"^  ([a-z-]+) ", open(os.path.join(
    tmp, "help", "kvmmctl")).read(), re.M))

metrics = set()
for line in open(os.path.join(tmp, "metrics.txt")):
    m = re.match(r"^(?:# (?:HELP|TYPE) )?([a-z_:][a-z0-9_:]*)", line)
    if m:
        metrics.add(m.group(1))
for line in open(os.path.join(tmp, "metrics-sizes.txt")):
    m = re.match(r"^(?:# (?:HELP|TYPE) )?(kvmm_size_[a-z0-9_:]*)", line)
    if m:
        metrics.add(m.group(1))

status_keys = set()
def flatten(prefix, v):
    if isinstance(v, dict):
        for k, x in v.items():
            p = prefix + "." + k if prefix else k
            status_keys.add(p)
            flatten(p, x)
flatten("", json.load(open(os.path.join(tmp, "status.json"))))
for k in list(status_keys):  # cache.tiers.T.NAME stands for every tier
    status_keys.add(re.sub(r"\.tiers\.(gpu|host|nvme)\b", ".tiers.T", k))
# Present only with telemetry on or in other JSON documents (kvmm-replay
# --json, tinylm's counters): checked by the source words instead.
STATUS_HEADS = ("cache.", "pages.", "revocations.")

py = "".join(open(f).read() for f in sorted(glob.glob("kvmm/python/kvmm/*.py")))
py_names = set(re.findall(r"^\s*(?:def|class)\s+(\w+)", py, re.M))
py_names |= set(re.findall(r"^\s*(\w+)\s*=", py, re.M))
py_names |= set(re.findall(r"self\.(\w+)\s*=", py))
py_words = set(re.findall(r"\w+", py))

probes = set(re.findall(r"\bKVMM_PROBE_SEMAPHORE\((\w+)\)", open("ebpf/probes.h").read()))
probe_args = {}  # name -> set of argument-size tuples, from the binaries' notes
for line in open(os.path.join(tmp, "probes.txt")):
    w = line.split()
    probe_args.setdefault(w[0], set()).add(tuple(int(x) for x in w[1:]))
if not probe_args:
    print("note: no kvmm USDT notes in the binaries (HAVE_SDT=0?): "
          "probe names checked against ebpf/probes.h, argument sizes not")

# ---- the checks ---------------------------------------------------------
PLACEHOLDER = re.compile(r"\b(NAME|PATH|PATTERN|FILE|N|M|X|Y|MAJ|MIN|PID|PORT|"
                         r"HOST|SIZE|KIND|ADDR|SOCKET|PROFILE|BUILD|LIBDIR|"
                         r"PREFIX|DESTDIR|SYSCONFDIR)\b|<[^>]*>|\.\.\.")
PREFIXES = r"(?:kvmm|kvmmd|kc|kd|pol|migrate|msa|vmm|kern|kr|tel|inproc|cc|cs|vt|cf|tier_nvme|tier_host|sd)_"
CAPS = r"(?:KVMM|KVMMD|DEMO|ASYM|AFT|VMM|POL|TEL|HAVE|KD|CACHE|SCAN|LIBKVMM)_"
TOOLS = {"kvmmd", "kvmmctl", "kvmm-replay", "kvmm-agentgen", "kvmm-calibrate", "tinylm"}
TEST_RE = re.compile(r"(?:cache|daemon|ebpf|hash|kernels|kvmmctl|metrics|policy|"
                     r"python|replay|tier|tinylm|vmm|code|doc)-[a-z0-9][a-z0-9-]*")
PATH_RE = re.compile(r"(?:\$KVMM_SRC/|\./)?((?:\.ci|Documentation|bench|ebpf|kernels|"
                     r"kvmm|tests|tools|vmm|build)/[\w.*\[\]/<>-]*)")

errors = []
counts = {}
shared_missing = set()  # ../shared paths not checked: no ../shared here

def bad(where, what):
    errors.append("%s: %s" % (where, what))

def count(kind):
    counts[kind] = counts.get(kind, 0) + 1

def exists_path(p):
    if p.endswith("/"):
        p = p[:-1]
    if "[" in p or "*" in p:
        rx = re.compile(re.escape(p).replace(r"\*", "[^/]*")
                        .replace(r"\[ch\]", "[ch]").replace(r"\[", "[").replace(r"\]", "]"))
        return any(rx.fullmatch(f) for f in files) or any(rx.fullmatch(x) for x in dirs)
    return p in files or p in dirs

def check_build_path(where, p):
    p = p.rstrip("/")
    q = re.sub(r"NAME|PATTERN", "*", p)
    q = re.sub(r"^build/?", "", q)
    if q in ("", "asan", "test-logs") or q.startswith("test-logs/"):
        return
    # the sanitizer build (make SANITIZE=1) mirrors this one, which a
    # fresh checkout's make check has built
    q = re.sub(r"^asan/", "", q)
    # make analyze's build (make ANALYZE=1) mirrors this one's objects,
    # with an OBJECT.warn (gcc), OBJECT.clang and OBJECT.clang.plist
    # (clang) beside each; its own files exist after a run
    if q in ("analyze", "analyze/cppcheck", "analyze/analyze-findings.txt",
             "analyze/analyze-clang.stamp"):
        return
    q = re.sub(r"^analyze/(.*)\.(warn|clang|clang\.plist)$", r"\1", q)
    q = re.sub(r"^analyze/", "", q)
    count("build path")
    hits = glob.glob(os.path.join(build, q))
    if not hits:
        bad(where, "`%s` is not built (no %s)" % (p, os.path.join(build, q)))

def check_path(where, p):
    p = p.rstrip(".,:;)")
    if p.startswith("build/"):
        return check_build_path(where, p)
    p = re.sub(r"NAME|PATTERN", "*", p)
    if "<" in p or "..." in p:
        return
    p = os.path.normpath(p) + ("/" if p.endswith("/") else "")
    if p.startswith("build/") or p == "build":
        return check_build_path(where, p)
    count("path")
    if re.fullmatch(r"tests/[\w-]+", p) and p[6:] in tests:
        return
    if p in HISTORICAL:
        return
    if not exists_path(p):
        bad(where, "`%s` does not exist" % p)

def check_test(where, t):
    count("test")
    if t not in tests:
        bad(where, "`%s` is not a test (tests/%s.c or .sh)" % (t, t))

def check_option(where, tool, o):
    o = o.split("=")[0]
    count("option")
    if tool is not None:
        known = helps.get(tool, set())
        if tool.startswith("kvmmctl"):  # kvmmctl takes these anywhere
            known = known | {"--socket", "--json", "--version"}
        if o not in known and o not in ("--help",):
            bad(where, "`%s` is not an option of %s (its --help)" % (o, tool))
    elif o not in all_opts and o not in FOREIGN_OPTS:
        bad(where, "`%s` is not an option of any tool" % o)

def check_ident(where, w):
    if w.endswith("_") or re.search(r"_(NAME|N|T|X)$|_NAME_", w):
        return
    count("name")
    if w in HISTORICAL:
        return
    if w in words or w in metrics or w in py_names:
        return
    bad(where, "`%s` is not in the sources (nor a metric)" % w)

def tool_of(word):
    w = os.path.basename(word)
    if w in TOOLS:
        return w
    if word.startswith("build/bench/") or word.startswith("bench/"):
        return "bench-" + re.sub(r"\.sh$", "", w)
    return None

def check_command(where, words_):
    """A shell command: make, a tool, or a build/ program."""
    if not words_:
        return
    while words_ and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words_[0]):
        check_ident(where, words_[0].split("=")[0]) if re.match(CAPS, words_[0]) else None
        words_ = words_[1:]
    if words_ and words_[0] == "sudo":
        words_ = words_[1:]
    if not words_:
        return
    head = words_[0]
    if head == "make":
        skip = False
        for w in words_[1:]:
            if skip:
                skip = False
                continue
            if w in ("-C", "-f"):
                skip = True
                continue
            if w.startswith("-") or PLACEHOLDER.search(w):
                continue
            if w.startswith("T="):
                count("test pattern")
                if not any(w[2:] in t for t in tests):
                    bad(where, "`make check %s` runs no test" % w)
            elif w.startswith("B="):
                count("bench pattern")
                if not any(w[2:] in x for x in benches):
                    bad(where, "`make bench %s` runs no benchmark" % w)
            elif "=" in w:
                continue
            elif w.startswith("build/"):
                check_build_path(where, w)
            else:
                count("make target")
                if w not in make_targets:
                    bad(where, "`make %s`: no such target" % w)
        return
    tool = tool_of(head)
    if tool is None:
        return
    if head.startswith(("build/", "bench/")):
        check_path(where, head)
    rest = words_[1:]
    if tool == "kvmmctl":
        i = 0
        while i < len(rest) and rest[i].startswith("-"):
            if rest[i] not in ("--json",):
                check_option(where, "kvmmctl", rest[i])
            i += 1 + (rest[i] == "--socket")
        if i < len(rest) and not PLACEHOLDER.search(rest[i]) and re.fullmatch(r"[a-z-]+", rest[i]):
            count("kvmmctl command")
            if rest[i] not in kvmmctl_cmds:
                bad(where, "`kvmmctl %s`: no such command" % rest[i])
            else:
                tool = "kvmmctl-" + rest[i]
        rest = rest[i + 1:]
    for w in rest:
        if re.fullmatch(r"--[A-Za-z][\w.-]*(=\S*)?", w):
            check_option(where, tool, w)
        elif re.fullmatch(r"\[--[A-Za-z][\w.-]*", w):
            check_option(where, tool, w[1:])

def check_span(where, s):
    s = s.strip()
    if not s:
        return
    # commands, split at && ; |
    for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", s):
        ws = part.split()
        if ws and (ws[0] in ("make", "sudo") or tool_of(ws[0]) or
                   re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", ws[0])):
            check_command(where, ws)
    ws = s.split()
    for w in ws:  # the shared data next to the tree (traces)
        m = re.fullmatch(r"(\.\./shared/[\w./-]*[\w/])[.,;:)]*", w)
        if m:
            count("shared path")
            if not os.path.isdir("../shared"):
                shared_missing.add(m.group(1))
            elif not os.path.exists(m.group(1)):
                bad(where, "`%s` does not exist" % m.group(1))
    # options quoted alone: `--foo`, `--foo N`, `--foo a|b`
    if ws and re.fullmatch(r"--[A-Za-z][\w.-]*(=\S*)?", ws[0]) and tool_of(ws[0]) is None:
        for w in ws:
            if re.fullmatch(r"--[A-Za-z][\w.-]*(=\S*)?", w):
                check_option(where, None, w)
    for w in ws:
        w2 = w.strip(".,;:()\"'")
        m = PATH_RE.fullmatch(w2)
        if m and "/" in w2 and not w2.startswith("build/bench/NAME") :
            check_path(where, m.group(1))
        elif re.fullmatch(r"[\w.-]+\.(?:c|h|cu|cuh|sh|py|mk|map|profile|md|\[ch\])", w2):
            count("file name")
            if w2 in FOREIGN_FILES or w2 in HISTORICAL:
                continue
            rx = re.compile(re.escape(w2).replace(r"\[ch\]", "[ch]"))
            if not any(rx.fullmatch(x) for x in basenames):
                bad(where, "`%s`: no such file in the tree" % w2)
    if len(ws) == 1 and TEST_RE.fullmatch(s) and s not in benches:
        check_test(where, s)
    # project identifiers anywhere in the span
    for w in re.findall(r"(?<![\w./$-])[A-Za-z_][A-Za-z0-9_]*(?!\w|\.(?:c|h|cu|sh|py|so|md|\[ch\])\b)", re.sub(r"\[[^\]]*\]", " ", s)):
        if re.match(PREFIXES, w) or re.match(CAPS, w):
            check_ident(where, w)
    for part in re.findall(r"\[(_\w+)\]", s):  # kvmm_seq_open[_prefix]
        base = re.match(r"(\w+)\[", s[:s.index("[" + part)] + "[")
        if base:
            check_ident(where, base.group(1) + part)
    for w in re.findall(r"(?<![\w$])\$\{?([A-Z][A-Z0-9_]*)", s):
        count("variable")
        if w not in words and w not in ("PATH", "PWD", "HOME"):
            bad(where, "`$%s`: no such variable in the sources" % w)
    # status --json fields
    for w in re.findall(r"(?<![\w.])((?:cache|pages|revocations)\.[a-z_.]+[a-z_])", s):
        count("status field")
        if w not in status_keys:
            bad(where, "`%s` is not a field of `kvmmctl --json status`" % w)
    # Python names
    for obj, attr in re.findall(r"(?<![\w.])(kvmm|conn|region|seq)\.(\w+)", s):
        if obj == "kvmm" and w2.endswith((".py", ".h", ".so", ".c")):
            continue
        if attr in ("sock", "py", "h", "c", "so", "pc", "md", "conf", "service"):
            continue
        count("python name")
        if attr not in py_names:
            bad(where, "`%s.%s`: not in kvmm/python/kvmm/" % (obj, attr))
    for call in re.findall(r"(?<![\w.])(?:kvmm|conn|region|seq)\.\w+\(([^()]*)\)", s):
        for kw in re.findall(r"(\w+)=", call):  # keyword arguments
            count("python name")
            if kw not in py_words:
                bad(where, "`%s=`: no such parameter in kvmm/python/kvmm/" % kw)
    for p in re.findall(r"\bkvmm:(\w+)", s):
        count("probe")
        if p not in probes:
            bad(where, "`kvmm:%s`: no such USDT probe" % p)

def slug(h):
    h = re.sub(r"[`*_]", lambda m: "_" if m.group(0) == "_" else "", h.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")

anchors = {}
def anchors_of(path):
    if path not in anchors:
        seen = {}
        out = set()
        fence = False
        for line in open(path):
            if line.startswith("```"):
                fence = not fence
            m = re.match(r"^#+\s+(.*)", line)
            if m and not fence:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else "%s-%d" % (s, n))
        anchors[path] = out
    return anchors[path]

def check_link(where, doc, target):
    if re.match(r"[a-z]+:", target):
        return
    path, _, frag = target.partition("#")
    full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
    count("link")
    if not os.path.exists(full):
        bad(where, "link to `%s`: no such file" % target)
    elif frag and full.endswith(".md") and frag not in anchors_of(full):
        bad(where, "link to `%s`: no such heading in %s" % (target, full))

def check_section_refs(doc, text):
    """`other.md, "Title"` names a section: a heading or a paragraph of
    other.md starts with Title."""
    for m in re.finditer(r"([\w-]+\.md)(?:\]\([^)]*\))?, \"([^\"]+)\"", text):
        target = os.path.join(os.path.dirname(doc), m.group(1))
        where = "%s:%d" % (doc, text.count("\n", 0, m.start()) + 1)
        count("section reference")
        if not os.path.exists(target):
            bad(where, "%s: no such document" % m.group(1))
        elif not re.search(r"^(?:#+ |\*\*)?%s" % r"\s+".join(map(re.escape, m.group(2).split())),
                           open(target).read(), re.M):
            bad(where, "%s has no section \"%s\"" % (m.group(1), m.group(2)))

def check_tables(doc, text):
    """A table row after a blank line starts a table, so a header and a
    |---| line must follow; else a blank line broke a table in two."""
    lines = text.split("\n")
    fence = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("|") or (i and lines[i - 1].strip()):
            continue
        count("table")
        if i + 1 >= len(lines) or not re.fullmatch(r"\|[-:| ]+\|", lines[i + 1].strip()):
            bad("%s:%d" % (doc, i + 1), "a table row without a header: a blank line broke the table")

def check_doc(doc, text):
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        where = "%s:%d" % (doc, n)
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            continue
        if fence is not None:
            if fence in ("sh", "") :
                code = line.split("#")[0] if fence == "sh" else line
                for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", code):
                    check_command(where, part.split())
                for p in re.findall(r"(?<![\w/])((?:\.ci|bench|ebpf|kernels|kvmm|tests|tools|vmm|build)/[\w./*-]+)", code):
                    if fence == "sh":
                        check_path(where, p)
            continue
        for s in re.findall(r"``?([^`]+)``?", line):
            check_span(where, s)
        for t in re.findall(r"\]\(([^)\s]+)\)", line):
            check_link(where, doc, t)

# ---- values -------------------------------------------------------------
uapi = open("kvmm/include/kvmm/uapi.h").read()
sizes = dict(l.split() for l in open(os.path.join(tmp, "sizes.txt")))
cmds = {m[0]: int(m[1], 16) for m in re.findall(r"KVMM_CMD_(\w+)\s*=\s*(0x[0-9a-fA-F]+)", uapi)}
abi = "%s.%s" % (re.search(r"KVMM_ABI_MAJOR (\d+)", uapi).group(1),
                 re.search(r"KVMM_ABI_MINOR (\d+)", uapi).group(1))

def fields_of(body):
    """Field names of a struct body, C ("u32 a, b; u64 c[2];") or a bare
    list ("size, flags, ...")."""
    body = re.sub(r"/\*.*?\*/|//[^\n]*", " ", body, flags=re.S)
    names = []
    for decl in body.split(";"):
        for i, part in enumerate(decl.split(",")):
            part = re.sub(r"\[[^\]]*\]", "", part).strip()
            if not part:
                continue
            m = re.search(r"([A-Za-z_]\w*)\s*$", part)
            if m:
                names.append(m.group(1))
    return names

c_structs = {}
for hdr in ["kvmm/include/kvmm/uapi.h", "kvmm/include/kvmm/kvmm.h"] + \
        sorted(glob.glob("kvmm/include/kvmm/uapi/*.h")):
    for name, body in re.findall(r"^struct (kvmm_\w+) \{(.*?)^\};", open(hdr).read(), re.S | re.M):
        c_structs[name] = fields_of(body)

def check_struct_fields(doc, text):
    """Every `struct kvmm_X { fields }` the docs spell out has the fields
    of the header's, in its order."""
    flat = re.sub(r"`", " ", text)
    for m in re.finditer(r"struct (kvmm_\w+) \{([^{}]*)\}", flat):
        name = m.group(1)
        line = text.count("\n", 0, m.start()) + 1
        where = "%s:%d" % (doc, line)
        count("struct fields")
        if name not in c_structs:
            bad(where, "struct %s is in neither uapi.h nor kvmm.h" % name)
            continue
        got = fields_of(m.group(2))
        if got != c_structs[name]:
            bad(where, "struct %s fields %s, the header has %s" % (
                name, " ".join(got), " ".join(c_structs[name])))

def check_abi_tables(doc, text):
    """The command table against enum kvmm_cmd, "/* N bytes */" after a
    struct against its sizeof."""
    lines = text.split("\n")
    cur = None
    for n, line in enumerate(lines, 1):
        where = "%s:%d" % (doc, n)
        m = re.match(r"^\| (0x[0-9a-f]{2}) \| ([A-Z_]+) \|", line)
        if m:
            count("command number")
            if cmds.get(m.group(2)) != int(m.group(1), 16):
                bad(where, "command %s is %s in uapi.h, not %s" % (
                    m.group(2), hex(cmds[m.group(2)]) if m.group(2) in cmds else "absent",
                    m.group(1)))
        m = re.search(r"\bstruct (kvmm_\w+) \{", line)
        if m:
            cur = m.group(1)
        m = re.search(r"/\* (\d+) bytes", line)
        if m and cur:
            count("struct size")
            if sizes.get(cur) != m.group(1):
                bad(where, "struct %s is %s bytes, not %s" % (cur, sizes.get(cur), m.group(1)))
        if "};" in line:  # the struct ends (its size, if any, was on this line)
            cur = None

def check_abi(doc, text):
    check_abi_tables(doc, text)
    lines = text.split("\n")
    m = re.search(r"It describes ABI (\d+\.\d+)", text)
    count("ABI version")
    if not m or m.group(1) != abi:
        bad(doc, "does not say it describes ABI %s (uapi.h's version)" % abi)
    for n, line in enumerate(lines, 1):
        for v in re.findall(r"\bABI (\d+\.\d+)", line):
            count("ABI version")
            if tuple(map(int, v.split("."))) > tuple(map(int, abi.split("."))):
                bad("%s:%d" % (doc, n), "ABI %s is newer than uapi.h's %s" % (v, abi))

def command_entries(block):
    """A command list ("  NAME  text", continued by deeper lines): each
    NAME and the --options its entry names."""
    out, cur = {}, None
    for line in block.split("\n"):
        m = re.match(r"^  ([a-z][a-z-]*)\b", line)
        if m:
            cur = m.group(1)
            out[cur] = set()
        if cur:
            out[cur] |= set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line))
    return out

def check_admin_kvmmctl(doc, text):
    """admin.md's kvmmctl block lists every command `kvmmctl --help`
    lists, no other, each with the options its help line names."""
    m = re.search(r"```\nkvmmctl \[--socket PATH\][^\n]*\n[^\n]*\n(.*?)```", text, re.S)
    if not m:
        bad(doc, "no kvmmctl command block (```kvmmctl [--socket PATH] ...```)")
        return
    khelp = open(os.path.join(tmp, "help", "kvmmctl")).read()
    helped = command_entries(khelp.split("commands:", 1)[-1])
    listed = command_entries(m.group(1))
    for c in sorted(set(helped) | set(listed)):
        count("kvmmctl command documented")
        if c not in listed:
            bad(doc, "kvmmctl %s (in its --help) is not in the kvmmctl block" % c)
        elif c not in helped:
            bad(doc, "kvmmctl block: %s is no command of kvmmctl --help" % c)
        else:
            for o in sorted(helped[c] - listed[c]):
                bad(doc, "kvmmctl block: %s lacks %s (its --help names it)" % (c, o))

def check_admin(doc, text):
    m = re.search(r"```\nkvmmd \[OPTIONS\]\n(.*?)```", text, re.S)
    if not m:
        bad(doc, "no kvmmd option block (```kvmmd [OPTIONS]```)")
        return
    block = m.group(1)
    khelp = open(os.path.join(tmp, "help", "kvmmd")).read()
    entries = re.split(r"\n(?=  --)", "\n" + block)
    documented = set()
    for e in entries:
        mo = re.match(r"\s*(--[\w-]+)", e)
        if not mo:
            continue
        o = mo.group(1)
        documented.add(o)
        count("kvmmd option")
        if o not in helps["kvmmd"]:
            bad(doc, "kvmmd option block: `%s` not in kvmmd --help" % o)
            continue
        hm = re.search(r"^  %s\b(.*?)(?=^  --|^SIZE|\Z)" % re.escape(o), khelp, re.S | re.M)
        hd = re.search(r"\((?:default )?([^()]*?)\)", hm.group(1)) if hm else None
        dd = re.search(r"\(default ([^;),]*)", e.replace("\n", " "))
        if dd and hd:
            count("kvmmd default")
            hv, dv = hd.group(1).split(",")[0].strip(), dd.group(1).strip()
            norm = lambda x: re.sub(r"\s+", " ", x.split(":")[0]).strip()
            if norm(hv) not in norm(dv) and norm(dv) not in norm(hv):
                bad(doc, "kvmmd %s: default `%s` here, `%s` in --help" % (o, dv, hv))
    check_admin_kvmmctl(doc, text)
    for o in sorted(helps["kvmmd"] - documented - {"--help", "--version"}):
        count("kvmmd option documented")
        if not any(re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(o), open(x).read())
                   for x in DOCS):
            bad(doc, "kvmmd %s is not documented" % o)

families = {}
for line in open(os.path.join(tmp, "metrics.txt")):
    m = re.match(r"^# TYPE (\S+) (\S+)", line)
    if m:
        families[m.group(1)] = m.group(2)
# ... and the per-size ones, with several sizes (metrics-sizes --text)
size_families = {}
for line in open(os.path.join(tmp, "metrics-sizes.txt")):
    m = re.match(r"^# TYPE (kvmm_size_\S+) (\S+)", line)
    if m:
        size_families[m.group(1)] = m.group(2)
families.update(size_families)

def check_metric_table(doc, text):
    """admin.md's table lists every family `kvmmctl metrics` prints, with
    its type; a row of a family absent here (telemetry-only) must at
    least be named in the sources."""
    rows = {}
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^\| `(kvmm_\w+)[^`]*` \| (\w+) \|", line)
        if m:
            rows[m.group(1)] = (n, m.group(2))
    for f, t in sorted(families.items()):
        count("per-size metric family" if f in size_families else "metric family")
        if f not in rows:
            bad(doc, "metric %s (%s) is not in the metrics table" % (f, t))
        elif rows[f][1] != t:
            bad("%s:%d" % (doc, rows[f][0]), "metric %s is a %s, not a %s" % (f, t, rows[f][1]))
    for f, (n, t) in sorted(rows.items()):
        if f not in families and f not in words:
            bad("%s:%d" % (doc, n), "metric %s: no such family" % f)

SIZES = {"u64": 8, "s64": 8, "u32": 4, "s32": 4, "u16": 2, "u8": 1}

def check_probe_tables(doc, text):
    """telemetry.md's probe tables: each probe exists (a semaphore in
    ebpf/probes.h, a note in the binaries) and its arguments have the
    sizes the notes say."""
    in_table = False
    for n, line in enumerate(text.split("\n"), 1):
        if not line.startswith("|"):
            in_table = False
            continue
        if re.match(r"^\|\s*probe\s*\|", line):
            in_table = True
            continue
        m = re.match(r"^\| ((?:`\w+`(?:, )?)+)\s*\| (.*)\|\s*$", line)
        if not in_table or not m:
            continue
        names = re.findall(r"`(\w+)`", m.group(1))
        where = "%s:%d" % (doc, n)
        for x in names:
            count("probe")
            if x not in probes:
                bad(where, "`%s`: no such probe in ebpf/probes.h" % x)
            elif probe_args and x not in probe_args:
                bad(where, "probe `%s` is in no binary's USDT notes" % x)
        args = re.match(r"`([^`]*)`", m.group(2).strip())
        if len(names) == 1 and args and names[0] in probe_args:
            sizes = []
            for a in re.sub(r"\([^)]*\)", "", args.group(1)).split(","):
                a = a.strip()
                sizes.append(8 if "*" in a else SIZES.get(a.split()[0], 0))
            count("probe arguments")
            if tuple(sizes) not in probe_args[names[0]]:
                bad(where, "probe `%s` takes arguments of %s bytes, not %s" % (
                    names[0], sorted(probe_args[names[0]]), sizes))

# What kvmmctl prints today, for the sample outputs the docs show: its
# tables' header lines by their first word, and its JSON objects by
# their first key.
table_heads = {}
for name in ("sessions", "tenants"):
    head = open(os.path.join(tmp, name + ".txt")).readline().rstrip()
    table_heads[head.split()[0]] = head
json_replies = {}
for name in ("status.json", "cache-drop.json"):
    obj = json.load(open(os.path.join(tmp, name)))
    json_replies[next(iter(obj))] = obj

def json_keys_differ(sample, real, path=""):
    """Where the sample's keys are not the reply's (each object the sample
    spells out: the same keys in the same order), else None."""
    if isinstance(sample, dict) and isinstance(real, dict) and sample:
        if list(sample) != list(real):
            lacks = [k for k in real if k not in sample]
            extra = [k for k in sample if k not in real]
            return "%s: %s" % (path or "the object", "; ".join(
                ["lacks %s" % ",".join(lacks)] * bool(lacks) +
                ["has %s, which kvmmctl does not print" % ",".join(extra)] * bool(extra))
                or "keys in another order than kvmmctl's %s" % ",".join(real))
        for k in sample:
            why = json_keys_differ(sample[k], real[k], path + "." + k)
            if why:
                return why
    if isinstance(sample, list) and isinstance(real, list) and sample and real:
        return json_keys_differ(sample[0], real[0], path + "[0]")
    return None

def check_samples(doc, text):
    """Sample outputs in code blocks against what kvmmctl prints: a
    table's header line (`kvmmctl sessions`, `tenants`) is kvmmctl's, every
    column in its place; a JSON object of `status --json` or
    `cache-drop --json` has its keys in its order wherever the sample
    spells an object out ({...} and [...] stand for any)."""
    lines = text.split("\n")
    in_code = False
    n = 0
    while n < len(lines):
        line = lines[n]
        n += 1
        if line.startswith("```"):
            in_code = not in_code
            continue
        if not in_code:
            continue
        where = "%s:%d" % (doc, n)
        words = line.split()
        if (words and words[0] in table_heads and len(words) > 3 and
                all(re.fullmatch(r"[A-Z][A-Z-]*", w) for w in words)):
            count("sample header")
            if line.rstrip() != table_heads[words[0]]:
                bad(where, "kvmmctl's %s header is now `%s`, not `%s`" % (
                    words[0], table_heads[words[0]], line.rstrip()))
            continue
        m = re.match(r'\{"(\w+)"', line)
        if not m or m.group(1) not in json_replies:
            continue
        body, depth = "", 0
        for k in range(n - 1, len(lines)):
            if lines[k].startswith("```"):
                break
            body += lines[k] + "\n"
            depth += lines[k].count("{") - lines[k].count("}")
            if depth <= 0:
                n = k + 1
                break
        count("sample JSON")
        body = body.replace("{...}", "{}").replace("[...]", "[]")
        body = re.sub(r",\s*\.\.\.\s*([}\]])", r"\1", body)
        try:
            sample = json.loads(body)
        except ValueError as e:
            bad(where, "a JSON sample that does not parse (%s)" % e)
            continue
        why = json_keys_differ(sample, json_replies[m.group(1)])
        if why:
            bad(where, "JSON sample: %s" % why)

def check_readme_setup(doc, text):
    """README.md sets a fresh machine up with exactly two commands."""
    m = re.search(r"^## Set up on a fresh machine.*?\n```sh\n(.*?)```", text, re.S | re.M)
    cmds = [l.split("#")[0].strip() for l in m.group(1).split("\n")] if m else []
    count("set-up command")
    if [c for c in cmds if c] != ["make demo", "make check"]:
        bad(doc, "the fresh-machine set-up is not exactly `make demo`, `make check`: %s" % cmds)

def run_all(texts):
    for doc, text in texts:
        check_doc(doc, text)
        check_struct_fields(doc, text)
        check_section_refs(doc, text)
        check_tables(doc, text)
        check_samples(doc, text)
        if doc == "README.md":
            check_readme_setup(doc, text)
        if doc.endswith("abi.md"):
            check_abi(doc, text)
        if doc.endswith("telemetry.md"):
            check_probe_tables(doc, text)
        if doc.endswith("admin.md"):
            check_admin(doc, text)
            check_metric_table(doc, text)

# ---- self-check: each wrong name must be reported -----------------------
NEGATIVE = [
    "`tests/no-such-test.c`", "`make check T=no-such-test`", "`vmm-no-such-test`",
    "`kvmmd --no-such-doc-option`", "`--no-such-doc-option N`", "`kvmm_no_such_function()`",
    "`KVMM_NO_SUCH_FLAG`", "`kvmm_no_such_series_total`", "`cache.no_such_field`",
    "`region.no_such_method()`", "`kvmmctl no-such-command`", "`make no-such-target`",
    "`build/no-such-program`", "`no_such_file.c`", "[x](no-such.md)",
    "[x](admin.md#no-such-heading)", "`kvmm:no_such_probe`", "`$KVMM_NO_SUCH_VAR`",
    "`kvmm-replay --no-such-flag`", "`make bench B=no-such-bench`",
    "`kvmmctl calibrate --no-such-flag`",
    "`struct kvmm_block_unpin { u32 size, flags; u64 hash, extra; }`",
    "```\nstruct kvmm_block_pin_reply { u32 size, tier, pins, pin_quota;\n\tu64 expires_ns; u64 reserved[2]; };  /* 48 bytes */\n```",
    "| probe | arguments |\n|---|---|\n| `evict` | `u64 hash, u64 tier, u64 bytes` |",
    "| probe | arguments |\n|---|---|\n| `no_such_probe` | `u64 hash` |",
    "`region.open_prefix(hashes, no_such_kw=True)`",
    'see [tiers.md](tiers.md), "No such section"',
    "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |",
    "`../shared/traces/no-such-trace.jsonl`",
    "| cmd | name |\n|---|---|\n| 0x25 | SEQ_WAIT_READY |",
    "```\nTENANT       SESSIONS      GPU     HOST     NVME  ADMITTED    OPENS  HIT-GPU HIT-HOST HIT-NVME PUBLISHED  DROPPED\n```",
    "```\n" + table_heads["SESSION"].replace("PINNED", "PIN") + "\n```",
    '```\n{"dropped":{"gpu":2,"host":2,"nvme":0},"kept":{"gpu":0,"host":0,"nvme":0},"kept_in_use":0}\n```',
    '```\n{"backend":"host","device":"host","page_size":65536,\n "pages":{"total":1024,"free":1004},"cache":{...}}\n```',
]
POSITIVE = ["```\n" + table_heads["TENANT"] + "\n```",
            "```\n" + json.dumps(json_replies["dropped"], separators=(",", ":")) + "\n```",
            "`tests/run.sh`", "`make check T=vmm-`", "`kvmmd --gpu-mem SIZE`",
            "`kvmm_seq_extend()`", "`kvmm_up`", "`cache.tiers.T.hits`",
            "[x](admin.md#kvmmd)", "`kvmm-replay --msa`", "`build/kvmmctl`"]
for i, t in enumerate(NEGATIVE):
    errors.clear()
    check_doc("Documentation/self-check.md", t)
    check_struct_fields("Documentation/self-check.md", t)
    check_section_refs("Documentation/self-check.md", t)
    check_tables("Documentation/self-check.md", t)
    check_samples("Documentation/self-check.md", t)
    check_abi_tables("Documentation/self-check.md", t)
    check_probe_tables("Documentation/self-check.md", t)
    if not errors:
        print("FAIL: self-check: %s was not reported" % t)
        sys.exit(1)
for t in POSITIVE:
    errors.clear()
    check_doc("Documentation/self-check.md", t)
    check_struct_fields("Documentation/self-check.md", t)
    check_section_refs("Documentation/self-check.md", t)
    check_tables("Documentation/self-check.md", t)
    check_samples("Documentation/self-check.md", t)
    check_abi_tables("Documentation/self-check.md", t)
    if errors:
        print("FAIL: self-check: %s was reported: %s" % (t, errors))
        sys.exit(1)
# ... and so must a wrong value in a copy of the real admin.md.
admin = open("Documentation/admin.md").read()
for fn, old, new in ((check_admin, "(default 2000)", "(default 2001)"),
                     (check_admin, "\n  tenants [--block-pages N]\n", "\n  tenants\n"),
                     (check_admin, "\n  help                   this list\n",
                      "\n  help                   this list\n  frob                   no such command\n"),
                     (check_admin, "\n  policy-state FILE ", "\n  policy-stat FILE "),
                     (check_metric_table, "| `kvmm_up` | gauge |", "| `kvmm_up` | counter |"),
                     (check_metric_table, "| `kvmm_pins` | gauge |", "| `kvmm_no_such_pins` | gauge |"),
                     (check_metric_table, "| `kvmm_size_tenant_limit_moves_total{size,kind,id}` | counter |",
                      "| `kvmm_size_tenant_limit_moves_total{size,kind,id}` | gauge |"),
                     (check_metric_table, "| `kvmm_size_demotions_queued{size}` | gauge |",
                      "| `kvmm_demotions_queued{size}` | gauge |")):
    errors.clear()
    if old not in admin:
        print("FAIL: self-check: admin.md has no %r to alter" % old)
        sys.exit(1)
    fn("Documentation/admin.md", admin.replace(old, new))
    if not errors:
        print("FAIL: self-check: admin.md with %r for %r was not reported" % (new, old))
        sys.exit(1)
errors.clear()
counts.clear()

texts = [(d, open(d).read()) for d in DOCS]
run_all(texts)
for h in HISTORICAL:
    if not any(h in t for _, t in texts):
        bad("tests/doc-names.sh", "HISTORICAL lists `%s`, which no document names" % h)
if shared_missing:
    print("note: no ../shared next to the tree: %d paths in it not checked" % len(shared_missing))
for e in errors:
    print(e)
# A kind that matched nothing means the parsing broke, not that all is well.
for kind in ("path", "build path", "test", "test pattern", "option", "name",
             "make target", "kvmmctl command", "status field", "python name",
             "link", "command number", "struct size", "kvmmd option",
             "kvmmd default", "file name", "variable", "struct fields",
             "metric family", "per-size metric family", "probe",
             "probe arguments", "set-up command", "section reference",
             "table", "sample header", "sample JSON",
             "kvmmctl command documented"):
    if not counts.get(kind):
        bad("tests/doc-names.sh", "no %s found in the documents to check" % kind)
print("checked %s" % ", ".join("%d %s" % (v, k) for k, v in sorted(counts.items())))
if errors:
    print("FAIL: %d wrong names or values in the documentation" % len(errors))
    sys.exit(1)
print("ok: every name and value checked is true")
PY
