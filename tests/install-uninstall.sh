#!/bin/bash
# `make uninstall` takes back what `make install` put into a DESTDIR
# tree: after both, no file is left but kvmmd.conf (an operator's, which
# install never overwrites either: an edited one survives a second
# install and the uninstall), and no directory install made for kvmm
# alone (include/kvmm, share/kvmm).  Each kind of file install puts there
# is checked to be there first, every public header (uapi.h's parts in
# include/kvmm/uapi/ too) and module of the Python package, and that a C
# and a C++ program including <kvmm/uapi.h> build with the installed
# include directory alone.  The package's __pycache__ goes too, and an
# older install's kvmm.py.
# timeout: 120
set -u
source "${KVMM_SRC:-.}/tests/lib/install-tree.sh"
r=$D/root
files() { (cd "$r" && find . \( -type f -o -type l \) | sort); }

install_tree "$r"
files >"$D/installed"
cat "$D/installed"
for f in "$PREFIX/bin/kvmmd" "$PREFIX/bin/kvmmctl" "$LIBDIR/libkvmm.a" \
	"$LIBDIR/libkvmm.so.1" "$LIBDIR/libkvmm.so" "$LIBDIR/pkgconfig/libkvmm.pc" \
	"$INCLUDEDIR/kvmm/kvmm.h" "$DATADIR/profiles/h200-llama3-8b.profile"; do
	grep -qx ".$f" "$D/installed" || fail "make install did not put $f"
done
for f in "$SRC"/kvmm/python/kvmm/*.py; do
	grep -q "/kvmm/${f##*/}\$" "$D/installed" || fail "no kvmm/${f##*/} (the Python package) installed"
done
# every public header, uapi.h's parts (kvmm/uapi/) too, and a program
# using a struct of each part builds from the installed tree alone
for h in $(cd "$SRC/kvmm/include" && echo kvmm/*.h kvmm/uapi/*.h); do
	grep -qx ".$INCLUDEDIR/$h" "$D/installed" || fail "make install did not put $INCLUDEDIR/$h"
done
cat >"$D/hdr.c" <<'C'
#include <kvmm/uapi.h>
int main(void)
{
	return !(sizeof(struct kvmm_hello) && sizeof(struct kvmm_seq_extend_reply) &&
		 sizeof(struct kvmm_status_reply) && sizeof(struct kvmm_tenants_reply) &&
		 sizeof(struct kvmm_prefix_open) && sizeof(struct kvmm_tier_stats_reply) &&
		 sizeof(struct kvmm_rqe) && KVMM_ABI_MAJOR == 1);
}
C
cp "$D/hdr.c" "$D/hdr.cpp"
for cc in "${CC:-cc}" "${CXX:-c++}"; do
	command -v "$cc" >/dev/null || continue
	src=$D/hdr.c
	[ "$cc" = "${CXX:-c++}" ] && src=$D/hdr.cpp
	"$cc" -Wall -Werror -I"$r$INCLUDEDIR" -o "$D/hdr" "$src" && "$D/hdr" ||
		fail "$cc: a program including the installed <kvmm/uapi.h> does not build or run"
done
grep -q '/kvmmd\.service$' "$D/installed" && grep -q '/kvmmd@\.service$' "$D/installed" ||
	fail "no systemd units installed"
conf=$(grep '/kvmm/kvmmd\.conf$' "$D/installed") || fail "no kvmmd.conf installed"

echo "# edited" >>"$r/$conf"
install_tree "$r"
files | cmp -s - "$D/installed" || fail "a second install changed the file list"
grep -qx "# edited" "$r/$conf" || fail "install overwrote an edited $conf"

# the bytecode python3 writes beside the package when it is imported
# goes with it, and so does a kvmm.py an install from before the package
# left in PYTHONDIR
init=$(grep '/kvmm/__init__\.py$' "$D/installed")
: >"$r/${init%/kvmm/__init__.py}/kvmm.py"
if command -v python3 >/dev/null; then
	python3 -m compileall -q "$r/${init%/__init__.py}" || fail "compileall of the installed package"
	[ -d "$r/${init%/__init__.py}/__pycache__" ] || fail "no __pycache__ after compileall"
fi

uninstall_tree "$r"
left=$(files)
echo "left: $left"
[ "$left" = "$conf" ] || fail "uninstall left: $left"
grep -qx "# edited" "$r/$conf" || fail "uninstall changed $conf"
grep -q "kept .*kvmmd.conf" "$D/uninstall.log" || fail "uninstall did not say it kept $conf"
[ ! -e "$r$INCLUDEDIR/kvmm" ] || fail "$INCLUDEDIR/kvmm left"
[ ! -e "$r$DATADIR" ] || fail "$DATADIR left"
echo "ok: uninstall undoes install but for kvmmd.conf"
