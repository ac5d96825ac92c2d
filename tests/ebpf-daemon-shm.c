// SPDX-License-Identifier: MIT
/*
 * The shared-memory fallback through a real daemon and client process:
 * kvmmd --telemetry shm publishes a telemetry region after each session's
 * rings, libkvmm finds it and writes its extend counters there, the
 * daemon counts its own events (a revocation acknowledged) in a region of
 * its own, and the daemon's totals (logged at shutdown, after the session
 * ended) hold exactly the client's three extends and the one revocation.
 * With --telemetry off there is no region.  Needs neither root nor BPF.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/revoke_client.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

/* 0 when the client saw a region exactly when `want_region`; steps until
 * told to stop, acknowledging the revocation the parent posts. */
static int client(void *arg, int wr, int rd)
{
	bool want_region = *(const bool *)arg;
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "shm" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;
	int e;

	if (kvmm_connect(&co, &c))
		return 1;
	if (want_region != (c->tel != NULL))
		return 2;
	if (c->tel && !kvmm_tel_shm_enabled(c->tel))
		return 3;
	if (kvmm_region_create(c, &tr_small_region, &r) || kvmm_seq_open(r, &s))
		return 4;
	for (int i = 1; i <= 3; i++)
		if (kvmm_seq_extend(r, s, i * TR_TPB))
			return 5;
	if (c->tel && c->tel->counters.events[KVMM_TEL_EXTEND] != 3)
		return 6;
	e = rc_client_steps(c, r, s, wr, rd);
	return e ? 6 + e : 0;
}

/* Stop the daemon ourselves so its log can be read before cleanup. */
static char *stop_and_read_log(struct td_daemon *d)
{
	static char buf[1 << 16];
	int st;

	kill(d->pid, SIGTERM);
	t_assert(waitpid(d->pid, &st, 0) == d->pid);
	t_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	d->pid = 0;
	t_assert(td_read_log(d, buf, sizeof(buf)) >= 0);
	td_stop(d);
	return buf;
}

int main(void)
{
	const char *shm[] = { "--telemetry", "shm", NULL };
	const char *off[] = { "--telemetry", "off", NULL };
	bool want_region = true;
	struct td_daemon d;
	char *log;

	t_ok(td_start(&d, shm));
	rc_run_client(&d, client, &want_region);
	log = stop_and_read_log(&d);
	if (!strstr(log, "telemetry: shm") ||
	    !strstr(log, "telemetry totals (shm): 0 blocks, 0 accesses; "
			 "access 0 attention 0 prefill 0 extend 3 restore 0 "
			 "recompute 0 revoke 1 migrate 0 evict 0")) {
		fprintf(stderr, "%s", log);
		t_fail("the daemon's totals do not show 3 extends, 1 revoke");
	}

	t_ok(td_start(&d, off));
	want_region = false;
	rc_run_client(&d, client, &want_region);
	log = stop_and_read_log(&d);
	t_assert(!strstr(log, "telemetry totals"));
	printf("ok: shm fallback through kvmmd and libkvmm\n");
	return 0;
}
