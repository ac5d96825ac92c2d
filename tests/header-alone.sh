#!/bin/bash
# Every public header (kvmm/include/kvmm/*.h and the parts of uapi.h in
# kvmm/include/kvmm/uapi/, what make install puts in INCLUDEDIR/kvmm)
# compiles alone, first in a file, in C11 and C++17 with
# -Wall -Wextra -pedantic -Werror, with gcc/g++ and, where installed,
# clang/clang++ (uapi.h's flexible array members made g++ -pedantic fail);
# and kvmm.h alone gives the names its comments point to (the KVMM_PIN_F_*
# flags, KVMM_PREFIX_OPEN_*, KVMM_WAIT_READY_POLL, enum kvmm_block_action
# of uapi.h) and the KVMM_BACKEND_* values of struct kvmm_stats.backend.
# Skips (77) without a C++ compiler.
set -u
SRC=${KVMM_SRC:-.}
inc=$SRC/kvmm/include
D=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-hdr.XXXXXX")
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v g++ >/dev/null || { echo "skip: no g++"; exit 77; }

compilers="gcc:c11 g++:c++17"
command -v clang >/dev/null && compilers="$compilers clang:c11"
command -v clang++ >/dev/null && compilers="$compilers clang++:c++17"
n=0
for h in "$inc"/kvmm/*.h "$inc"/kvmm/uapi/*.h; do
	name=${h#"$inc"/kvmm/}
	for cs in $compilers; do
		cc=${cs%%:*} std=${cs#*:}
		ext=c
		case $std in c++*) ext=cpp ;; esac
		printf '#include <kvmm/%s>\n' "$name" >"$D/t.$ext"
		"$cc" -std="$std" -Wall -Wextra -pedantic -Werror -I"$inc" \
			-c "$D/t.$ext" -o "$D/t.o" 2>"$D/err" ||
			{ cat "$D/err"; fail "$name alone: $cc -std=$std -pedantic -Werror"; }
		n=$((n + 1))
	done
done
echo "ok: $n compilations of the public headers alone"

# kvmm.h alone: what its comments name
cat >"$D/names.c" <<'C'
#include <kvmm/kvmm.h>

int names(struct kvmm_conn *c, struct kvmm_region *r, uint64_t h,
	  struct kvmm_stats *st)
{
	struct kvmm_pin_opts po = { .size = sizeof(po),
				    .flags = KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE,
				    .ttl_ns = 1000000000 };
	struct kvmm_prefix_opts pf = { .size = sizeof(pf),
				       .flags = KVMM_PREFIX_OPEN_SEGMENTS |
						KVMM_PREFIX_OPEN_EARLY };
	enum kvmm_block_action a = KVMM_BLOCK_RECOMPUTE;
	uint32_t seq, nb;

	(void)kvmm_seq_wait_ready(r, 0, 1, KVMM_WAIT_READY_POLL, NULL, 0, NULL);
	(void)kvmm_seq_open_prefix_opts(r, &h, 1, &seq, &nb, &pf);
	return kvmm_block_pin(c, h, &po) + (int)a +
	       (st->backend == KVMM_BACKEND_HOST) +
	       (st->backend == KVMM_BACKEND_CUDA);
}
C
gcc -std=c11 -Wall -Wextra -pedantic -Werror -I"$inc" -c "$D/names.c" \
	-o "$D/names.o" 2>"$D/err" || { cat "$D/err"; fail "kvmm.h alone lacks names it documents"; }
echo "ok: kvmm.h alone gives KVMM_PIN_F_*, KVMM_PREFIX_OPEN_*, KVMM_WAIT_READY_POLL, KVMM_BLOCK_*, KVMM_BACKEND_*"
