# shellcheck shell=bash
# Sourced by the tests that replay the Mooncake conversation trace in
# process (replay-reference.sh, replay-restart.sh,
# replay-policy-state.sh).  Sets B (the build), R (kvmm-replay) and T
# (the trace, $KVMM_TRACE), skips (77) when R is not built, the trace is
# absent or python3 is missing, and defines:
#   fail MESSAGE          print it, exit 1
B=${KVMM_BUILD:-build}
R=$B/kvmm-replay
T=${KVMM_TRACE:-${KVMM_SRC:-.}/../shared/traces/mooncake/conversation_trace.jsonl}
[ -x "$R" ] || { echo "skip: $R not built"; exit 77; }
[ -r "$T" ] || { echo "skip: trace $T absent"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
