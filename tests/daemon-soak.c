// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * The mixed-workload soak: one real kvmmd (host backend, 4 KiB pages, a
 * GPU pool, host tier and NVMe file all small, so blocks are evicted,
 * demoted and restored all the time) under everything at once, with its
 * invariants checked the whole time:
 *   - client processes of SOAK_UIDS uids (tests/daemon-soak/client.c)
 *     open, extend, truncate and close sequences, write KV named by its
 *     hash, publish it, open each other's prefixes (plain, with actions,
 *     early + SEQ_WAIT_READY), pin with TTLs, fork children that use the
 *     inherited connection or drop it, and check every byte they read:
 *     a cached block holds exactly its hash's bytes, a fresh page never
 *     another uid's, no call fails with an error the docs do not give;
 *   - the orchestrator SIGKILLs clients at random and starts new ones,
 *     runs kvmmctl status --json, tenants, sessions, cache-drop of a
 *     tier (of a uid), quota changes, kills sessions, and SIGTERMs and
 *     restarts kvmmd on the same NVMe file (its NVMe blocks come back);
 *   - kvmmd exits 0 at each stop and logs no ERR line, and once the load
 *     stops it comes back to idle: no page mapped, revoking or
 *     quarantined, none allocated but the cached blocks' (none after a
 *     cache-drop), one session, no more fds than after its start and
 *     its anonymous memory within a bound.
 * The first half of the time runs --cache-scope shared, the second uid.
 *
 *   build/tests/daemon-soak [--seconds N] [--seed S] [--clients N]
 *                           [--scope shared|uid|both] [--verbose]
 *
 * Without arguments (make check) 24 s with seed 1.  Needs root (the
 * clients setresuid()); skips otherwise.  Documentation/performance.md,
 * "The mixed-workload soak", says how to run it long.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/daemon-soak/soak.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define NVME_SIZE "2M"
#define RSS_SLACK_KIB (48 * 1024)

struct run {
	uint64_t rng;
	int seconds;
	unsigned int clients;
	bool verbose;
	char dir[64]; /* our own: the socket link the clients use */
	char nvme[256];
	struct td_daemon d;
	pid_t client[SOAK_MAX_CLIENTS];
	unsigned long long gen; /* clients started */
	uint64_t seed;
	int restarts, kills, admin_kills, drops, quotas, revokes, limits;
	long fds_start, rss_start; /* kvmmd's, at its start */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static long count_fds(pid_t pid)
{
	char path[64];
	struct dirent *de;
	long n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* kvmmd's fds but its pool pages' memfds, and how many those are, on
 * stderr: what a leak would be. */
static void print_fds(pid_t pid)
{
	char path[64], link[330], target[256];
	struct dirent *de;
	long pages = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "%s/%s", path, de->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = 0;
		if (strstr(target, "memfd:kvmm-page"))
			pages++;
		else
			fprintf(stderr, "kvmmd fd %s -> %s\n", de->d_name,
				target);
	}
	fprintf(stderr, "kvmmd fds of pages: %ld\n", pages);
	closedir(d);
}

static long rss_anon_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* The first failure wins; the clients' goes first, then ours. */
static void __attribute__((noreturn, format(printf, 2, 3)))
run_fail(struct run *r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_store(&soak->stop, 1);
	for (unsigned int i = 0; i < r->clients; i++)
		if (r->client[i] > 0)
			kill(r->client[i], SIGKILL);
	if (r->d.pid > 0)
		td_dump_log(&r->d);
	t_fail("seed %llu: %s", (unsigned long long)r->seed,
	       atomic_load(&soak->failed) ? soak->why : msg);
}

static void spawn(struct run *r, unsigned int slot)
{
	uint64_t seed = r->seed * 1000003ULL + (++r->gen) * 7919ULL + slot;
	pid_t p = fork();

	if (p < 0)
		run_fail(r, "fork: %s", strerror(errno));
	if (p == 0)
		soak_client(slot, seed); /* never returns */
	r->client[slot] = p;
}

/* A client that exited on its own failed (it reports why). */
static void reap(struct run *r)
{
	int st;

	for (unsigned int i = 0; i < r->clients; i++) {
		if (r->client[i] <= 0 ||
		    waitpid(r->client[i], &st, WNOHANG) != r->client[i])
			continue;
		r->client[i] = 0;
		run_fail(r, "client %u ended with status %#x", i, st);
	}
}

/* kvmmctl's stdout (static) and exit status. */
static int ctl(struct run *r, char **out, const char *fmt, ...)
{
	static char buf[1 << 17];
	char args[256];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	st = td_kvmmctl(r->d.sock, args, buf, sizeof(buf));
	if (out)
		*out = buf;
	if (r->verbose && st)
		printf("kvmmctl %s: %d\n", args, st);
	return st;
}

/* A number after "key": in a JSON text, from the first occurrence of
 * `after` on (NULL: the start); -1 when absent. */
static long long json_num(const char *js, const char *after, const char *key)
{
	char pat[64];
	const char *p = after ? strstr(js, after) : js;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	if (!p || !(p = strstr(p, pat)))
		return -1;
	return strtoll(p + strlen(pat), NULL, 10);
}

static void status_json(struct run *r, char **js)
{
	if (ctl(r, js, "--json status"))
		run_fail(r, "kvmmctl --json status failed");
	if (!strstr(*js, "\"pages\":{") || json_num(*js, NULL, "total") <= 0)
		run_fail(r, "kvmmctl --json status: %.200s", *js);
}

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

static void start_daemon(struct run *r, bool scope_uid)
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

static void stop_daemon(struct run *r)
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
 * SIGTERM and start again on the same NVMe file, the clients stopped
 * meanwhile (so no promotion takes a block out of NVMe under the count):
 * the blocks the NVMe tier held are there again after the start.
 */
static void restart(struct run *r, bool scope_uid)
{
	long long before, after, cap;
	char *js;

	signal_clients(r, SIGSTOP);
	sleep_ms(300); /* copies in flight land */
	status_json(r, &js);
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

/* A soak client's session id from kvmmctl --json sessions, or -1. */
static long pick_session(struct run *r)
{
	long ids[64];
	int n = 0;
	char *js, *p;

	if (ctl(r, &js, "--json sessions"))
		run_fail(r, "kvmmctl --json sessions failed");
	for (p = js; (p = strstr(p, "{\"session\":")) && n < 64; p++) {
		char *name = strstr(p, "\"name\":\"");

		if (name && !strncmp(name + 8, "soak-", 5))
			ids[n++] = strtol(p + 11, NULL, 10);
	}
	return n ? ids[soak_below(&r->rng, n)] : -1;
}

/*
 * kvmmctl revoke of an open sequence of a soak client, from a random
 * block: the client's slot is told first (soak->revokes), so that it
 * allows the blocks it loses.  The sequence may close meanwhile (exit 1).
 */
static void revoke_op(struct run *r)
{
	char *js, *p, *next, *name, *reg, *ids;
	long sid = pick_session(r), slot;
	unsigned int region, seq;
	char key[32];

	if (sid < 0)
		return;
	snprintf(key, sizeof(key), "{\"session\":%ld,", sid);
	if (ctl(r, &js, "--json sessions") || !(p = strstr(js, key)))
		return;
	next = strstr(p + 1, "{\"session\":");
	name = strstr(p, "\"name\":\"soak-");
	reg = strstr(p, "{\"region\":");
	ids = strstr(p, "\"open_ids\":[");
	if (!name || !reg || !ids || (next && ids > next) ||
	    !(ids[12] >= '0' && ids[12] <= '9'))
		return;
	slot = strtol(name + 13, NULL, 10);
	region = (unsigned)strtoul(reg + 10, NULL, 10);
	/* one of its open sequences, at random */
	seq = (unsigned)strtoul(ids + 12, &p, 10);
	for (uint32_t n = soak_below(&r->rng, 4); n && *p == ','; n--)
		seq = (unsigned)strtoul(p + 1, &p, 10);
	if (slot < 0 || slot >= (long)r->clients)
		return;
	atomic_fetch_add(&soak->revokes[slot], 1);
	if (!ctl(r, NULL, "revoke %ld %u %u %u", sid, region, seq,
		 soak_below(&r->rng, 2)))
		r->revokes++;
}

static void admin_op(struct run *r)
{
	static const char *const tiers[] = { "gpu", "host", "nvme", "gpu,host",
					     "host,nvme" };
	unsigned int uid = SOAK_UID0 + soak_below(&r->rng, SOAK_UIDS);
	uint32_t k = soak_below(&r->rng, 100);
	char *out;
	long sid;

	if (k < 30) {
		status_json(r, &out);
		if (json_num(out, "\"pages\":{", "mapped") >
		    json_num(out, "\"pages\":{", "total"))
			run_fail(r, "more pages mapped than the pool has");
	} else if (k < 40) {
		if (ctl(r, NULL, "--json tenants") || ctl(r, NULL, "tenants"))
			run_fail(r, "kvmmctl tenants failed");
	} else if (k < 50) {
		if (ctl(r, NULL, "sessions"))
			run_fail(r, "kvmmctl sessions failed");
	} else if (k < 58) {
		const char *t = tiers[soak_below(&r->rng, 5)];

		r->drops++;
		if (soak_below(&r->rng, 2) ?
			    ctl(r, NULL, "cache-drop --tier %s", t) :
			    ctl(r, NULL, "cache-drop --tier %s --uid %u", t,
				uid))
			run_fail(r, "kvmmctl cache-drop failed");
	} else if (k < 70) {
		revoke_op(r);
	} else if (k < 74) {
		r->limits++;
		if (soak_below(&r->rng, 2) ?
			    ctl(r, NULL, "tenant-limit %u gpu:%u,host:%u", uid,
				1 + soak_below(&r->rng, 16),
				1 + soak_below(&r->rng, 16)) :
			    ctl(r, NULL, "tenant-limit %u none", uid))
			run_fail(r, "kvmmctl tenant-limit failed");
	} else if (k < 80) {
		/* a quota of 48 to 303 pages, or none */
		r->quotas++;
		if (soak_below(&r->rng, 2) ?
			    ctl(r, NULL, "quota %u %uK", uid,
				4 * (48 + soak_below(&r->rng, 256))) :
			    ctl(r, NULL, "quota %u 0", uid))
			run_fail(r, "kvmmctl quota failed");
	} else if (k < 88) {
		sid = pick_session(r);
		/* the session may have ended since: "no session" exits 1 */
		if (sid > 0 && ctl(r, &out, "kill %ld", sid) == 0)
			r->admin_kills++;
	} else {
		unsigned int i = soak_below(&r->rng, r->clients);

		/* SIGKILL at a random moment, and a new process */
		if (r->client[i] > 0) {
			kill(r->client[i], SIGKILL);
			waitpid(r->client[i], NULL, 0);
			r->kills++;
		}
		spawn(r, i);
	}
}

/* What a process is doing (for a session that outlived the load). */
static void print_proc(long pid)
{
	char path[64], buf[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/wchan", pid);
	f = fopen(path, "r");
	if (f && fgets(buf, sizeof(buf), f))
		fprintf(stderr, "pid %ld wchan %s\n", pid, buf);
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	f = fopen(path, "r");
	while (f && fgets(buf, sizeof(buf), f))
		if (!strncmp(buf, "State:", 6) || !strncmp(buf, "PPid:", 5))
			fprintf(stderr, "pid %ld %s", pid, buf);
	if (f)
		fclose(f);
}

/*
 * Every process the clients forked is gone too: they are ours (we are
 * their subreaper, main()), also those whose parent a SIGKILL took.  One
 * still there after 30 s hangs.
 */
static void wait_orphans(struct run *r)
{
	long pid = 0;

	for (int t = 0; t < 3000; t++) {
		DIR *d = opendir("/proc");
		struct dirent *de;

		pid = 0;
		while (d && (de = readdir(d))) {
			char path[300], line[128];
			long p = strtol(de->d_name, NULL, 10), ppid = -1;
			FILE *f;

			if (p <= 0 || p == r->d.pid)
				continue; /* kvmmd is our child too */
			snprintf(path, sizeof(path), "/proc/%ld/status", p);
			f = fopen(path, "r");
			while (f && fgets(line, sizeof(line), f))
				if (sscanf(line, "PPid: %ld", &ppid) == 1)
					break;
			if (f)
				fclose(f);
			if (ppid == getpid() &&
			    waitpid((pid_t)p, NULL, WNOHANG) != (pid_t)p)
				pid = p;
		}
		if (d)
			closedir(d);
		if (!pid)
			return;
		sleep_ms(10);
	}
	print_proc(pid);
	{
		/* where it waits, if gdb is here (a diagnosis, not a check) */
		char cmd[160];

		snprintf(cmd, sizeof(cmd),
			 "command -v gdb >/dev/null && gdb -p %ld -batch -ex "
			 "'thread apply all bt' 2>&1 | grep '^#' >&2",
			 pid);
		if (system(cmd) < 0)
			perror("gdb");
	}
	run_fail(r,
		 "a forked client process still runs 30 s after the load "
		 "(pid %ld)",
		 pid);
}

/*
 * The load has stopped and every client is gone: nothing mapped,
 * revoking or quarantined, one session (ours), allocated pages only
 * the GPU tier's cached blocks', none after a drop of every tier; fds as
 * after the start, RssAnon within RSS_SLACK_KIB of it.
 */
static void check_idle(struct run *r)
{
	struct kvmm_status_reply st;
	long long gpu_blocks = -1;
	char path[256];
	long fds, rss;
	char *js;
	int err;

	/* cached GPU blocks keep their pages: td_wait_idle() would wait */
	for (int i = 0; i < 2000; i++) {
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
			 "not idle after the load: %llu sessions, pages "
			 "%llu allocated (%lld cached GPU blocks), %llu "
			 "mapped, %llu revoking, %llu quarantined",
			 (unsigned long long)st.sessions,
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
	for (int i = 0; i < 500; i++) {
		if (td_status(&r->d, &st))
			run_fail(r, "status failed");
		if (!st.pages_allocated)
			break;
		sleep_ms(10);
	}
	if (st.pages_allocated || st.pins)
		run_fail(r,
			 "after a drop of every tier: %llu pages allocated, "
			 "%llu pins",
			 (unsigned long long)st.pages_allocated,
			 (unsigned long long)st.pins);
	/* the last admin connection's close may still be on its way */
	for (int i = 0; i < 200; i++) {
		fds = count_fds(r->d.pid);
		if (fds <= r->fds_start + (long)st.pages_created)
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
			 "kvmmd holds %ld fds idle, %ld after its start and "
			 "%llu pool pages",
			 fds, r->fds_start,
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

static void epoch(struct run *r, bool scope_uid, int seconds)
{
	double t0 = now_s(), end = t0 + seconds;
	int restarts_due = seconds >= 9 ? 2 : 0, done = 0;

	soak->scope_uid = scope_uid;
	atomic_store(&soak->stop, 0);
	snprintf(r->nvme, sizeof(r->nvme), "%s", "");
	td_build_path("", r->nvme, sizeof(r->nvme));
	snprintf(r->nvme + strlen(r->nvme), sizeof(r->nvme) - strlen(r->nvme),
		 "soak-%d-%s.nvme", (int)getpid(),
		 scope_uid ? "uid" : "shared");
	unlink(r->nvme);
	start_daemon(r, scope_uid);
	r->fds_start = count_fds(r->d.pid);
	r->rss_start = rss_anon_kib(r->d.pid);
	for (unsigned int i = 0; i < r->clients; i++)
		spawn(r, i);
	while (now_s() < end) {
		sleep_ms(20 + soak_below(&r->rng, 120));
		reap(r);
		if (done < restarts_due &&
		    now_s() > t0 + seconds * (done + 1) / (restarts_due + 1)) {
			restart(r, scope_uid);
			done++;
			continue;
		}
		admin_op(r);
	}
	atomic_store(&soak->stop, 1);
	for (unsigned int i = 0; i < r->clients; i++) {
		int st = 0;
		bool gone = false;

		for (int t = 0; t < 3000 && !gone; t++) {
			pid_t w = waitpid(r->client[i], &st, WNOHANG);

			gone = w == r->client[i];
			if (!gone)
				sleep_ms(10);
		}
		if (!gone)
			run_fail(r, "client %u did not stop in 30 s", i);
		r->client[i] = 0;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			run_fail(r, "client %u ended with status %#x", i, st);
	}
	wait_orphans(r);
	check_idle(r);
	stop_daemon(r);
	unlink(r->nvme);
}

int main(int argc, char **argv)
{
	static const char *const names[SC_NR] = {
		"ops",	       "prefix opens", "early opens", "blocks verified",
		"fresh pages", "recomputes",   "published",   "pins",
		"forks",       "reconnects",   "revoked",     "ENOMEM",
		"EDQUOT",      "other allowed"
	};
	static const char usage[] =
		"usage: %s [--seconds N (>= 2)] [--seed S] [--clients N (1-%d)] "
		"[--scope shared|uid|both] [--verbose]\n";
	struct run r = { .seconds = 24, .clients = 6, .seed = 1 };
	const char *scope = "both";
	char link[140];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			r.seconds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			r.seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--clients") && i + 1 < argc)
			r.clients = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--scope") && i + 1 < argc)
			scope = argv[++i];
		else if (!strcmp(argv[i], "--verbose"))
			r.verbose = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf(usage, argv[0], SOAK_MAX_CLIENTS);
			return 0;
		} else {
			fprintf(stderr,
				"daemon-soak: unknown or incomplete "
				"argument '%s'\n",
				argv[i]);
			fprintf(stderr, usage, argv[0], SOAK_MAX_CLIENTS);
			return 2;
		}
	}
	if (r.clients < 1 || r.clients > SOAK_MAX_CLIENTS || r.seconds < 2 ||
	    (strcmp(scope, "both") && strcmp(scope, "shared") &&
	     strcmp(scope, "uid"))) {
		fprintf(stderr,
			"daemon-soak: bad value (--seconds %d, "
			"--clients %u, --scope %s)\n",
			r.seconds, r.clients, scope);
		fprintf(stderr, usage, argv[0], SOAK_MAX_CLIENTS);
		return 2;
	}
	if (geteuid() != 0)
		t_skip("the soak's clients run as other uids: needs root");
	r.rng = r.seed * 0x9e3779b97f4a7c15ULL | 1;
	soak = mmap(NULL, sizeof(*soak), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(soak != MAP_FAILED);
	td_tmp_path("kvmm-soak-XXXXXX", r.dir, sizeof(r.dir));
	t_assert(mkdtemp(r.dir));
	t_ok(chmod(r.dir, 0711));
	/* a client's forked children are ours when a SIGKILL orphans them */
	t_ok(prctl(PR_SET_CHILD_SUBREAPER, 1));
	/* a client stopped by SIGSTOP across a restart, or killed, takes
	 * nothing with it; ours see EPIPE as an error, not a signal */
	signal(SIGPIPE, SIG_IGN);
	printf("soak: seed %llu, %d s, %u clients of %u uids, scope %s\n",
	       (unsigned long long)r.seed, r.seconds, r.clients, SOAK_UIDS,
	       scope);
	fflush(stdout);
	if (strcmp(scope, "uid"))
		epoch(&r, false,
		      strcmp(scope, "both") ? r.seconds : r.seconds / 2);
	if (strcmp(scope, "shared"))
		epoch(&r, true,
		      strcmp(scope, "both") ? r.seconds : r.seconds / 2);
	snprintf(link, sizeof(link), "%s/kvmm.sock", r.dir);
	unlink(link);
	rmdir(r.dir);
	for (int c = 0; c < SC_NR; c++)
		printf("%s %llu%s", names[c],
		       (unsigned long long)atomic_load(&soak->count[c]),
		       c + 1 < SC_NR ? ", " : "\n");
	printf("restarts %d, clients killed %d, sessions killed %d, "
	       "revocations %d, cache drops %d, quota changes %d, tenant "
	       "limits %d\n",
	       r.restarts, r.kills, r.admin_kills, r.revokes, r.drops, r.quotas,
	       r.limits);
	if (!atomic_load(&soak->count[SC_BLOCKS_VERIFIED]) ||
	    !atomic_load(&soak->count[SC_FRESH_CHECKED]))
		t_fail("the soak checked no cached block or no fresh page");
	return T_PASS;
}
