// SPDX-License-Identifier: MIT
/*
 * kvmmctl sessions [--json]: every client session with its process,
 * pages, sequences and block pins (ADMIN_SESSIONS).  Daemons before ABI
 * 1.2 send no pin fields (pin_quota 0): "-" in the text, absent in JSON.
 * With more sessions than one reply holds (about 580), a line on stderr
 * says how many were not listed (ABI 1.12's `total`).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/kvmmctl/kvmmctl.h"

int cmd_sessions(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	size_t cap = KVMM_MSG_MAX, len = 0;
	struct kvmm_sessions_reply *rep;
	struct kvmm_conn *c;
	int err;

	if (argc > 1) {
		fprintf(stderr, "usage: kvmmctl sessions [--json]\n");
		return 2;
	}
	rep = calloc(1, cap);
	if (!rep || kvmmctl_connect(ctx, &c)) {
		free(rep);
		return 1;
	}
	err = kc_request(c, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, rep, cap, &len);
	kvmm_disconnect(c);
	/* a newer daemon's longer entries: the fields we know are their
	 * start (abi.md's rule), so each is read entry_size bytes apart */
	if (!err &&
	    (len < sizeof(*rep) || rep->entry_size < sizeof(rep->sessions[0]) ||
	     len < sizeof(*rep) + (uint64_t)rep->nr * rep->entry_size))
		err = -EPROTO;
	if (err) {
		fprintf(stderr, "kvmmctl: sessions: %s\n", kvmm_strerror(err));
		free(rep);
		return 1;
	}
	if (ctx->json)
		printf("[");
	else
		printf("%-8s %-8s %-6s %-16s %8s %8s %8s %13s %12s %s\n",
		       "SESSION", "PID", "UID", "NAME", "HELD", "OWNED", "SEQS",
		       "PINS", "PINNED", "FLAGS");
	for (uint32_t i = 0; i < rep->nr; i++) {
		struct kvmm_session_info *s =
			(void *)((char *)rep->sessions +
				 (size_t)i * rep->entry_size);

		s->name[sizeof(s->name) - 1] = '\0';
		if (ctx->json) {
			printf("%s{\"session\":%u,\"pid\":%u,\"uid\":%u,\"name\":",
			       i ? "," : "", s->session_id, s->pid, s->uid);
			kvmmctl_json_str(s->name);
			printf(",\"pages_held\":%llu,\"pages_owned\":%llu,"
			       "\"regions\":%llu,\"sequences\":%llu,",
			       (unsigned long long)s->pages_held,
			       (unsigned long long)s->pages_owned,
			       (unsigned long long)s->regions,
			       (unsigned long long)s->sequences);
			if (s->pin_quota)
				printf("\"pins\":%u,\"pin_quota\":%u,"
				       "\"pinned_bytes\":%llu,",
				       s->pins, s->pin_quota,
				       (unsigned long long)s->pinned_bytes);
			printf("\"flags\":%u}", s->flags);
		} else {
			char pins[24] = "-", bytes[24] = "-";

			if (s->pin_quota) {
				snprintf(pins, sizeof(pins), "%u/%u", s->pins,
					 s->pin_quota);
				snprintf(bytes, sizeof(bytes), "%llu",
					 (unsigned long long)s->pinned_bytes);
			}
			printf("%-8u %-8u %-6u %-16s %8llu %8llu %8llu %13s %12s %s%s%s\n",
			       s->session_id, s->pid, s->uid,
			       s->name[0] ? s->name : "-",
			       (unsigned long long)s->pages_held,
			       (unsigned long long)s->pages_owned,
			       (unsigned long long)s->sequences, pins, bytes,
			       s->flags & KVMM_SESSION_F_ADMIN ? "admin " : "",
			       s->flags & KVMM_SESSION_F_IN_STEP ? "step " : "",
			       s->flags & KVMM_SESSION_F_REVOKING ? "revoking" :
								    "");
		}
	}
	if (ctx->json)
		printf("]\n");
	/* ABI 1.12 counts what did not fit one reply */
	if (rep->total > rep->nr)
		fprintf(stderr,
			"kvmmctl: sessions: %u of %u sessions listed (one reply holds no more)\n",
			rep->nr, rep->total);
	free(rep);
	return 0;
}
