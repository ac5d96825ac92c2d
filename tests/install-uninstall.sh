#!/bin/bash
# `make uninstall` takes back what `make install` put into a DESTDIR
# tree: after both, no file is left but kvmmd.conf (an operator's, which
# install never overwrites either: an edited one survives a second
# install and the uninstall), and no directory install made for kvmm
# alone (include/kvmm, share/kvmm).  Each kind of file install puts there
# is checked to be there first.
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
grep -q '/kvmm\.py$' "$D/installed" || fail "no kvmm.py installed"
grep -q '/kvmmd\.service$' "$D/installed" && grep -q '/kvmmd@\.service$' "$D/installed" ||
	fail "no systemd units installed"
conf=$(grep '/kvmm/kvmmd\.conf$' "$D/installed") || fail "no kvmmd.conf installed"

echo "# edited" >>"$r/$conf"
install_tree "$r"
files | cmp -s - "$D/installed" || fail "a second install changed the file list"
grep -qx "# edited" "$r/$conf" || fail "install overwrote an edited $conf"

uninstall_tree "$r"
left=$(files)
echo "left: $left"
[ "$left" = "$conf" ] || fail "uninstall left: $left"
grep -qx "# edited" "$r/$conf" || fail "uninstall changed $conf"
grep -q "kept .*kvmmd.conf" "$D/uninstall.log" || fail "uninstall did not say it kept $conf"
[ ! -e "$r$INCLUDEDIR/kvmm" ] || fail "$INCLUDEDIR/kvmm left"
[ ! -e "$r$DATADIR" ] || fail "$DATADIR left"
echo "ok: uninstall undoes install but for kvmmd.conf"
