#!/bin/bash
# libkvmm.pc's Libs.private lists what a static link of libkvmm.a needs:
# a program calling kvmm_hash_chain() (libxxhash's XXH3 inside) built
# with `gcc -static $(pkg-config --static --cflags --libs libkvmm)`
# against a `make install DESTDIR=` tree links, and prints the same
# hashes as the same program linked against build/libkvmm.so.1.  The
# installed .pc names this build's PREFIX and LIBDIR.  Skips (77) without
# pkg-config, a static libc or libxxhash, or in an ASan build.
# timeout: 120
set -u
source "${KVMM_SRC:-.}/tests/lib/install-tree.sh"
command -v pkg-config >/dev/null || { echo "skip: pkg-config not installed"; exit 77; }
case "$B" in */asan) echo "skip: no static link of an ASan build"; exit 77 ;; esac
grep -q '^#define HAVE_LIBXXHASH 1' "$SRC/$B/config.h" ||
	{ echo "skip: built without libxxhash (kvmm_hash_chain is -ENOTSUP)"; exit 77; }
cc=${CC:-cc}
printf 'int main(void) { return 0; }\n' >"$D/t.c"
"$cc" -static "$D/t.c" -o "$D/t" 2>/dev/null || { echo "skip: no static libc"; exit 77; }

install_tree "$D/root"
pc=$D/root$LIBDIR/pkgconfig/libkvmm.pc
[ -f "$pc" ] || fail "no $pc"
grep -qx "prefix=$PREFIX" "$pc" || { cat "$pc"; fail "$pc: not prefix=$PREFIX"; }
grep -qx "libdir=$LIBDIR" "$pc" || { cat "$pc"; fail "$pc: not libdir=$LIBDIR"; }

cat >"$D/h.c" <<'C'
#include <stdint.h>
#include <stdio.h>
#include <kvmm/kvmm.h>

int main(void)
{
	uint32_t tokens[48];
	uint64_t h[3];
	int i, n;

	for (i = 0; i < 48; i++)
		tokens[i] = 1000 + i;
	n = kvmm_hash_chain(7, 9, tokens, 48, 16, h, 3);
	if (n != 3 || !h[0] || !h[1] || !h[2])
		return 1;
	printf("%016llx %016llx %016llx\n", (unsigned long long)h[0],
	       (unsigned long long)h[1], (unsigned long long)h[2]);
	return 0;
}
C
flags=$(PKG_CONFIG_PATH=$D/root$LIBDIR/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D/root \
	PKG_CONFIG_LIBDIR= pkg-config --static --cflags --libs libkvmm) ||
	fail "pkg-config --static libkvmm"
echo "flags: $flags"
"$cc" -static "$D/h.c" -o "$D/h-static" $flags 2>"$D/link.log" ||
	{ cat "$D/link.log"; fail "static link with: $flags"; }
"$cc" "$D/h.c" -o "$D/h-shared" -I"$SRC/kvmm/include" -L"$SRC/$B" -lkvmm \
	-Wl,-rpath,"$(cd "$SRC/$B" && pwd)" || fail "link against $B/libkvmm.so"
s=$("$D/h-static") || fail "static program: exit $?"
d=$("$D/h-shared") || fail "shared program: exit $?"
echo "static: $s"
echo "shared: $d"
[ "$s" = "$d" ] || fail "static and shared libkvmm hash differently"
echo "ok: static link from $pc"
