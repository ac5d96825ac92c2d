// SPDX-License-Identifier: MIT
/*
 * The mixed-workload soak (tests/daemon-soak.c): kvmmd's start, stop
 * and restart on the same NVMe file, its log, and the idle state it
 * must come back to once the load stops.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/daemon-soak/run.h"
#include "tests/daemon-soak/soak.h"
#include "tests/lib/daemon.h"
#include "tests/lib/wait.h"

/* How long check_idle() waits for each idle fact: those that come end
 * the wait at once, and a loaded machine may take seconds to them. */
#define IDLE_WAIT_MS 20000

/*
 * kvmmd's log has no ERR line that the chaos does not explain.  Nothing
 * the soak does (clients killed, sessions killed, restarts) is an error
 * of kvmmd's: every ERR is a finding.
 */
static void check_log(struct run *r)
{
	static char log[1 << 22];
	int n = td_read_log(&r->d, log, sizeof(log));
	const char *p = log;

	if (n < 0)
		run_fail(r, "kvmmd log: %s", strerror(-n));
	while ((p = strstr(p, " ERR "))) {
		const char *bol = p, *eol = strchr(p, '\n');

		while (bol > log && bol[-1] != '\n')
			bol--;
		run_fail(r, "kvmmd logged: %.*s", (int)(eol ? eol - bol : 200),
			 bol);
	}
}

void start_daemon(struct run *r, bool scope_uid)
{
	char link[100], tmp[112];
	const char *args[] = { "--page-size",
			       "4K",
			       "--gpu-mem",
			       "1M",
			       "--host-mem",
			       "512K",
			       "--nvme-path",
			       r->nvme,
			       "--nvme-size",
			       NVME_SIZE,
			       "--nvme-save-on-stop",
			       "2000",
			       "--cache-block-pages",
			       "4",
			       "--cache-scope",
			       scope_uid ? "uid" : "shared",
			       "--pin-quota",
			       "8",
			       "--socket-mode",
			       "0666",
			       "--log-level",
			       "info",
			       NULL };
	int err = td_start(&r->d, args);

	if (err)
		run_fail(r, "kvmmd did not start: %s", strerror(-err));
	/* the other uids reach the socket through our link to it */
	if (chmod(r->d.dir, 0711))
		run_fail(r, "chmod: %s", strerror(errno));
	snprintf(link, sizeof(link), "%s/kvmm.sock", r->dir);
	snprintf(tmp, sizeof(tmp), "%s/kvmm.sock.new", r->dir);
	unlink(tmp);
	if (symlink(r->d.sock, tmp) || rename(tmp, link))
		run_fail(r, "socket link: %s", strerror(errno));
	snprintf(soak->sock, sizeof(soak->sock), "%s", link);
}

void stop_daemon(struct run *r)
{
	int st;

	check_log(r);
	st = td_stop(&r->d);
	if (st)
		run_fail(r, "kvmmd exit status %d", st);
}

static void signal_clients(struct run *r, int sig)
{
	for (unsigned int i = 0; i < r->clients; i++)
		if (r->client[i] > 0)
			kill(r->client[i], sig);
}

/*
 * kvmmctl --json status once no copy is in flight: those running land
 * within a second even on a loaded machine, and with the clients stopped
 * nothing starts new ones, so 20 s without fails.  Not "no prefix open
 * pending" (cc_settled_stats()): an open whose restores wait for room
 * the stopped clients hold stays pending (3 for 20 s, no copy in flight,
 * seed 1), and starts no copy until they run again.
 */
static void settled_json(struct run *r, char **js)
{
	unsigned long long end = t_now_ms() + 20000;
	long long moving;

	for (;;) {
		status_json(r, js);
		moving = json_num(*js, NULL, "migrations_in_flight");
		if (!moving)
			return;
		if (t_now_ms() > end)
			run_fail(r,
				 "the clients stopped, kvmmd still has %lld "
				 "migrations in flight after 20 s",
				 moving);
		sleep_ms(10);
	}
}

/*
 * SIGTERM and start again on the same NVMe file, the clients stopped
 * meanwhile (so no promotion takes a block out of NVMe under the count):
 * the blocks the NVMe tier held are there again after the start.
 */
void restart(struct run *r, bool scope_uid)
{
	long long before, after, cap;
	char *js;

	signal_clients(r, SIGSTOP);
	settled_json(r, &js);
	before = json_num(js, "\"nvme\":{", "used_blocks");
	stop_daemon(r);
	start_daemon(r, scope_uid);
	status_json(r, &js);
	after = json_num(js, "\"nvme\":{", "used_blocks");
	cap = json_num(js, "\"nvme\":{", "capacity_blocks");
	if (before < 0 || after < before || cap <= 0)
		run_fail(r,
			 "restart: the NVMe tier held %lld blocks, %lld "
			 "after the start (capacity %lld)",
			 before, after, cap);
	if (r->verbose)
		printf("restart: NVMe blocks %lld before, %lld after (of %lld)\n",
		       before, after, cap);
	r->restarts++;
	r->fds_start = count_fds(r->d.pid);
	r->rss_start = rss_anon_kib(r->d.pid);
	signal_clients(r, SIGCONT);
}

/*
 * The load has stopped and every client is gone: nothing mapped,
 * revoking or quarantined, one session (ours), allocated pages only
 * the GPU tier's cached blocks', none after a drop of every tier; fds as
 * after the start, RssAnon within RSS_SLACK_KIB of it.
 */
void check_idle(struct run *r)
{
	struct kvmm_status_reply st;
	long long gpu_blocks = -1;
	unsigned long long end;
	char path[256];
	long fds, rss;
	char *js;
	int err;

	/* cached GPU blocks keep their pages: td_wait_idle() would wait.
	 * Deadlines of time (IDLE_WAIT_MS), not counts of tries: a status
	 * on a loaded machine takes longer than the 10 ms between them */
	end = t_now_ms() + IDLE_WAIT_MS;
	for (;;) {
		err = td_status(&r->d, &st);
		if (err)
			run_fail(r, "status: %s", strerror(-err));
		status_json(r, &js);
		gpu_blocks = json_num(js, "\"gpu\":{", "used_blocks");
		if (st.sessions == 1 && !st.pages_mapped &&
		    !st.pages_revoking && !st.pages_quarantined &&
		    st.pages_allocated == (uint64_t)gpu_blocks * SOAK_PPB &&
		    !json_num(js, NULL, "migrations_in_flight"))
			break;
		if (t_now_ms() > end)
			break;
		sleep_ms(10);
	}
	if (st.sessions != 1 || st.pages_mapped || st.pages_revoking ||
	    st.pages_quarantined ||
	    st.pages_allocated != (uint64_t)gpu_blocks * SOAK_PPB) {
		char *out, *p;

		if (!ctl(r, &out, "--json sessions")) {
			fprintf(stderr, "%s\n", out);
			for (p = out; (p = strstr(p, "\"pid\":")); p++)
				print_proc(strtol(p + 6, NULL, 10));
		}
		run_fail(r,
			 "not idle %d s after the load: %llu sessions, pages "
			 "%llu allocated (%lld cached GPU blocks), %llu "
			 "mapped, %llu revoking, %llu quarantined",
			 IDLE_WAIT_MS / 1000, (unsigned long long)st.sessions,
			 (unsigned long long)st.pages_allocated, gpu_blocks,
			 (unsigned long long)st.pages_mapped,
			 (unsigned long long)st.pages_revoking,
			 (unsigned long long)st.pages_quarantined);
	}
	/* pages go from uid to uid zeroed (shared scope) or renewed (uid
	 * scope: the fd another uid got is not the new owner's page), and
	 * none of that failed (lifecycle.md) */
	if (st.page_scrub_failures || st.page_renew_failures ||
	    (soak->scope_uid ? !st.pages_renewed :
			       st.pages_renewed || !st.pages_scrubbed))
		run_fail(r,
			 "pages scrubbed %llu (%llu failed), renewed %llu "
			 "(%llu failed) under --cache-scope %s",
			 (unsigned long long)st.pages_scrubbed,
			 (unsigned long long)st.page_scrub_failures,
			 (unsigned long long)st.pages_renewed,
			 (unsigned long long)st.page_renew_failures,
			 soak->scope_uid ? "uid" : "shared");
	if (ctl(r, NULL, "cache-drop"))
		run_fail(r, "kvmmctl cache-drop failed");
	end = t_now_ms() + IDLE_WAIT_MS;
	for (;;) {
		if (td_status(&r->d, &st))
			run_fail(r, "status failed");
		if (!st.pages_allocated || t_now_ms() > end)
			break;
		sleep_ms(10);
	}
	if (st.pages_allocated || st.pins)
		run_fail(r,
			 "%d s after a drop of every tier: %llu pages "
			 "allocated, %llu pins",
			 IDLE_WAIT_MS / 1000,
			 (unsigned long long)st.pages_allocated,
			 (unsigned long long)st.pins);
	/* the last admin connection's close may still be on its way */
	end = t_now_ms() + IDLE_WAIT_MS;
	for (;;) {
		fds = count_fds(r->d.pid);
		if (fds <= r->fds_start + (long)st.pages_created ||
		    t_now_ms() > end)
			break;
		sleep_ms(10);
	}
	rss = rss_anon_kib(r->d.pid);
	if (r->verbose)
		printf("idle: fds %ld (%ld after the start), RssAnon %ld KiB "
		       "(%ld), %llu pages created, %llu scrubbed, %llu "
		       "renewed\n",
		       fds, r->fds_start, rss, r->rss_start,
		       (unsigned long long)st.pages_created,
		       (unsigned long long)st.pages_scrubbed,
		       (unsigned long long)st.pages_renewed);
	/* each page the pool created keeps its fd (vmm.md) */
	if (fds > r->fds_start + (long)st.pages_created)
		print_fds(r->d.pid);
	if (fds > r->fds_start + (long)st.pages_created)
		run_fail(r,
			 "kvmmd holds %ld fds idle %d s after the drop, %ld "
			 "after its start and %llu pool pages",
			 fds, IDLE_WAIT_MS / 1000, r->fds_start,
			 (unsigned long long)st.pages_created);
	/* ASan keeps up to 256 MiB of freed memory in its quarantine (a
	 * leak is LeakSanitizer's at kvmmd's exit: stop_daemon()) */
	if (rss >
	    r->rss_start + RSS_SLACK_KIB +
		    (strstr(td_build_path("", path, sizeof(path)), "asan") ?
			     300 * 1024 :
			     0))
		run_fail(r, "kvmmd RssAnon %ld KiB idle, %ld after its start",
			 rss, r->rss_start);
}
