/* SPDX-License-Identifier: MIT */
/*
 * kvmmctl: one file per subcommand (cmd_NAME.c exposing cmd_NAME()), all
 * listed in the table in main.c.  Each gets the arguments after its name
 * and the global options.
 */
#ifndef KVMM_KVMMCTL_H
#define KVMM_KVMMCTL_H

#include <stdbool.h>
#include <stddef.h>

#include "kvmm/lib/client.h"

struct kvmmctl_ctx {
	const char *socket; /* --socket, or NULL for the default */
	bool json; /* --json anywhere on the line */
	const char *cmd; /* the command's name, for its error lines */
	/* how long each wait for kvmmd may take, in seconds: --timeout,
	 * or the command's default (main.c's table); 0 waits for ever */
	unsigned int timeout_s;
};

/* --timeout's default: every command whose answer kvmmd gives at once
 * (the commands' table in main.c names the longer ones), and its
 * largest value (poll()'s int milliseconds hold 24 days). */
#define KVMMCTL_TIMEOUT_S 30
#define KVMMCTL_TIMEOUT_MAX_S 86400

/* An admin connection to the daemon, each of its waits for kvmmd within
 * ctx->timeout_s.  On failure the one line that says why ("kvmmctl:
 * CMD: PATH: ...", or the timeout's) is printed: the caller adds none. */
int kvmmctl_connect(struct kvmmctl_ctx *ctx, struct kvmm_conn **out);
/*
 * Is err one after which the connection says nothing more (no answer
 * within --timeout, kvmmd gone, a reply that made no sense)?  A command
 * that takes some errors of a later request as "this daemon lacks it"
 * (TIER_STATS without the cache, ADMIN_TENANTS before 1.10) must stop on
 * these instead of printing what came before as the whole answer.
 */
bool kvmmctl_conn_lost(int err);
/*
 * The daemon's state over c: ADMIN_STATUS into *st (its result returned)
 * and then, when that worked and ts is not NULL, TIER_STATS into *ts with
 * its result in *ts_err (a daemon without the block cache refuses it);
 * *ts_err is the status error when there was one.  st->size and
 * ts->size then say how many bytes the daemon filled: less than the
 * struct's size from a daemon older than the reply's last fields
 * (KVMMCTL_ST_HAS(), KVMMCTL_TS_HAS()).
 */
int kvmmctl_fetch_status(struct kvmm_conn *c, struct kvmm_status_reply *st,
			 struct kvmm_tier_stats_reply *ts, int *ts_err);
/* Does the ADMIN_STATUS reply st (of kvmmctl_fetch_status()) have field
 * f?  st->size is what the daemon filled, as ts->size below. */
#define KVMMCTL_ST_HAS(st, f) \
	((st)->size >= offsetof(struct kvmm_status_reply, f) + sizeof((st)->f))
/* Does the TIER_STATS reply ts (of kvmmctl_fetch_status()) have field f? */
#define KVMMCTL_TS_HAS(ts, f) \
	((ts)->size >=        \
	 offsetof(struct kvmm_tier_stats_reply, f) + sizeof((ts)->f))
/*
 * status_sizes.c: with two or more block sizes cached (ts, a TIER_STATS
 * reply of ABI 1.21 or later, lists them), each size's TIER_STATS into
 * out[0..*nr) (KVMM_TIER_STATS_SIZES at most); *nr 0 with one size or
 * from an older daemon.  0 or the first request's -errno.
 */
struct kd_metrics_size;
int kvmmctl_fetch_sizes(struct kvmm_conn *c,
			const struct kvmm_tier_stats_reply *ts,
			struct kd_metrics_size *out, uint32_t *nr);
/*
 * status_cache.c: the figures status prints for the sums and for each
 * size alike.  For --json, the cache object's counts (`"publishes":N,`
 * to `"blocks_unshared":N,`, each key with its comma, those an older
 * daemon lacks left out) and `"tiers":{...}` of ts; for the text, "N
 * published, N prefix blocks hit of N asked" (no newline) and the `tier
 * gpu ...` lines of ts, each after indent.
 */
void kvmmctl_cache_counts_json(const struct kvmm_tier_stats_reply *ts);
void kvmmctl_tiers_json(const struct kvmm_tier_stats_reply *ts);
void kvmmctl_cache_counts_text(const struct kvmm_tier_stats_reply *ts);
void kvmmctl_tier_text(const char *indent,
		       const struct kvmm_tier_stats_reply *ts);
/* The NVMe tier's `tier nvme    WAITING`, `FAILED to open`, `OUT of
 * service for writes` ... lines of ts when it has any, each after
 * indent: the sums' in status, and each size's under it. */
void kvmmctl_nvme_text(const char *indent,
		       const struct kvmm_tier_stats_reply *ts);
/*
 * The NVMe blocks operators' drops kept (ABI 1.23) and the blocks a
 * start recovered (ABI 1.24): for --json `"nvme_restamped":N,` ... and
 * `"cold_blocks":N,` ... (each key with its comma; nothing from an
 * older daemon); for the text the sums' `             recovered: ...`
 * line (when a start recovered any) and `... kept NVMe blocks restamped
 * above a drop mark, ...` line (a WARNING one when some were not; once
 * a drop kept any), each after indent: the sums' and each size's.
 */
void kvmmctl_restamp_json(const struct kvmm_tier_stats_reply *ts);
void kvmmctl_cold_json(const struct kvmm_tier_stats_reply *ts);
void kvmmctl_cold_text(const char *indent,
		       const struct kvmm_tier_stats_reply *ts);
void kvmmctl_restamp_text(const char *indent,
			  const struct kvmm_tier_stats_reply *ts);
/* `,"sizes":[...]` and the text's block of each size (nothing for nr
 * 0), for status; with each size's queued demotions from st, the
 * ADMIN_STATUS reply, when it has them (ABI 1.22). */
void kvmmctl_sizes_json(const struct kvmm_status_reply *st,
			const struct kd_metrics_size *sz, uint32_t nr);
void kvmmctl_sizes_text(const struct kvmm_status_reply *st,
			const struct kd_metrics_size *sz, uint32_t nr);
/* ADMIN_TENANTS over c into *out (malloc'ed): every size's blocks
 * summed (block_pages 0) or one size's (ABI 1.22); -ENOTTY from a daemon
 * older than ABI 1.10, -EOPNOTSUPP for a size from one older than 1.22
 * (nothing asked), -ENOENT for a size not cached. */
int kvmmctl_fetch_tenants(struct kvmm_conn *c, uint32_t block_pages,
			  struct kvmm_tenants_reply **out);
/*
 * sessions_reply.c: ADMIN_SESSIONS, checked.  rep is malloc'ed; regions
 * the header of the region list that follows the entries (ABI 1.13),
 * NULL from an older daemon.
 */
struct kvmmctl_sessions {
	struct kvmm_sessions_reply *rep;
	const struct kvmm_sessions_regions *regions;
};
/* 0, or -errno (-EPROTO for a reply that runs short); nothing to free
 * on error. */
int kvmmctl_sessions_fetch(struct kvmm_conn *c, struct kvmmctl_sessions *out);
void kvmmctl_sessions_free(struct kvmmctl_sessions *s);
/* Entry i (< rep->nr), read entry_size bytes apart. */
struct kvmm_session_info *kvmmctl_session_at(const struct kvmmctl_sessions *s,
					     uint32_t i);
/* The entry of session id, NULL when it is not listed. */
struct kvmm_session_info *
kvmmctl_session_by_id(const struct kvmmctl_sessions *s, uint32_t id);
/* The region entries in order: prev NULL for the first (i counts them);
 * NULL after the last, or when the daemon sent none. */
const struct kvmm_region_info *
kvmmctl_region_next(const struct kvmmctl_sessions *s,
		    const struct kvmm_region_info *prev, uint32_t *i);
/* The ids of e's open sequences listed (e->nr_listed of them). */
const uint32_t *kvmmctl_region_seqs(const struct kvmmctl_sessions *s,
				    const struct kvmm_region_info *e);
/* Region id's entry, NULL when not listed. */
const struct kvmm_region_info *
kvmmctl_region_by_id(const struct kvmmctl_sessions *s, uint32_t id);
/* A simple admin request whose reply has no body. */
int kvmmctl_simple(struct kvmmctl_ctx *ctx, uint16_t cmd, const void *req,
		   size_t len);
/*
 * cmd's arguments (argv[1..argc-1]) against the min..max words it takes:
 * 0 when they fit; else names the word that does not (an unknown
 * "--option", the first one too many) or says some are missing, prints
 * "usage: kvmmctl USAGE" and returns 2, the exit status.
 */
int kvmmctl_args(const char *cmd, int argc, char **argv, int min, int max,
		 const char *usage);
/*
 * kvmm_strerror(err), and for -EPERM who may run admin commands (kvmmd's
 * rule: uid 0 or its own; a bare "Operation not permitted" did not say
 * why), for -ETIMEDOUT which socket gave no answer in how long ("no
 * answer from PATH in 30 s (kvmmd stopped or busy?; --timeout)").  A
 * static buffer: use it before the next call.
 */
const char *kvmmctl_strerror(struct kvmmctl_ctx *ctx, int err);
/* tiers.c: "gpu", "host", "nvme", indexed by the wire's tier numbers
 * (TIER_STATS's tiers[], the KVMM_CACHE_DROP_* bits). */
#define KVMMCTL_TIERS 3
extern const char *const kvmmctl_tier_names[KVMMCTL_TIERS];
/* A decimal u32 argument: -EINVAL if s is not a number, -ERANGE if past
 * 2^32 - 1; says nothing (for a caller whose own line names the option
 * and what it takes). */
int kvmmctl_u32(const char *s, uint32_t *out);
/* The same, with one line on error naming the command and the argument
 * (what: "UID", "SESSION_ID", ...): "kvmmctl: kill: SESSION_ID 'x' is
 * not a number" (it said "kvmmctl: 'x' is not a number", whichever of
 * revoke's four it was). */
int kvmmctl_parse_u32(const char *cmd, const char *what, const char *s,
		      uint32_t *out);
/* --block-pages' value for cmd: a decimal number of pages, 1 or more;
 * -EINVAL after a line naming cmd and the word. */
int kvmmctl_parse_block_pages(const char *cmd, const char *s, uint32_t *out);
/* Print s as a JSON string (quotes and escapes): valid UTF-8 as it is
 * but for the C1 controls, bidi controls and invisible characters
 * kvmmctl_text_str() escapes (as \uXXXX), a byte that is not UTF-8 (a
 * client's session name) as U+FFFD. */
void kvmmctl_json_str(const char *s);
/* s for a terminal, into buf (len at least 4 x strlen(s) + 1): control
 * bytes, bytes that are not UTF-8, and the UTF-8 of the characters a
 * terminal obeys or hides (main.c's hidden_char(): C1 and bidi controls,
 * zero-width and invisible characters, U+2028, U+2029) as \xNN a byte
 * (U+202E: \xe2\x80\xae); '\' as \\; buf. */
const char *kvmmctl_text_str(const char *s, char *buf, size_t len);
/* A JSON member whose value is a count: its name and the reply's field. */
struct kvmmctl_json_u64 {
	const char *name;
	uint64_t value;
};
/* Print `"name":value` for each of m[0..n), separated by commas, with
 * none before the first or after the last: the caller writes what joins
 * them to the members around them.  One table a block of members, so a
 * name stands next to its field, never a format string's count away. */
void kvmmctl_json_u64s(const struct kvmmctl_json_u64 *m, size_t n);
#define KVMMCTL_JSON_U64S(m) kvmmctl_json_u64s(m, sizeof(m) / sizeof((m)[0]))
/* tiers.c: {"gpu":N,"host":N,"nvme":N}, a count per tier in the wire's
 * order (a drop's dropped[] and kept[], a tenant's cached_blocks[]). */
void kvmmctl_json_tiers(const uint64_t v[KVMMCTL_TIERS]);

int cmd_status(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_metrics(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_sessions(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_tenants(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_kill(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_tenant_limit(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_cache_drop(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_quota(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_log_level(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_revoke(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_trace(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_calibrate(int argc, char **argv, struct kvmmctl_ctx *ctx);
int cmd_policy_state(int argc, char **argv, struct kvmmctl_ctx *ctx);

/*
 * calibrate_report.c: after `kvmmctl calibrate` wrote the profile at path,
 * print how the cost model of the kvmmd on ctx->socket compares with it
 * and the command that restarts that kvmmd on it.  0, or -errno with a
 * message printed.
 */
int calibrate_report(struct kvmmctl_ctx *ctx, const char *path);

#endif
