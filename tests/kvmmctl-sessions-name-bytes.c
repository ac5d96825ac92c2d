// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A session's name is the client's own bytes (HELLO's name, any 31), and
 * kvmmctl sessions prints it to an admin's terminal and to scripts: the
 * text escapes control bytes, C1 controls, bytes that are not UTF-8 and
 * '\' as \xNN (\\), so an ESC sequence does not reach the terminal and a
 * newline does not forge a session's line; --json keeps valid UTF-8,
 * escapes the controls and writes U+FFFD for a byte that is not UTF-8,
 * so the output is JSON (python's json.load() takes it).  Until 7
 * December both printed the bytes as they were: a name of
 * "\x1b[2J\n7 0 0 root" cleared the admin's screen and added a line, and
 * a byte 0xff made --json invalid.  A UTF-8 name is printed as it is.
 */
#include "tests/cache-common.h"

static char out[65536];

static void ctl(const char *sock, const char *args)
{
	int rc = td_kvmmctl(sock, args, out, sizeof(out));

	printf("--- kvmmctl %s: exit %d\n%s", args, rc, out);
	t_assert_eq(rc, 0);
}

/* no byte of out is a control byte but '\n', 0x7f, 0xff, 0xfe or a C1
 * control (0xc2 0x9b) */
static void no_raw_bytes(const char *what)
{
	for (const unsigned char *p = (const unsigned char *)out; *p; p++)
		if ((*p < 0x20 && *p != '\n') || *p == 0x7f || *p == 0xff ||
		    *p == 0xfe || (p[0] == 0xc2 && p[1] == 0x9b))
			t_fail("%s: raw byte 0x%02x at %zu", what, *p,
			       (size_t)(p - (const unsigned char *)out));
}

static unsigned int lines(void)
{
	unsigned int n = 0;

	for (const char *p = out; *p; p++)
		n += *p == '\n';
	return n;
}

int main(void)
{
	/* ESC, a newline with a forged line, DEL, 0xff 0xfe (no UTF-8), a
	 * C1 CSI (U+009B), a quote and a backslash: 31 bytes */
	static const char evil[] = "\x1b[2J\n7 0 0 r\x7f\xff\xfe\xc2\x9b\"\\";
	struct kvmm_conn *c, *u;
	struct td_daemon d;
	char cmd[1024], bin[256];
	int rc;

	t_assert(sizeof(evil) <= 32);
	t_ok(td_start(&d, (const char *[]){ NULL }));
	c = cc_connect_lib(d.sock, evil);
	u = cc_connect_lib(d.sock, "k\xc3\xa4se-\xe2\x82\xac"); /* käse-€ */

	ctl(d.sock, "sessions");
	no_raw_bytes("sessions");
	/* the header, the admin's own session and the two: no forged line */
	t_assert_eq(lines(), 4);
	t_assert(strstr(out,
			"\\x1b[2J\\x0a7 0 0 r\\x7f\\xff\\xfe\\xc2\\x9b\"\\\\"));
	t_assert(strstr(out, " k\xc3\xa4se-\xe2\x82\xac "));

	ctl(d.sock, "--json sessions");
	no_raw_bytes("--json sessions");
	t_assert(strstr(out, "\"name\":\"\\u001b[2J\\u000a7 0 0 r\\u007f"
			     "\\ufffd\\ufffd\\u009b\\\"\\\\\""));
	t_assert(strstr(out, "\"name\":\"k\xc3\xa4se-\xe2\x82\xac\""));
	/* and it is JSON, where python is */
	td_build_path("kvmmctl", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd),
		 "command -v python3 >/dev/null || exit 0; "
		 "'%s' --socket '%s' --json sessions | python3 -c "
		 "'import json,sys; json.load(sys.stdin)'",
		 bin, d.sock);
	rc = system(cmd);
	t_assert_eq(rc, 0);

	kvmm_disconnect(u);
	kvmm_disconnect(c);
	td_stop(&d);
	printf("ok\n");
	return 0;
}
