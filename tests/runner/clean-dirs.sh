#!/bin/bash
# make clean-test-dirs: removes the directories of test suites that are no
# longer running, and only those.
#
#   tests/runner/clean-dirs.sh [DIR]...   (default: $TMPDIR, /tmp, /var/tmp
#                                         and $KVMM_NVME_TEST_DIR)
#
# tests/run.sh holds a lock (flock) on DIR/kvmm-run.XXXXXX/lock for as long
# as its suite runs; a directory whose lock is free belongs to a suite
# that has ended (or was killed) and is removed while this holds the lock.
# A kvmm-run.* directory with no lock file is an older runner's, which may
# still be running: it is counted and left alone.  `rm -rf /tmp/kvmm-run.*`
# instead pulls the directories from under running tests, which then fail
# with errors (connect(): No such file or directory) that do not say why.
set -u
[ $# = 0 ] && set -- "${TMPDIR:-/tmp}" /tmp /var/tmp ${KVMM_NVME_TEST_DIR:+"$KVMM_NVME_TEST_DIR"}
removed=0 running=0 unlocked=0
seen=" "
for base in "$@"; do
	case $seen in *" $base "*) continue ;; esac
	seen="$seen$base "
	for d in "$base"/kvmm-run.*; do
		[ -d "$d" ] && [ ! -L "$d" ] || continue
		if [ ! -f "$d/lock" ]; then
			unlocked=$((unlocked + 1))
		elif flock -n "$d/lock" rm -rf "$d"; then
			removed=$((removed + 1))
		else
			running=$((running + 1))
		fi
	done
done
echo "clean-test-dirs: removed $removed, left $running of running suites and $unlocked with no lock file (an older runner's, maybe still running: remove by hand when no suite runs)"
