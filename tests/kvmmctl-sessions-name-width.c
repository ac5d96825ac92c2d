// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * kvmmctl sessions pads the NAME column by display columns under the
 * user's locale: with LC_ALL=C.UTF-8 the column after NAME (HELD, right
 * aligned) ends at display column 50 on every line, the header's and
 * each session's, whatever the name: "café-α" (8 bytes, 6 columns), CJK
 * (2 columns a character), a combining accent (0), fullwidth Latin, a
 * byte that is not UTF-8 (still escaped as \xff, never printed raw).
 * Until 7 December "%-16s" padded by bytes: a UTF-8 name's line had its
 * columns after NAME 2 to 4 columns left of the others'.  Under LC_ALL=C
 * (no multibyte characters) a byte is a column, as before.  --json keeps
 * the names' UTF-8 as it is, and stays JSON.
 */
#include <locale.h>

#include "tests/cache-common.h"

static char out[65536];

/* Display column 25 to 40 is NAME, then a blank and HELD's 8 columns. */
#define HELD_END_COL 50

static const struct {
	const char *name; /* the client's HELLO name */
	const char *shown; /* as the text shows it */
	size_t bytes, cols; /* of shown */
} names[] = {
	{ "caf\xc3\xa9-\xce\xb1", "caf\xc3\xa9-\xce\xb1", 8, 6 }, /* café-α */
	/* 漢字かな */
	{ "\xe6\xbc\xa2\xe5\xad\x97\xe3\x81\x8b\xe3\x81\xaa",
	  "\xe6\xbc\xa2\xe5\xad\x97\xe3\x81\x8b\xe3\x81\xaa", 12, 8 },
	/* e, U+0301 (combining acute), t, e */
	{ "e\xcc\x81te", "e\xcc\x81te", 5, 3 },
	/* ｆｕｌｌ (fullwidth) */
	{ "\xef\xbd\x86\xef\xbd\x95\xef\xbd\x8c\xef\xbd\x8c",
	  "\xef\xbd\x86\xef\xbd\x95\xef\xbd\x8c\xef\xbd\x8c", 12, 8 },
	{ "bad\xffname", "bad\\xffname", 11, 11 },
	{ "plain", "plain", 5, 5 },
};
#define NR_NAMES (sizeof(names) / sizeof(names[0]))

/* The byte offset in line (up to its '\n') where its fifth word (HELD)
 * ends; the names hold no blank. */
static size_t held_end(const char *line)
{
	const char *p = line;

	for (int word = 0; word < 5; word++) {
		while (*p == ' ')
			p++;
		if (!*p || *p == '\n')
			t_fail("fewer than 5 words in: %.*s",
			       (int)strcspn(line, "\n"), line);
		while (*p && *p != ' ' && *p != '\n')
			p++;
	}
	return (size_t)(p - line);
}

/*
 * Run sessions under the locale lc and check every line but the regions'
 * (there are none): HELD ends at HELD_END_COL display columns, which is
 * that many bytes plus those a name has over its columns (utf8) or
 * exactly that many bytes (a byte a column).
 */
static void check_table(const char *sock, const char *lc, bool utf8)
{
	unsigned int found[NR_NAMES] = { 0 }, lines = 0;
	const char *line;
	int rc;

	t_assert_eq(setenv("LC_ALL", lc, 1), 0);
	rc = td_kvmmctl(sock, "sessions", out, sizeof(out));
	printf("--- LC_ALL=%s kvmmctl sessions: exit %d\n%s", lc, rc, out);
	t_assert_eq(rc, 0);
	for (line = out; *line; line = strchr(line, '\n') + 1) {
		size_t want = HELD_END_COL;

		t_assert(strchr(line, '\n'));
		for (size_t i = 0; i < NR_NAMES; i++) {
			size_t len = strlen(names[i].shown);

			/* the name, alone between blanks */
			if (strncmp(line + 25, names[i].shown, len) ||
			    line[25 + len] != ' ')
				continue;
			found[i]++;
			if (utf8)
				want += names[i].bytes - names[i].cols;
		}
		if (held_end(line) != want)
			t_fail("LC_ALL=%s: HELD ends at byte %zu, not %zu: %.*s",
			       lc, held_end(line), want,
			       (int)strcspn(line, "\n"), line);
		lines++;
	}
	/* the header, kvmmctl's own session and ours */
	t_assert_eq(lines, NR_NAMES + 2);
	for (size_t i = 0; i < NR_NAMES; i++)
		t_assert_eq(found[i], 1);
	/* the byte that is no UTF-8 stays escaped, whatever the locale */
	t_assert(!strchr(out, 0xff));
}

int main(void)
{
	struct kvmm_conn *c[NR_NAMES];
	struct td_daemon d;
	char cmd[1024], bin[256];
	int rc;

	if (!setlocale(LC_CTYPE, "C.UTF-8"))
		t_skip("no C.UTF-8 locale here (locale -a)");
	setlocale(LC_CTYPE, "C");
	t_ok(td_start(&d, (const char *[]){ NULL }));
	for (size_t i = 0; i < NR_NAMES; i++)
		c[i] = cc_connect_lib(d.sock, names[i].name);

	check_table(d.sock, "C.UTF-8", true);
	check_table(d.sock, "C", false);

	/* --json: the same names, UTF-8 as it is, the bad byte U+FFFD */
	t_assert_eq(setenv("LC_ALL", "C.UTF-8", 1), 0);
	rc = td_kvmmctl(d.sock, "--json sessions", out, sizeof(out));
	printf("--- kvmmctl --json sessions: exit %d\n%s", rc, out);
	t_assert_eq(rc, 0);
	for (size_t i = 0; i < NR_NAMES; i++) {
		char want[64];

		snprintf(want, sizeof(want), "\"name\":\"%s\"",
			 strcmp(names[i].name, "bad\xffname") ?
				 names[i].name :
				 "bad\\ufffdname");
		if (!strstr(out, want))
			t_fail("--json: no %s", want);
	}
	td_build_path("kvmmctl", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd),
		 "command -v python3 >/dev/null || exit 0; "
		 "'%s' --socket '%s' --json sessions | python3 -c "
		 "'import json,sys; json.load(sys.stdin)'",
		 bin, d.sock);
	rc = system(cmd);
	t_assert_eq(rc, 0);

	for (size_t i = 0; i < NR_NAMES; i++)
		kvmm_disconnect(c[i]);
	td_stop(&d);
	printf("ok\n");
	return 0;
}
