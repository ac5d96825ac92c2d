#!/bin/bash
# tinylm's command line: --help documents the options, bad options fail
# with exit 2 and a message naming the option, the output is the same
# bitwise for every prefill chunk size and for the same seeds, a different
# weight seed changes it, and a checkpoint written with --save-checkpoint
# gives the same tokens and logit checksums when loaded with --checkpoint.
set -u
bin=${KVMM_BUILD:-build}/tinylm
[ -x "$bin" ] || { echo "skip: $bin not built"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# --help: exit 0, every documented knob is there.
"$bin" --help >"$tmp/help" || fail "--help exited $?"
for o in --seed --checkpoint --dim --layers --heads --kv-heads --vocab \
	--chunk --temperature --kv --socket --conversations --clients \
	DEMO_CLIENTS DEMO_GPU_MEM DEMO_POLICY; do
	grep -q -- "$o" "$tmp/help" || fail "--help does not mention $o"
done
# printed as it reads: no printf escape left in it
grep -q '%' "$tmp/help" && fail "--help prints a literal %: $(grep '%' "$tmp/help")"

# Bad options: exit 2, a message that names the problem.
bad() { # expected-substring args...
	local want=$1
	shift
	"$bin" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	[ $rc = 2 ] || fail "tinylm $* exited $rc, expected 2"
	grep -q -- "$want" "$tmp/err" || fail "tinylm $*: no '$want' in: $(cat "$tmp/err")"
}
bad "--chunk" --chunk 0
bad "--chunk" --chunk abc
bad "--layers" --layers -1
bad "unrecognized" --no-such-option
bad "--kv" --kv gpu
bad "heads must divide dim" --dim 30 --heads 4
bad "kv heads must divide heads" --heads 8 --kv-heads 3
bad "--client must be below --clients" --client 2 --clients 2
bad "needs" --max-tokens 10
bad "--prompt" --prompt "1 2 x"
bad "unexpected argument" stray
# nan compared false both ways and was taken as a temperature
bad "--temperature: 'nan' is not a number in 0..100" --temperature nan
bad "--temperature: '-1' is not a number in 0..100" --temperature -1
# a daemon that cannot be reached: the message names the socket
"$bin" --kvmm-stats --socket "$tmp/none.sock" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || fail "--kvmm-stats of a missing socket exited $rc, expected 1"
grep -qF "tinylm: --kvmm-stats: $tmp/none.sock: No such file or directory" "$tmp/err" ||
	fail "--kvmm-stats of a missing socket: $(cat "$tmp/err")"
"$bin" --checkpoint "$tmp/missing.bin" >/dev/null 2>"$tmp/err" && fail "missing checkpoint accepted"
grep -q "missing.bin" "$tmp/err" || fail "missing checkpoint: $(cat "$tmp/err")"

# Chunk size never changes the output.
small="--dim 64 --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300
	--conversations 3 --turns 2 --system-tokens 40 --user-tokens 9 --gen-tokens 6"
# shellcheck disable=SC2086
"$bin" $small --chunk 1 | grep '^tok' >"$tmp/c1" || fail "run failed"
[ "$(wc -l <"$tmp/c1")" = 36 ] || fail "expected 36 tokens, got $(wc -l <"$tmp/c1")"
for k in 3 16 64; do
	# shellcheck disable=SC2086
	"$bin" $small --chunk $k | grep '^tok' >"$tmp/c$k"
	cmp -s "$tmp/c1" "$tmp/c$k" || fail "chunk $k differs from chunk 1"
done
# Seeded sampling: same seed same output, another seed another.
# shellcheck disable=SC2086
"$bin" $small --temperature 1 --sample-seed 5 | grep '^tok' >"$tmp/s5a"
# shellcheck disable=SC2086
"$bin" $small --temperature 1 --sample-seed 5 --chunk 7 | grep '^tok' >"$tmp/s5b"
# shellcheck disable=SC2086
"$bin" $small --temperature 1 --sample-seed 6 | grep '^tok' >"$tmp/s6"
cmp -s "$tmp/s5a" "$tmp/s5b" || fail "seeded sampling not reproducible"
cmp -s "$tmp/s5a" "$tmp/s6" && fail "sample seed has no effect"
# shellcheck disable=SC2086
"$bin" $small --seed 2 | grep '^tok' >"$tmp/w2"
cmp -s "$tmp/c1" "$tmp/w2" && fail "weight seed has no effect"

# Clients split the conversations; together they give the same lines.
for i in 0 1; do
	# shellcheck disable=SC2086
	"$bin" $small --client $i --clients 2 | grep '^tok' >"$tmp/cl$i"
done
sort "$tmp/cl0" "$tmp/cl1" | cmp -s - <(sort "$tmp/c1") || fail "clients' union differs"

# Checkpoint round trip through the command line.
# shellcheck disable=SC2086
"$bin" $small --save-checkpoint "$tmp/m.bin" || fail "--save-checkpoint"
# shellcheck disable=SC2086
"$bin" --checkpoint "$tmp/m.bin" --conversations 3 --turns 2 --system-tokens 40 \
	--user-tokens 9 --gen-tokens 6 | grep '^tok' >"$tmp/ck"
cmp -s "$tmp/c1" "$tmp/ck" || fail "checkpoint run differs from the generated model"

# The final line is JSON with the counters.
# shellcheck disable=SC2086
"$bin" $small --quiet | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); assert d["tokens_generated"]==36 and d["sequences"]==6, d' ||
	fail "bad JSON line"
echo ok
