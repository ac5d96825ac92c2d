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
 *
 * Names that hold a bidi control (U+202A, U+202E, U+2066, U+2069), a
 * zero-width, invisible or mark character (U+200B, U+200F, U+061C,
 * U+FEFF, U+2060, U+206F, U+180E), a line
 * or paragraph separator (U+2028, U+2029) or a C1 control (U+0085): the
 * text shows each escaped as the control bytes are (U+202E is
 * \xe2\x80\xae), its columns the escape's 12 or 8, and no byte
 * sequence of any such character reaches stdout under either locale;
 * --json has \u202e etc. (python reads the names back).  Until 7
 * December they went out raw: a name holding U+202E printed the rest of
 * its line backwards, and took no column, so HELD moved left.  U+00A0,
 * U+2027 and U+2030, next to them, show as they are.
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
	const char *json; /* as --json shows it, if not name */
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
	{ "bad\xffname", "bad\\xffname", 11, 11, "bad\\ufffdname" },
	{ "plain", "plain", 5, 5 },
	/* bidi embedding, override, isolates: escaped, their columns the
	 * escape's (they take none as characters) */
	{ "a\xe2\x80\xaa", "a\\xe2\\x80\\xaa", 13, 13, "a\\u202a" }, /* LRE */
	{ "r\xe2\x80\xaeol", "r\\xe2\\x80\\xaeol", 15, 15, "r\\u202eol" },
	{ "i\xe2\x81\xa6", "i\\xe2\\x81\\xa6", 13, 13, "i\\u2066" }, /* LRI */
	{ "p\xe2\x81\xa9", "p\\xe2\\x81\\xa9", 13, 13, "p\\u2069" }, /* PDI */
	/* zero-width space, right-to-left mark, Arabic letter mark, BOM */
	{ "z\xe2\x80\x8b", "z\\xe2\\x80\\x8b", 13, 13, "z\\u200b" },
	{ "m\xe2\x80\x8f", "m\\xe2\\x80\\x8f", 13, 13, "m\\u200f" },
	{ "alm\xd8\x9c", "alm\\xd8\\x9c", 11, 11, "alm\\u061c" },
	{ "b\xef\xbb\xbf", "b\\xef\\xbb\\xbf", 13, 13, "b\\ufeff" },
	/* word joiner, the last deprecated format character, the
	 * Mongolian vowel separator */
	{ "w\xe2\x81\xa0", "w\\xe2\\x81\\xa0", 13, 13, "w\\u2060" },
	{ "f\xe2\x81\xaf", "f\\xe2\\x81\\xaf", 13, 13, "f\\u206f" },
	{ "v\xe1\xa0\x8e", "v\\xe1\\xa0\\x8e", 13, 13, "v\\u180e" },
	/* line and paragraph separators */
	{ "l\xe2\x80\xa8", "l\\xe2\\x80\\xa8", 13, 13, "l\\u2028" },
	{ "q\xe2\x80\xa9", "q\\xe2\\x80\\xa9", 13, 13, "q\\u2029" },
	/* a C1 control (NEL) */
	{ "nel\xc2\x85", "nel\\xc2\\x85", 11, 11, "nel\\u0085" },
	/* their neighbours show: U+00A0 (no-break space), U+2027, U+2030 */
	{ "nb\xc2\xa0", "nb\xc2\xa0", 4, 3 },
	{ "d\xe2\x80\xa7", "d\xe2\x80\xa7", 4, 2 },
	{ "per\xe2\x80\xb0", "per\xe2\x80\xb0", 6, 4 },
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

/* No byte sequence of out is the UTF-8 of a character kvmmctl escapes:
 * C1 (0xc2 0x80-0x9f), U+061C, U+200B-U+200F, U+2028-U+202E,
 * U+2060-U+206F, U+180E, U+FEFF. */
static void no_hidden(const char *what)
{
	const unsigned char *p = (const unsigned char *)out;

	for (; *p; p++) {
		bool hidden = (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) ||
			      (p[0] == 0xd8 && p[1] == 0x9c) ||
			      (p[0] == 0xe2 && p[1] == 0x80 &&
			       ((p[2] >= 0x8b && p[2] <= 0x8f) ||
				(p[2] >= 0xa8 && p[2] <= 0xae))) ||
			      (p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa0 &&
			       p[2] <= 0xaf) ||
			      (p[0] == 0xe1 && p[1] == 0xa0 && p[2] == 0x8e) ||
			      (p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf);

		if (hidden)
			t_fail("%s: raw 0x%02x 0x%02x at byte %zu", what, p[0],
			       p[1], (size_t)(p - (const unsigned char *)out));
	}
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
	/* the byte that is no UTF-8 stays escaped, whatever the locale,
	 * and so do the bidi controls and invisible characters */
	t_assert(!strchr(out, 0xff));
	no_hidden(lc);
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
			 names[i].json ? names[i].json : names[i].name);
		if (!strstr(out, want))
			t_fail("--json: no %s", want);
	}
	no_hidden("--json");
	/* JSON, and its \\u escapes read back as the names' characters */
	td_build_path("kvmmctl", bin, sizeof(bin));
	snprintf(
		cmd, sizeof(cmd),
		"command -v python3 >/dev/null || exit 0; "
		"'%s' --socket '%s' --json sessions | python3 -c "
		"'import json,sys; n=[s[\"name\"] for s in json.load(sys.stdin)]; "
		"assert \"r\\u202eol\" in n and \"nel\\x85\" in n, n'",
		bin, d.sock);
	rc = system(cmd);
	t_assert_eq(rc, 0);

	for (size_t i = 0; i < NR_NAMES; i++)
		kvmm_disconnect(c[i]);
	td_stop(&d);
	printf("ok\n");
	return 0;
}
