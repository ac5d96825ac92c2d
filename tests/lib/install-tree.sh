# shellcheck shell=bash
# Sourced by the tests of `make install` (tests/install-*.sh).  Sets SRC
# (the source tree), B (the build, as `make BUILD=` takes it) and, from
# the build's own install_paths.h (what its objects were compiled with, so
# the install rebuilds nothing), PREFIX, LIBDIR, INCLUDEDIR and DATADIR;
# sets a fresh $D, removed on exit; skips (77) when the build has no
# kvmmd.  Defines:
#   fail MESSAGE          print it, exit 1
#   install_tree DESTDIR  `make install` of this build into DESTDIR
#   uninstall_tree DESTDIR  `make uninstall` from it
SRC=${KVMM_SRC:-.}
B=${KVMM_BUILD:-build}
case "$B" in "$SRC"/*) B=${B#"$SRC"/} ;; esac
[ -x "$SRC/$B/kvmmd" ] || [ -x "$B/kvmmd" ] || { echo "skip: kvmmd not built"; exit 77; }
paths=$SRC/$B/install_paths.h
[ -f "$paths" ] || paths=$B/install_paths.h
[ -f "$paths" ] || { echo "skip: no $B/install_paths.h (built before it existed)"; exit 77; }
path_of() { sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$paths"; }
PREFIX=$(path_of KVMM_PREFIX)
LIBDIR=$(path_of KVMM_LIBDIR)
INCLUDEDIR=$(path_of KVMM_INCLUDEDIR)
DATADIR=$(path_of KVMM_PROFILE_DIR_DEFAULT)
DATADIR=${DATADIR%/profiles}
D=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-install.XXXXXX")
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A make of our own, not a sub-make of `make check`'s jobserver.
make_tree() {
	local sanitize=0

	case "$B" in */asan) sanitize=1 ;; esac
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$SRC" \
		BUILD="$B" SANITIZE=$sanitize PREFIX="$PREFIX" LIBDIR="$LIBDIR" \
		INCLUDEDIR="$INCLUDEDIR" DATADIR="$DATADIR" "$@"
}
install_tree() {
	make_tree DESTDIR="$1" install >"$D/install.log" 2>&1 ||
		{ cat "$D/install.log"; fail "make install DESTDIR=$1"; }
}
uninstall_tree() {
	make_tree DESTDIR="$1" uninstall >"$D/uninstall.log" 2>&1 ||
		{ cat "$D/uninstall.log"; fail "make uninstall DESTDIR=$1"; }
}
