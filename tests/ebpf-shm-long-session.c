// SPDX-License-Identifier: MIT
/*
 * A long-lived session under kvmmd --telemetry shm keeps being counted
 * after its region's 4096 block slots were each used once: a real client
 * process steps three sets of 3000 blocks, one after the other, resting
 * 1.5 s (six polls) between them, as an engine moves on to new prompts.
 * The daemon takes back the slots of the blocks gone cold, so its totals
 * at shutdown hold all 9000 blocks and their 18000 accesses, none
 * dropped.  Before, slots were never freed while the session lived: the
 * second and third sets found about 1100 free slots, most of their
 * blocks were dropped (only blocks_dropped said so).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/ebpf-shm-client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define SETS 3
#define SEQS_PER_SET 3

static int client(void)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	int e = sc_open(SEQS_PER_SET, &c, &r);

	for (int set = 0; !e && set < SETS; set++) {
		e = sc_phase(c, r, 0x5000000000000000ull + set * 10000000ull,
			     SEQS_PER_SET, 2);
		if (!e && set + 1 < SETS)
			usleep(1500 * 1000); /* the blocks go cold */
	}
	kvmm_disconnect(c);
	return e;
}

int main(void)
{
	const char *args[] = { "--telemetry", "shm",	   "--page-size",
			       "4K",	      "--gpu-mem", "512M",
			       "--log-level", "info",	   NULL };
	static char log[1 << 16];
	struct kvmm_status_reply st;
	struct td_daemon d;
	char want[128];
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
	/* the session's end is polled (the stop polls once more, but the
	 * ticks are what counts a session's blocks while kvmmd runs) */
	t_ok(td_wait_sessions(&d, 1, 20000, &st)); /* the status one's */
	td_wait_tel_polled(&d, td_tel_ticks(&d), 20000);
	t_ok(td_stop_log(&d, log, sizeof(log)));
	snprintf(want, sizeof(want),
		 "telemetry totals (shm): %d blocks, %d accesses;",
		 SETS * SEQS_PER_SET * SC_BLOCKS_PER_SEQ,
		 2 * SETS * SEQS_PER_SET * SC_BLOCKS_PER_SEQ);
	if (!strstr(log, want) ||
	    !strstr(log, "dropped: 0 access records, 0 block stats")) {
		fprintf(stderr, "%s", log);
		t_fail("the daemon's totals are not \"%s\", none dropped",
		       want);
	}
	printf("ok: %s all of a long session's blocks counted\n", want);
	return 0;
}
