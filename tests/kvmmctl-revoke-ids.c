// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * kvmmctl shows the ids `kvmmctl revoke` takes and says which one was
 * wrong: `sessions` lists each session's regions with their open
 * sequences (text and JSON; only counts before), and revoke and kill
 * name the argument kvmmd did not take (they printed a bare "No such
 * file or directory" or "Invalid argument", whichever id it was).
 * Exit status 1 for each refusal.
 */
#include <stdarg.h>

#include "tests/cache-common.h"
#include "tests/lib/small_region.h"

static char out[65536];

/* kvmmctl ARGS exits with status st and its output (stdout and stderr)
 * holds want. */
static void expect(const char *sock, int st, const char *want, const char *fmt,
		   ...)
{
	char args[256];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args) - 8, fmt, ap);
	va_end(ap);
	strcat(args, " 2>&1");
	rc = td_kvmmctl(sock, args, out, sizeof(out));
	if (rc != st)
		t_fail("kvmmctl %s: exit %d, expected %d: %s", args, rc, st,
		       out);
	if (!strstr(out, want))
		t_fail("kvmmctl %s: no '%s' in: %s", args, want, out);
}

int main(void)
{
	struct kvmm_region *r1, *r2, *r3;
	struct kvmm_conn *c, *other;
	uint32_t sid, oid, s0, s1, s2;
	struct td_daemon d;
	char want[256];

	t_ok(td_start(&d, (const char *[]){ NULL }));
	c = cc_connect_lib(d.sock, "engine");
	other = cc_connect_lib(d.sock, "other");
	sid = c->hello.session_id;
	oid = other->hello.session_id;
	t_ok(kvmm_region_create(c, &tr_small_region, &r1));
	t_ok(kvmm_region_create(c, &tr_small_region, &r2));
	t_ok(kvmm_region_create(other, &tr_small_region, &r3));
	t_ok(kvmm_seq_open(r1, &s0));
	t_ok(kvmm_seq_open(r1, &s1));
	t_ok(kvmm_seq_open(r1, &s2));
	t_ok(kvmm_seq_close(r1, s1));

	/* in the order they were made */
	snprintf(want, sizeof(want),
		 "\n  region %u: 2 of 4 sequences open (0,2), 8 blocks each\n"
		 "  region %u: 0 of 4 sequences open, 8 blocks each\n",
		 r1->id, r2->id);
	expect(d.sock, 0, want, "sessions");
	snprintf(want, sizeof(want), "\n  region %u: 0 of 4 sequences open",
		 r3->id);
	t_assert(strstr(out, want) != NULL);
	snprintf(want, sizeof(want),
		 "\"region_list\":[{\"region\":%u,\"max_seqs\":4,"
		 "\"max_blocks\":8,\"open\":2,\"open_ids\":[0,2]},"
		 "{\"region\":%u,\"max_seqs\":4,\"max_blocks\":8,\"open\":0,"
		 "\"open_ids\":[]}]}",
		 r1->id, r2->id);
	expect(d.sock, 0, want, "sessions --json");

	expect(d.sock, 1, "kvmmctl: revoke: no session 99999 ",
	       "revoke 99999 %u 0", r1->id);
	snprintf(
		want, sizeof(want),
		"kvmmctl: revoke: session %u has no region 77777; its regions: %u, %u\n",
		sid, r1->id, r2->id);
	expect(d.sock, 1, want, "revoke %u 77777 0", sid);
	snprintf(
		want, sizeof(want),
		"kvmmctl: revoke: session %u has no region %u (it is session %u's)",
		sid, r3->id, oid);
	expect(d.sock, 1, want, "revoke %u %u 0", sid, r3->id);
	snprintf(want, sizeof(want),
		 "kvmmctl: revoke: region %u has sequences 0 to 3, not 7\n",
		 r1->id);
	expect(d.sock, 1, want, "revoke %u %u 7", sid, r1->id);
	snprintf(want, sizeof(want),
		 "kvmmctl: revoke: sequence 1 of region %u is not open",
		 r1->id);
	expect(d.sock, 1, want, "revoke %u %u 1", sid, r1->id);
	snprintf(
		want, sizeof(want),
		"kvmmctl: revoke: FIRST_BLOCK 8 is past the end of region %u's sequences (8 blocks: 0 to 7)\n",
		r1->id);
	expect(d.sock, 1, want, "revoke %u %u 0 8", sid, r1->id);
	snprintf(
		want, sizeof(want),
		"kvmmctl: revoke: sequence 0 of region %u has no pages from block 0 on\n",
		r1->id);
	expect(d.sock, 1, want, "revoke %u %u 0", sid, r1->id);
	expect(d.sock, 1, "kvmmctl: kill: no session 99999 ", "kill 99999");

	kvmm_disconnect(other);
	kvmm_disconnect(c);
	t_ok(td_stop(&d));
	printf("ok\n");
	return 0;
}
