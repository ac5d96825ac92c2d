// SPDX-License-Identifier: MIT
/*
 * kvmmctl sessions [--json]: every client session with its process,
 * pages, sequences and block pins (ADMIN_SESSIONS).  Daemons before ABI
 * 1.2 send no pin fields (pin_quota 0): "-" in the text, absent in JSON.
 * With more sessions than one reply holds (about 580), a line on stderr
 * says how many were not listed (ABI 1.12's `total`).  Under each
 * session its regions, with their ids and those of their open sequences
 * (ABI 1.13; what `kvmmctl revoke` takes): a line per region in the
 * text, "region_list" in JSON; nothing from an older daemon.  Processes
 * whose sessions ended without BYE and that keep pages quarantined come
 * last, flagged "quarantined" (ABI 1.13).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/kvmmctl/kvmmctl.h"
#include "tools/kvmmctl/text_width.h"

/* The NAME column's display columns (a longer name pushes the line on). */
#define NAME_COLS 16

/* Ids as ranges: "0-3,7"; "..." when the daemon listed fewer than open. */
static void print_seq_ranges(const uint32_t *ids, uint32_t n, uint32_t open)
{
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i;

		while (j + 1 < n && ids[j + 1] == ids[j] + 1)
			j++;
		printf("%s%u", i ? "," : "", ids[i]);
		if (j > i)
			printf("-%u", ids[j]);
		i = j + 1;
	}
	if (open > n)
		printf(",... (%u more)", open - n);
}

static void print_regions(const struct kvmmctl_sessions *ss, uint32_t sid,
			  bool json)
{
	const struct kvmm_region_info *e = NULL;
	bool first = true;
	uint32_t i;

	if (!ss->regions)
		return;
	if (json)
		printf(",\"region_list\":[");
	while ((e = kvmmctl_region_next(ss, e, &i))) {
		const uint32_t *ids = kvmmctl_region_seqs(ss, e);

		if (e->session_id != sid)
			continue;
		if (json) {
			printf("%s{\"region\":%u,\"max_seqs\":%u,"
			       "\"max_blocks\":%u,\"open\":%u,"
			       "\"open_ids\":[",
			       first ? "" : ",", e->region_id, e->max_seqs,
			       e->max_blocks, e->nr_open);
			for (uint32_t k = 0; k < e->nr_listed; k++)
				printf("%s%u", k ? "," : "", ids[k]);
			printf("]}");
		} else {
			printf("  region %u: %u of %u sequences open",
			       e->region_id, e->nr_open, e->max_seqs);
			if (e->nr_open) {
				printf(" (");
				print_seq_ranges(ids, e->nr_listed, e->nr_open);
				printf(")");
			}
			printf(", %u blocks each\n", e->max_blocks);
		}
		first = false;
	}
	if (json)
		printf("]");
}

/*
 * The FLAGS column and the line's end: each flag a word after one blank,
 * nothing after the last (the words used to carry their blanks, so a
 * line ended in one, or two words ran together: "revokingquarantined").
 */
static void print_flags(uint32_t flags)
{
	static const struct {
		uint32_t bit;
		const char *word;
	} names[] = {
		{ KVMM_SESSION_F_ADMIN, "admin" },
		{ KVMM_SESSION_F_IN_STEP, "step" },
		{ KVMM_SESSION_F_REVOKING, "revoking" },
		{ KVMM_SESSION_F_QUARANTINED, "quarantined" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (flags & names[i].bit)
			printf(" %s", names[i].word);
	printf("\n");
}

int cmd_sessions(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	struct kvmmctl_sessions ss;
	struct kvmm_sessions_reply *rep;
	struct kvmm_conn *c;
	int err;

	if (kvmmctl_args("sessions", argc, argv, 0, 0, "sessions [--json]"))
		return 2;
	if (kvmmctl_connect(ctx, &c))
		return 1;
	err = kvmmctl_sessions_fetch(c, &ss);
	kvmm_disconnect(c);
	if (err) {
		fprintf(stderr, "kvmmctl: sessions: %s\n",
			kvmmctl_strerror(ctx, err));
		return 1;
	}
	rep = ss.rep;
	if (ctx->json)
		printf("[");
	else
		printf("%-8s %-8s %-6s %-*s %8s %8s %8s %13s %12s %s\n",
		       "SESSION", "PID", "UID", NAME_COLS, "NAME", "HELD",
		       "OWNED", "SEQS", "PINS", "PINNED", "FLAGS");
	for (uint32_t i = 0; i < rep->nr; i++) {
		struct kvmm_session_info *s = kvmmctl_session_at(&ss, i);
		const struct kvmmctl_json_u64 held[] = {
			{ "pages_held", s->pages_held },
			{ "pages_owned", s->pages_owned },
			{ "regions", s->regions },
			{ "sequences", s->sequences },
		};

		s->name[sizeof(s->name) - 1] = '\0';
		if (ctx->json) {
			printf("%s{\"session\":%u,\"pid\":%u,\"uid\":%u,\"name\":",
			       i ? "," : "", s->session_id, s->pid, s->uid);
			kvmmctl_json_str(s->name);
			printf(",");
			KVMMCTL_JSON_U64S(held);
			printf(",");
			if (s->pin_quota)
				printf("\"pins\":%u,\"pin_quota\":%u,"
				       "\"pinned_bytes\":%llu,",
				       s->pins, s->pin_quota,
				       (unsigned long long)s->pinned_bytes);
			printf("\"flags\":%u", s->flags);
			print_regions(&ss, s->session_id, true);
			printf("}");
		} else {
			char pins[24] = "-", bytes[24] = "-";
			char name[4 * sizeof(s->name) + 1];

			if (s->pin_quota) {
				snprintf(pins, sizeof(pins), "%u/%u", s->pins,
					 s->pin_quota);
				snprintf(bytes, sizeof(bytes), "%llu",
					 (unsigned long long)s->pinned_bytes);
			}
			printf("%-8u %-8u %-6u ", s->session_id, s->pid,
			       s->uid);
			/* by columns: "%-16s" padded a UTF-8 name by bytes,
			 * short, and moved the columns after it */
			kvmmctl_text_pad(
				stdout,
				s->name[0] ? kvmmctl_text_str(s->name, name,
							      sizeof(name)) :
					     "-",
				NAME_COLS);
			printf(" %8llu %8llu %8llu %13s %12s",
			       (unsigned long long)s->pages_held,
			       (unsigned long long)s->pages_owned,
			       (unsigned long long)s->sequences, pins, bytes);
			print_flags(s->flags);
			print_regions(&ss, s->session_id, false);
		}
	}
	if (ctx->json)
		printf("]\n");
	/* ABI 1.12 counts what did not fit one reply */
	if (rep->total > rep->nr)
		fprintf(stderr,
			"kvmmctl: sessions: %u of %u sessions listed (one reply holds no more)\n",
			rep->nr, rep->total);
	if (ss.regions && ss.regions->total > ss.regions->nr)
		fprintf(stderr,
			"kvmmctl: sessions: %u of %u regions listed (one reply holds no more)\n",
			ss.regions->nr, ss.regions->total);
	kvmmctl_sessions_free(&ss);
	return 0;
}
