// SPDX-License-Identifier: MIT
/*
 * kvmmctl: the operator's tool for kvmmd.
 *
 *   kvmmctl [--socket PATH] [--timeout SECONDS] [--json] COMMAND [ARGS...]
 *   kvmmctl --version | --help | help
 *
 * Commands live in a table; each is one cmd_NAME.c file.  Exit status 0 on
 * success, 1 when the daemon refused or could not be reached (no answer
 * within --timeout included), 2 on usage errors.
 */
#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tools/kvmmctl/kvmmctl.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv, struct kvmmctl_ctx *ctx);
	const char *help;
	/* options after the name are the command's own (only --socket and
	 * --timeout are still kvmmctl's): a wrapped program's --help
	 * reaches it */
	bool pass_options;
	/* --help or -h after the name is the command's (its own usage,
	 * with its options), not kvmmctl's list */
	bool own_help;
	/* --timeout's default, when kvmmd may take longer than
	 * KVMMCTL_TIMEOUT_S to answer by design (0: that default) */
	unsigned int timeout_s;
};

/*
 * cache-drop's reply waits for the drop's NVMe writes (each dropped
 * block's header zeroed, each kept one's written again, the drop mark:
 * writes and an fdatasync on a migration worker, behind the jobs queued
 * before them): about 1 ms for 15 blocks here (performance.md), a few
 * 4 KiB writes a block, so minutes for a tier of millions of blocks on
 * a busy disk.  Every other command is answered at once by kvmmd's loop
 * (revoke too: it posts and answers; its wait for the client is
 * kvmmctl's own loop of requests, cmd_revoke.c).
 */
#define KVMMCTL_DROP_TIMEOUT_S 600

static const struct command commands[] = {
	{ "status", cmd_status, "daemon status: backend, pages, sessions" },
	{ "metrics", cmd_metrics,
	  "status in the Prometheus text format (textfile collector)" },
	{ "sessions", cmd_sessions, "list client sessions" },
	{ "tenants", cmd_tenants,
	  "[--block-pages N]: per uid (gid): blocks cached, prefix\n"
	  "               hits, publishes (of one block size with N)" },
	{ "kill", cmd_kill, "kill SESSION_ID: cut a session off" },
	{ "tenant-limit", cmd_tenant_limit,
	  "tenant-limit ID TIER:N[,TIER:N...]|none: most cached\n"
	  "               blocks a tenant may hold per tier named\n"
	  "               (TIER gpu, host or nvme, any order)" },
	{ "cache-drop", cmd_cache_drop,
	  "[--tier gpu|host|nvme[,...]] [--uid ID] [--block-pages N]:\n"
	  "               drop cached blocks (those in use stay), of the\n"
	  "               tiers, the tenant and the block size named (all\n"
	  "               without)",
	  false, false, KVMMCTL_DROP_TIMEOUT_S },
	{ "quota", cmd_quota,
	  "quota UID [SIZE]: set a uid's memory quota, or show it" },
	{ "log-level", cmd_log_level, "log-level err|warn|info|debug" },
	{ "revoke", cmd_revoke,
	  "revoke SESSION REGION SEQ [FIRST_BLOCK]: take pages back" },
	{ "trace", cmd_trace,
	  "[--once] [--interval MS] [--count N] [--top N]\n"
	  "               [--by-uid] [--pin-root DIR]: live telemetry: tier\n"
	  "               hit rates, top blocks, latencies (trace --help)",
	  false, true },
	{ "policy-state", cmd_policy_state,
	  "FILE: what a --policy-state file says the policy learned\n"
	  "               (no daemon needed)" },
	{ "calibrate", cmd_calibrate,
	  "[kvmm-calibrate options]: measure a cost-model profile on this\n"
	  "               GPU; with --socket, compare it with kvmmd's model",
	  true },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvmmctl [--socket PATH] [--timeout SECONDS] [--json] COMMAND [ARGS]\n"
		"       kvmmctl --version | --help | help\n"
		"  --timeout SECONDS  wait at most this long for each answer of\n"
		"               kvmmd, the connect's too (0: for ever; default %d,\n"
		"               cache-drop %d: it waits for NVMe writes); past it\n"
		"               the command fails, exit 1\n"
		"commands:\n",
		KVMMCTL_TIMEOUT_S, KVMMCTL_DROP_TIMEOUT_S);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "  %-12s %s\n", "help", "this list");
}

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(name, commands[i].name))
			return &commands[i];
	return NULL;
}

/*
 * Why no connection to path was made, for connect_error(): a cause the
 * operator can act on, where connect(2)'s errno alone misled ("Connection
 * refused" of a directory) or left the question open (is kvmmd running?).
 */
static const char *connect_hint(const char *path, int err, char *buf,
				size_t len)
{
	struct stat st;

	/* connect(2) says "Connection refused" of a directory or a file */
	if (!stat(path, &st) && !S_ISSOCK(st.st_mode)) {
		snprintf(buf, len, "not a socket (%s): give kvmmd's --socket",
			 S_ISDIR(st.st_mode)  ? "a directory" :
			 S_ISREG(st.st_mode)  ? "a regular file" :
			 S_ISFIFO(st.st_mode) ? "a FIFO" :
						"a device");
		return buf;
	}
	if (kc_hello_refusal(err)) {
		snprintf(buf, len, "kvmmd refused the connection: %s",
			 kc_hello_refusal(err));
		return buf;
	}
	switch (-err) {
	case ENOENT:
		return "no such socket (is kvmmd running? with another --socket?)";
	case ECONNREFUSED:
		/* kvmmd removes its socket when it stops: a killed one
		 * leaves it with nobody listening */
		return "connection refused (nobody listens on it: is kvmmd running? a killed one leaves its socket behind)";
	case EPROTOTYPE:
		return "not kvmmd's socket (a stream or datagram socket; kvmmd's is a seqpacket one): give kvmmd's --socket";
	case EPROTO:
	case ECONNRESET:
		/* whoever listens took the connection and did not answer
		 * the HELLO as kvmmd does */
		snprintf(buf, len, "%s at the HELLO (is it kvmmd's socket?)",
			 kvmm_strerror(err));
		return buf;
	default:
		return NULL;
	}
}

/*
 * Every command's one line for a connection that failed: the command, then
 * what is wrong with the socket (kvmmctl: status: PATH: ...), or the
 * timeout's line; the callers print nothing more (metrics added "is kvmmd
 * running?" after each, a second line and a wrong guess after a timeout
 * of a kvmmd that was running).
 */
static void connect_error(struct kvmmctl_ctx *ctx, const char *path, int err)
{
	char buf[256];
	const char *hint;

	/* a full backlog, or a HELLO not answered: the line names the
	 * socket already */
	if (err == -ETIMEDOUT) {
		fprintf(stderr, "kvmmctl: %s: %s\n", ctx->cmd,
			kvmmctl_strerror(ctx, err));
		return;
	}
	hint = connect_hint(path, err, buf, sizeof(buf));
	fprintf(stderr, "kvmmctl: %s: %s: %s\n", ctx->cmd, path,
		hint ? hint : kvmmctl_strerror(ctx, err));
}

int kvmmctl_connect(struct kvmmctl_ctx *ctx, struct kvmm_conn **out)
{
	const char *path = ctx->socket ? ctx->socket : kc_default_socket();
	int err = kc_connect_admin_timed(path, ctx->timeout_s * 1000u, out);

	if (err)
		connect_error(ctx, path, err);
	return err;
}

int kvmmctl_fetch_status(struct kvmm_conn *c, struct kvmm_status_reply *st,
			 struct kvmm_tier_stats_reply *ts, int *ts_err)
{
	size_t len = 0;
	int err = kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, st, sizeof(*st),
			     &len);

	/* as TIER_STATS's below: what an older daemon sent */
	if (!err && st->size > len)
		st->size = len;
	if (!ts)
		return err;
	len = 0;
	*ts_err = err ? err :
			kc_request(c, KVMM_CMD_TIER_STATS, NULL, 0, ts,
				   sizeof(*ts), &len);
	/* a daemon without the cache refuses TIER_STATS: no tiers shown;
	 * one that stopped answering is no such daemon */
	if (!err && kvmmctl_conn_lost(*ts_err))
		return *ts_err;
	/* what the daemon filled: an older one's reply is shorter (the
	 * fields it ends before are 0 here, and absent) */
	if (!*ts_err && ts->size > len)
		ts->size = len;
	return err;
}

int kvmmctl_simple(struct kvmmctl_ctx *ctx, uint16_t cmd, const void *req,
		   size_t len)
{
	struct kvmm_conn *c;
	int err = kvmmctl_connect(ctx, &c);

	if (err)
		return 1;
	err = kc_request(c, cmd, req, len, NULL, 0, NULL);
	kvmm_disconnect(c);
	if (err) {
		fprintf(stderr, "kvmmctl: %s: %s\n", ctx->cmd,
			kvmmctl_strerror(ctx, err));
		return 1;
	}
	return 0;
}

bool kvmmctl_conn_lost(int err)
{
	return err == -ETIMEDOUT || err == -ECONNRESET || err == -EPROTO;
}

const char *kvmmctl_strerror(struct kvmmctl_ctx *ctx, int err)
{
	static char buf[256 + sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *path = ctx->socket ? ctx->socket : kc_default_socket();
	struct stat st;

	/* the library's, of a connection with a timeout: kvmmd answers no
	 * admin command with it */
	if (err == -ETIMEDOUT) {
		snprintf(
			buf, sizeof(buf),
			"no answer from %s in %u s (kvmmd stopped or busy?; --timeout)",
			path, ctx->timeout_s);
		return buf;
	}
	if (err != -EPERM)
		return kvmm_strerror(err);
	/* kvmmd made its socket: its owner is kvmmd's uid, unless an
	 * operator chowned it */
	if (!stat(path, &st) && st.st_uid)
		snprintf(
			buf, sizeof(buf),
			"%s: admin commands need uid 0 or kvmmd's own (%u, the socket's owner); this is uid %u",
			kvmm_strerror(err), (unsigned)st.st_uid,
			(unsigned)getuid());
	else
		snprintf(
			buf, sizeof(buf),
			"%s: admin commands need uid 0 or kvmmd's own; this is uid %u",
			kvmm_strerror(err), (unsigned)getuid());
	return buf;
}

int kvmmctl_args(const char *cmd, int argc, char **argv, int min, int max,
		 const char *usage)
{
	int n = argc - 1;

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--", 2))
			continue;
		fprintf(stderr, "kvmmctl: %s: unknown option '%s'\n", cmd,
			argv[i]);
		goto usage;
	}
	if (n > max) {
		fprintf(stderr, "kvmmctl: %s: unexpected argument '%s'\n", cmd,
			argv[max + 1]);
		goto usage;
	}
	if (n < min) {
		fprintf(stderr, "kvmmctl: %s: %s\n", cmd,
			n ? "too few arguments" : "arguments missing");
		goto usage;
	}
	return 0;
usage:
	fprintf(stderr, "usage: kvmmctl %s\n", usage);
	return 2;
}

int kvmmctl_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	/* a digit first: strtoull skips blanks and takes a sign */
	if (!isdigit((unsigned char)*s) || *end)
		return -EINVAL;
	if (errno || v > 0xffffffffu)
		return -ERANGE;
	*out = v;
	return 0;
}

int kvmmctl_parse_u32(const char *cmd, const char *what, const char *s,
		      uint32_t *out)
{
	int err = kvmmctl_u32(s, out);

	if (err == -EINVAL)
		fprintf(stderr, "kvmmctl: %s: %s '%s' is not a number\n", cmd,
			what, s);
	else if (err)
		fprintf(stderr,
			"kvmmctl: %s: %s '%s' is out of range (at most 4294967295)\n",
			cmd, what, s);
	return err;
}

int kvmmctl_parse_block_pages(const char *cmd, const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (isdigit((unsigned char)*s) && !*end && !errno && v &&
	    v <= 0xffffffffu) {
		*out = (uint32_t)v;
		return 0;
	}
	fprintf(stderr,
		"kvmmctl: %s: --block-pages '%s': not a block size (pages a block, 1 to 4294967295; kvmmctl status lists those cached)\n",
		cmd, s);
	return -EINVAL;
}

/*
 * The bytes of the UTF-8 sequence at s (1 to 4), or 0 where s holds no
 * valid one (a stray continuation byte, an overlong form, a surrogate,
 * past U+10FFFF, cut short).  The strings kvmmctl prints from kvmmd are
 * a client's own bytes (its session name): anything at all.
 */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0; /* overlong */
	else if (s[0] == 0xed)
		hi = 0x9f; /* surrogates */
	else if (s[0] == 0xf0)
		lo = 0x90; /* overlong */
	else if (s[0] == 0xf4)
		hi = 0x8f; /* past U+10FFFF */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* The code point of the valid n-byte UTF-8 sequence at s (utf8_seq()). */
static uint32_t utf8_char(const unsigned char *s, size_t n)
{
	static const unsigned char lead_bits[] = { 0x7f, 0x7f, 0x1f, 0x0f,
						   0x07 };
	uint32_t c = s[0] & lead_bits[n];

	for (size_t i = 1; i < n; i++)
		c = c << 6 | (s[i] & 0x3f);
	return c;
}

/*
 * Valid characters a terminal obeys or hides rather than shows: C1
 * controls (U+0080 to U+009F, which some terminals read as ESC
 * sequences), the bidi embeddings, overrides, isolates and marks
 * (U+202A to U+202E, U+2066 to U+2069, U+200E, U+200F, U+061C: a
 * session named with U+202E printed the rest of its line backwards),
 * the zero-width and invisible characters (U+200B to U+200D, U+FEFF,
 * U+180E, the word joiner and invisible operators U+2060 to U+2064, the
 * deprecated format characters U+206A to U+206F: two names that look
 * the same) and the line and paragraph separators U+2028 and
 * U+2029 (a line break to some terminals and to most viewers).
 */
static bool hidden_char(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9f) || c == 0x61c ||
	       (c >= 0x200b && c <= 0x200f) || (c >= 0x2028 && c <= 0x202e) ||
	       (c >= 0x2060 && c <= 0x206f) || c == 0x180e || c == 0xfeff;
}

/*
 * A client's name went out as its bytes: one that is not UTF-8 made the
 * JSON invalid (RFC 8259 wants UTF-8; python's json.load() refused it).
 */
void kvmmctl_json_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putchar('"');
	while (*p) {
		size_t n = utf8_seq(p);

		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\u%04x", *p);
		else if (n > 1 && hidden_char(utf8_char(p, n)))
			printf("\\u%04x", utf8_char(p, n));
		else if (n)
			fwrite(p, 1, n, stdout);
		else
			printf("\\ufffd");
		p += n ? n : 1;
	}
	putchar('"');
}

/*
 * A client's name went to the admin's terminal as its bytes: ESC
 * sequences (a cleared screen, a retitled window) and a newline that
 * forged a session's line.  UTF-8 stays readable; the characters
 * hidden_char() names are escaped byte by byte as the control bytes are
 * (U+202E is \xe2\x80\xae), so the text holds only what shows and
 * its width is what kvmmctl_text_width() counts.
 */
const char *kvmmctl_text_str(const char *s, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t used = 0;

	while (*p) {
		size_t n = utf8_seq(p);
		bool shown = n == 1 ? *p >= 0x20 && *p != 0x7f :
				      n && !hidden_char(utf8_char(p, n));

		n = n ? n : 1; /* a byte that is not UTF-8: alone */
		/* 4 bytes for each escaped: what len is sized for */
		if (used + (shown ? 2 * n : 4 * n) >= len)
			break;
		if (shown && *p != '\\') {
			memcpy(buf + used, p, n);
			used += n;
		} else if (shown) {
			used += (size_t)snprintf(buf + used, len - used,
						 "\\\\");
		} else {
			for (size_t i = 0; i < n; i++)
				used += (size_t)snprintf(buf + used, len - used,
							 "\\x%02x", p[i]);
		}
		p += n;
	}
	buf[used] = '\0';
	return buf;
}

void kvmmctl_json_u64s(const struct kvmmctl_json_u64 *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%s\"%s\":%llu", i ? "," : "", m[i].name,
		       (unsigned long long)m[i].value);
}

#define KVMMCTL_MAX_ARGS 63

/* Never run a command with part of what was asked: too many is an error. */
static int push_arg(char **args, int *n, char *arg)
{
	if (*n >= KVMMCTL_MAX_ARGS) {
		fprintf(stderr,
			"kvmmctl: too many arguments (at most %d, the command included)\n",
			KVMMCTL_MAX_ARGS);
		return -E2BIG;
	}
	args[(*n)++] = arg;
	return 0;
}

/*
 * --socket '' reached connect() ("kvmmctl: : Connection refused", exit 1)
 * and a path longer than a sockaddr_un holds "File name too long", exit
 * 1: both are the word given, a usage error (exit 2).
 */
static int check_socket_arg(const char *path)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;

	if (!*path) {
		fprintf(stderr, "kvmmctl: --socket needs a PATH (got '')\n");
		return -EINVAL;
	}
	if (strlen(path) > max) {
		fprintf(stderr,
			"kvmmctl: --socket %.40s...: %zu bytes, longer than a Unix socket's path may be (%zu)\n",
			path, strlen(path), max);
		return -ENAMETOOLONG;
	}
	return 0;
}

/*
 * --timeout's SECONDS: digits alone, 0 (no bound) to
 * KVMMCTL_TIMEOUT_MAX_S; "-1", "x", "1e9", "" and "2.5" are refused with
 * one line naming the word (exit 2, the caller's).
 */
static int parse_timeout(const char *s, unsigned int *out)
{
	uint32_t v;
	int err = kvmmctl_u32(s, &v);

	if (!err && v <= KVMMCTL_TIMEOUT_MAX_S) {
		*out = v;
		return 0;
	}
	fprintf(stderr,
		"kvmmctl: --timeout '%s': not a number of seconds (0 to %d; 0 waits for ever)\n",
		s, KVMMCTL_TIMEOUT_MAX_S);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct kvmmctl_ctx ctx = { 0 };
	const struct command *cmd = NULL;
	char *args[KVMMCTL_MAX_ARGS + 1];
	bool timeout_given = false;
	int n = 0, i;

	/* the user's character set, for the tables' columns
	 * (text_width.c): a UTF-8 name's width, not its bytes */
	setlocale(LC_CTYPE, "");
	for (i = 1; i < argc; i++) {
		bool help = !strcmp(argv[i], "--help") ||
			    !strcmp(argv[i], "-h");

		if (!strcmp(argv[i], "--socket") ||
		    !strcmp(argv[i], "--socket=")) {
			if (!strcmp(argv[i], "--socket=") || i + 1 == argc) {
				fprintf(stderr,
					"kvmmctl: --socket needs a PATH\n");
				return 2;
			}
			ctx.socket = argv[++i];
		} else if (!strncmp(argv[i], "--socket=", 9)) {
			ctx.socket = argv[i] + 9;
		} else if (!strcmp(argv[i], "--timeout")) {
			if (i + 1 == argc) {
				fprintf(stderr,
					"kvmmctl: --timeout needs SECONDS\n");
				return 2;
			}
			if (parse_timeout(argv[++i], &ctx.timeout_s))
				return 2;
			timeout_given = true;
		} else if (!strncmp(argv[i], "--timeout=", 10)) {
			if (parse_timeout(argv[i] + 10, &ctx.timeout_s))
				return 2;
			timeout_given = true;
		} else if (cmd &&
			   (cmd->pass_options || (help && cmd->own_help))) {
			if (push_arg(args, &n, argv[i]))
				return 2;
		} else if (!strcmp(argv[i], "--json")) {
			ctx.json = true;
		} else if (help) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version")) {
			printf("kvmmctl %s (ABI %d.%d)\n", KVMM_VERSION,
			       KVMM_ABI_MAJOR, KVMM_ABI_MINOR);
			return 0;
		} else if (!n && argv[i][0] == '-') {
			/* before the command every word is kvmmctl's:
			 * "unknown command '--bogus'" misled */
			fprintf(stderr, "kvmmctl: unknown option '%s'\n",
				argv[i]);
			usage(stderr);
			return 2;
		} else {
			if (push_arg(args, &n, argv[i]))
				return 2;
			if (n == 1)
				cmd = find_command(argv[i]);
		}
	}
	args[n] = NULL;
	if (ctx.socket && check_socket_arg(ctx.socket))
		return 2;
	if (!n) {
		usage(stderr);
		return 2;
	}
	if (cmd) {
		ctx.cmd = cmd->name;
		if (!timeout_given)
			ctx.timeout_s = cmd->timeout_s ? cmd->timeout_s :
							 KVMMCTL_TIMEOUT_S;
		return cmd->fn(n, args, &ctx);
	}
	if (!strcmp(args[0], "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "kvmmctl: unknown command '%s'\n", args[0]);
	usage(stderr);
	return 2;
}
