// SPDX-License-Identifier: MIT
/*
 * The mixed-workload soak (tests/daemon-soak.c): the admin loop.  Each
 * turn runs one kvmmctl command at random (status, tenants, sessions,
 * cache-drop, revoke, tenant-limit, quota, kill) or SIGKILLs a client
 * and starts a new one.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/daemon-soak/run.h"
#include "tests/daemon-soak/soak.h"
#include "tests/lib/daemon.h"

/* kvmmctl's stdout (static) and exit status. */
int ctl(struct run *r, char **out, const char *fmt, ...)
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
long long json_num(const char *js, const char *after, const char *key)
{
	char pat[64];
	const char *p = after ? strstr(js, after) : js;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	if (!p || !(p = strstr(p, pat)))
		return -1;
	return strtoll(p + strlen(pat), NULL, 10);
}

void status_json(struct run *r, char **js)
{
	if (ctl(r, js, "--json status"))
		run_fail(r, "kvmmctl --json status failed");
	if (!strstr(*js, "\"pages\":{") || json_num(*js, NULL, "total") <= 0)
		run_fail(r, "kvmmctl --json status: %.200s", *js);
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

void admin_op(struct run *r)
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
