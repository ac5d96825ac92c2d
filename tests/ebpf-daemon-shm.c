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
#include <poll.h>
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
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

struct ids {
	uint32_t session, region, seq;
};

/* 0 when the client saw a region exactly when `want_region`; steps until
 * told to stop, acknowledging the revocation the parent posts. */
static int client(bool want_region, int wr, int rd)
{
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct ids ids;
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "shm" };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;

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
	if (kvmm_get_stats(c, &ks))
		return 7;
	ids = (struct ids){ ks.session_id, r->id, s };
	if (write(wr, &ids, sizeof(ids)) != sizeof(ids))
		return 8;
	for (;;) {
		struct pollfd p = { .fd = rd, .events = POLLIN };

		if (poll(&p, 1, 5) > 0)
			break;
		if (kvmm_step_begin(c) || kvmm_step_end(c))
			return 9;
	}
	if (kvmm_get_stats(c, &ks) || ks.pages_revoked == 0)
		return 10;
	kvmm_disconnect(c);
	return 0;
}

static void run_client(struct td_daemon *d, bool want_region)
{
	struct kvmm_admin_revoke a = { .size = sizeof(a) };
	int to_parent[2], to_child[2], ws;
	struct kvmm_conn *admin;
	struct ids ids;
	pid_t pid;

	t_assert(pipe(to_parent) == 0 && pipe(to_child) == 0);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		_exit(client(want_region, to_parent[1], to_child[0]));
	t_assert_eq(read(to_parent[0], &ids, sizeof(ids)), sizeof(ids));
	t_ok(kc_connect_admin(d->sock, &admin));
	a.session_id = ids.session;
	a.region_id = ids.region;
	a.seq_id = ids.seq;
	a.first_block = 1;
	t_ok(kc_request(admin, KVMM_CMD_ADMIN_REVOKE, &a, sizeof(a), NULL, 0,
			NULL));
	kvmm_disconnect(admin);
	usleep(200000); /* the client steps every 5 ms and acknowledges */
	t_assert_eq(write(to_child[1], "x", 1), 1);
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	if (WEXITSTATUS(ws)) {
		td_dump_log(d);
		t_fail("client exited with %d", WEXITSTATUS(ws));
	}
}

/* Stop the daemon ourselves so its log can be read before cleanup. */
static char *stop_and_read_log(struct td_daemon *d)
{
	static char buf[1 << 16];
	FILE *f;
	size_t n;
	int st;

	kill(d->pid, SIGTERM);
	t_assert(waitpid(d->pid, &st, 0) == d->pid);
	t_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	d->pid = 0;
	f = fopen(d->log, "r");
	t_assert(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	td_stop(d);
	return buf;
}

int main(void)
{
	const char *shm[] = { "--telemetry", "shm", NULL };
	const char *off[] = { "--telemetry", "off", NULL };
	struct td_daemon d;
	char *log;

	t_ok(td_start(&d, shm));
	run_client(&d, true);
	log = stop_and_read_log(&d);
	if (!strstr(log, "telemetry: shm") ||
	    !strstr(log, "telemetry totals (shm): 0 blocks, 0 accesses; "
			 "access 0 attention 0 prefill 0 extend 3 restore 0 "
			 "recompute 0 revoke 1 migrate 0 evict 0")) {
		fprintf(stderr, "%s", log);
		t_fail("the daemon's totals do not show 3 extends, 1 revoke");
	}

	t_ok(td_start(&d, off));
	run_client(&d, false);
	log = stop_and_read_log(&d);
	t_assert(!strstr(log, "telemetry totals"));
	printf("ok: shm fallback through kvmmd and libkvmm\n");
	return 0;
}
