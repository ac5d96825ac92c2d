// SPDX-License-Identifier: MIT
/*
 * What telemetry could not count is reported: a real client process of
 * kvmmd --telemetry shm steps 5000 blocks at once (more than its region's
 * 4096 block slots) and fires one access probe of 70000 records (4464
 * over the cap of 65536).  kvmmd then logs a WARN that says what was
 * dropped, `kvmmctl --json status` shows the source and the drops, and
 * `kvmmctl metrics` has kvmm_telemetry_dropped_total with the same
 * values.  Before, nothing but `kvmmctl trace` (BPF only) read the drop
 * counters: the daemon was silent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/lib/client.h"
#include "tests/ebpf-shm-client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define NSEQ 5
#define OVER 70000

static int client(void)
{
	static struct kvmm_access_rec recs[OVER];
	struct kvmm_conn *c;
	struct kvmm_region *r;
	int e = sc_open(NSEQ, &c, &r);

	if (!e && !c->tel)
		e = 3;
	/* first, so that its block has a slot */
	for (int i = 0; !e && i < OVER; i++)
		recs[i] = (struct kvmm_access_rec){ 0x7000000000000000ull, 1 };
	if (!e)
		kvmm_tel_access(c->tel, 1, recs, OVER);
	if (!e)
		e = sc_phase(c, r, 0x6000000000000000ull, NSEQ, 1);
	kvmm_disconnect(c);
	return e;
}

/* The number after `key` in text, or -1. */
static long long after(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

int main(void)
{
	const char *args[] = { "--telemetry", "shm",	   "--page-size",
			       "4K",	      "--gpu-mem", "512M",
			       "--log-level", "info",	   NULL };
	static char out[1 << 16], log[1 << 16];
	char want[128];
	struct kvmm_status_reply st;
	struct td_daemon d;
	long long blocks;
	pid_t pid;
	int ws;

	/* each telemetry tick that fed says so: the wait below */
	setenv("KVMMD_TEST_TEL_POLL_LOG", "1", 1);
	t_ok(td_start(&d, args));
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		_exit(client());
	t_assert(waitpid(pid, &ws, 0) == pid);
	if (!WIFEXITED(ws) || WEXITSTATUS(ws)) {
		td_dump_log(&d);
		t_fail("client failed (%d)", ws);
	}
	/* the session ended, then a poll begun after its end fed: its end
	 * is in the totals */
	t_ok(td_wait_sessions(&d, 1, 20000, &st)); /* the status one's */
	td_wait_tel_polled(&d, td_tel_ticks(&d), 20000);
	t_ok(td_status(&d, &st));
	t_assert(!strcmp(st.telemetry, "shm"));
	t_assert_eq(st.tel_access_dropped, OVER - KVMM_TEL_MAX_ACCESS_RECORDS);
	/* 5000 blocks in the 4095 slots left, 32 probes each */
	t_assert(st.tel_blocks_dropped >= NSEQ * SC_BLOCKS_PER_SEQ - 4095);
	t_assert(st.tel_blocks_dropped < NSEQ * SC_BLOCKS_PER_SEQ);
	t_assert_eq(st.tel_hist_dropped, 0);
	t_assert_eq(st.tel_events_dropped, 0);
	blocks = (long long)st.tel_blocks_dropped;

	t_assert_eq(td_kvmmctl(d.sock, "--json status", out, sizeof(out)), 0);
	if (!strstr(out, "\"telemetry\":{\"source\":\"shm\",\"dropped\":{") ||
	    after(out, "\"dropped\":{\"access\":") !=
		    OVER - KVMM_TEL_MAX_ACCESS_RECORDS ||
	    after(out, "\"blocks\":") != blocks ||
	    after(out, "\"hist\":") != 0 || after(out, "\"events\":") != 0)
		t_fail("status --json: %s", out);
	t_assert_eq(td_kvmmctl(d.sock, "metrics", out, sizeof(out)), 0);
	if (after(out, "kvmm_telemetry_dropped_total{kind=\"access\"} ") !=
		    OVER - KVMM_TEL_MAX_ACCESS_RECORDS ||
	    after(out, "kvmm_telemetry_dropped_total{kind=\"blocks\"} ") !=
		    blocks ||
	    after(out, "kvmm_telemetry_dropped_total{kind=\"hist\"} ") != 0 ||
	    after(out, "kvmm_telemetry_dropped_total{kind=\"events\"} ") != 0 ||
	    !strstr(out, "# TYPE kvmm_telemetry_dropped_total counter"))
		t_fail("metrics: %s", out);

	/* the tick that fed the poll said so */
	td_wait_log(&d, "telemetry (shm) dropped ", 20000);
	t_ok(td_stop_log(&d, log, sizeof(log)));
	/* the warning says what the tick saw (a tick in the middle of the
	 * client's work saw the access records alone, and the next warning
	 * is a minute later); the shutdown totals say it all */
	snprintf(want, sizeof(want),
		 "dropped: 4464 access records, %lld block stats, 0 "
		 "histogram rows, 0 events",
		 blocks);
	if (!strstr(log, "WARN  kvmmd") ||
	    !strstr(log, "telemetry (shm) dropped ") ||
	    !strstr(log, "access records (4464 in all)") ||
	    !strstr(log, want)) {
		fprintf(stderr, "%s", log);
		t_fail("no warning about the drops");
	}
	printf("ok: %lld block stats and %d access records dropped: logged, "
	       "in status and metrics\n",
	       blocks, OVER - KVMM_TEL_MAX_ACCESS_RECORDS);
	return 0;
}
