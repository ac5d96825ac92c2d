#!/bin/sh
# Install the Debian packages the build and the tests need.
#   tools/deps.sh            install what is missing (apt-get update first)
#   tools/deps.sh --ensure   same, but only when something is missing, quietly
#   tools/deps.sh --list     print the package list
set -u
PKGS="build-essential pkg-config clang llvm libbpf-dev bpftool libelf-dev
zlib1g-dev liburing-dev libnuma-dev libxxhash-dev systemtap-sdt-dev fio
python3 gnuplot-nox valgrind clang-format util-linux cppcheck"

if [ "${1:-}" = "--list" ]; then
	echo $PKGS
	exit 0
fi

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
if [ -z "$missing" ]; then
	[ "${1:-}" = "--ensure" ] || echo "deps: all packages present"
	exit 0
fi
echo "deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
	sudo=sudo
	command -v sudo >/dev/null 2>&1 || {
		echo "deps: not root and no sudo; install as root:$missing" >&2
		exit 1
	}
else
	sudo=
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq || exit 1
$sudo apt-get install -y -qq --no-install-recommends $missing || exit 1
# Features probed before the install must be probed again.
rm -f build/config.mk build/asan/config.mk build/analyze/config.mk
exit 0
