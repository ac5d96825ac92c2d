# shellcheck shell=bash
# Sourced by the tests that replay a trace through a real kvmmd
# (replay-daemon.sh, replay-daemon-msa.sh).  Sets B (the build), R
# (kvmm-replay), K (kvmmd), T (the conversation trace, $KVMM_TRACE) and N
# ($KVMM_REPLAY_DAEMON_REQUESTS, 1500), skips (77) when R or K is not
# built, sets a fresh $D, removed on exit after the daemon is stopped,
# and defines:
#   fail MESSAGE          print it and kvmmd's log tail, exit 1
#   start POLICY GPU HOST kvmmd on $D/s, host backend, 4 KiB pages (one
#                         trace block = one kvmm block of BLOCK bytes),
#                         telemetry off (the reference cost model, which
#                         the in-process replay uses too), GPU blocks
#                         GPU and HOST host blocks (0: no host tier),
#                         then the words of $KVMMD_EXTRA if set
#   stop                  stop it, failing on a non-zero exit
#   strip                 filter a replay's JSON down to what both
#                         replays count alike
#   job COMMAND...        run COMMAND (a function that starts and stops
#                         its own kvmmd) in the background with a $D and
#                         a PID of its own, at most $J at once
#                         ($KVMM_REPLAY_JOBS, 2): the replays are two
#                         processes taking turns, each about one core's
#                         worth together, so two pairs fill a 2-core
#                         machine; their counts do not depend on timing
#                         (the daemon settles restores in submission
#                         order), but the wall times they print do:
#                         KVMM_REPLAY_JOBS=1 for those
#   collect               wait for every job, print each one's output
#                         in the order they were started, exit 1 after
#                         the first that failed
B=${KVMM_BUILD:-build}
R=$B/kvmm-replay
K=$B/kvmmd
T=${KVMM_TRACE:-${KVMM_SRC:-.}/../shared/traces/mooncake/conversation_trace.jsonl}
N=${KVMM_REPLAY_DAEMON_REQUESTS:-1500}
[ -x "$R" ] && [ -x "$K" ] || { echo "skip: kvmm-replay or kvmmd not built"; exit 77; }
D=$(mktemp -d "${TMPDIR:-/tmp}/kvmm-replayd.XXXXXX")
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	[ -r "$D/kvmmd.log" ] && tail -20 "$D/kvmmd.log"
	exit 1
}
BLOCK=8192 # two 4 KiB pages: one trace block is one kvmm block

start() { # policy gpu host
	local extra=()
	[ "$3" != 0 ] && extra=(--host-mem $((($3 + 2) * BLOCK)))
	# shellcheck disable=SC2206 # words on purpose
	[ -n "${KVMMD_EXTRA:-}" ] && extra+=($KVMMD_EXTRA)
	"$K" --foreground --backend host --socket "$D/s" --page-size 4K \
		--gpu-mem 64M --telemetry off --log-level error \
		--cache-policy "$1" --cache-gpu-blocks "$2" "${extra[@]}" \
		2>"$D/kvmmd.log" &
	PID=$!
	for _ in $(seq 100); do
		[ -S "$D/s" ] && return 0
		kill -0 "$PID" 2>/dev/null || fail "kvmmd did not start"
		sleep 0.05
	done
	fail "kvmmd socket did not appear"
}
stop() {
	kill "$PID" && wait "$PID" || fail "kvmmd exit status $?"
	PID=
	rm -f "$D/s"
}
J=${KVMM_REPLAY_JOBS:-2}
NJOB=0 # jobs started, $D/jN each
CJOB=0 # jobs collected
job() {
	local dir=$D/j$NJOB
	NJOB=$((NJOB + 1))
	mkdir "$dir" || fail "mkdir $dir"
	while [ "$(jobs -rp | wc -l)" -ge "$J" ]; do wait -n; done
	{
		(
			D=$dir
			PID=
			trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null' EXIT
			"$@"
		) >"$dir/out" 2>&1
		echo $? >"$dir/rc"
	} &
}
collect() {
	wait
	while [ "$CJOB" -lt "$NJOB" ]; do
		cat "$D/j$CJOB/out"
		local rc
		rc=$(cat "$D/j$CJOB/rc" 2>/dev/null)
		[ "$rc" == 0 ] || { echo "FAIL: job $CJOB exited ${rc:-without a status}"; exit 1; }
		CJOB=$((CJOB + 1))
	done
}
# the JSON without the counters the two count differently (demotions,
# drops: the daemon counts copies made, the policy its decisions) and the
# wall time
strip() { sed -e 's/,"demotions":{[^}]*},"drops":[0-9]*//' -e 's/,"wall_s".*//'; }
