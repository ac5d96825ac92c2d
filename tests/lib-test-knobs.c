// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * libkvmm checks its KVMM_TEST_* environment when a connection opens
 * (kvmm/lib/test_knob.c): against a real kvmmd,
 *   - KVMM_TEST_HELLO_MINOR=N from 0 to KVMM_ABI_MINOR connects, and the
 *     connection plays 1.N (kvmm_get_daemon_info()'s abi_minor N, kvmmd
 *     serves it so: an ADMIN_STATUS of 1.21's 720 bytes at 21); unset,
 *     the newest; 024 is 24;
 *   - a bad value (25, past the newest; x, -1, +5, " 19", 19x, empty;
 *     KVMM_TEST_GIVE_AHEAD_MAX=abc or 2^32) fails kvmm_connect() and
 *     kc_connect_admin() with -EINVAL and one ERR line on stderr naming
 *     the variable and what it takes;
 *   - a misspelt name (KVMM_TEST_HELO_MINOR) is refused with the knob it
 *     likely meant; an unknown one (KVMM_TEST_BOGUS) with the list; a
 *     retired one (KVMM_TEST_HELLO_1_19=1, which a test of before sets)
 *     with what replaced it, so that test fails rather than run as the
 *     newest client;
 *   - the test suite's own variables (KVMM_TEST_TAG, ...) are passed
 *     over;
 *   - a refused connect sends nothing: kvmmd counts no session for it;
 *   - kvmmctl with a misspelt knob exits 1 with the line.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

static struct td_daemon d;
static char err_text[8192];

/* fd 2 into a file while fn runs; what it wrote into err_text */
static int with_stderr(int (*fn)(const char *name, const char *value),
		       const char *name, const char *value)
{
	char path[128];
	int fd, saved, r;
	ssize_t n;

	td_tmp_path("lib-test-knobs.err", path, sizeof(path));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	t_assert(fd >= 0);
	saved = dup(2);
	t_assert(saved >= 0);
	fflush(stderr);
	t_assert(dup2(fd, 2) == 2);
	r = fn(name, value);
	fflush(stderr);
	t_assert(dup2(saved, 2) == 2);
	close(saved);
	n = pread(fd, err_text, sizeof(err_text) - 1, 0);
	t_assert(n >= 0);
	err_text[n] = '\0';
	close(fd);
	unlink(path);
	return r;
}

/* name=value set while an engine's connection opens: its result (the
 * minor it plays in *minor_out when it opened) */
static uint32_t minor_out;

static int engine_connect(const char *name, const char *value)
{
	struct kvmm_connect_opts o = { .size = sizeof(o),
				       .socket_path = d.sock,
				       .map_ahead_set = 1 }; /* no thread */
	struct kvmm_daemon_info info = { .size = sizeof(info) };
	struct kvmm_conn *c;
	int err;

	if (name)
		t_ok(setenv(name, value, 1));
	err = kvmm_connect(&o, &c);
	if (name)
		t_ok(unsetenv(name));
	if (err)
		return err;
	t_ok(kvmm_get_daemon_info(c, &info));
	minor_out = info.abi_minor;
	t_assert_eq(c->hello.abi_minor, info.abi_minor);
	kvmm_disconnect(c);
	return 0;
}

static int admin_connect(const char *name, const char *value)
{
	struct kvmm_conn *c;
	int err;

	t_ok(setenv(name, value, 1));
	err = kc_connect_admin(d.sock, &c);
	t_ok(unsetenv(name));
	if (!err)
		kvmm_disconnect(c);
	return err;
}

/* name=value refused by both ways to connect, the one line naming it */
static void refused(const char *name, const char *value, const char *line)
{
	int (*fns[2])(const char *, const char *) = { engine_connect,
						      admin_connect };

	for (int i = 0; i < 2; i++) {
		t_assert_eq(with_stderr(fns[i], name, value), -EINVAL);
		if (!strstr(err_text, line) || t_count(err_text, "\n") != 1)
			t_fail("%s=%s: stderr was not the one line \"%s\":\n%s",
			       name, value, line, err_text);
	}
	printf("%s=%s refused: %s", name, value, strchr(err_text, ']') + 3);
}

static void good_minors(void)
{
	char v[8];

	t_ok(with_stderr(engine_connect, NULL, NULL));
	t_assert_eq(minor_out, KVMM_ABI_MINOR);
	for (unsigned int m = 0; m <= KVMM_ABI_MINOR; m++) {
		snprintf(v, sizeof(v), "%u", m);
		t_ok(with_stderr(engine_connect, "KVMM_TEST_HELLO_MINOR", v));
		t_assert_eq(minor_out, m);
		t_assert_eq(err_text[0], '\0');
	}
	t_ok(with_stderr(engine_connect, "KVMM_TEST_HELLO_MINOR", "024"));
	t_assert_eq(minor_out, 24);
	t_ok(with_stderr(engine_connect, "KVMM_TEST_GIVE_AHEAD_MAX", "0"));
	t_ok(with_stderr(engine_connect, "KVMM_TEST_GIVE_AHEAD_MAX",
			 "4294967295"));
	/* the harness's own */
	t_ok(with_stderr(engine_connect, "KVMM_TEST_TAG", "anything"));
	t_ok(with_stderr(engine_connect, "KVMM_TEST_BACKEND", "cuda"));
	t_assert_eq(err_text[0], '\0');
	printf("minors 0 to %d connect, each played\n", KVMM_ABI_MINOR);
}

/* kvmmd serves a connection of 1.21 as one: ADMIN_STATUS of 720 bytes */
static void served_as_announced(void)
{
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	size_t len = 0;

	t_ok(setenv("KVMM_TEST_HELLO_MINOR", "21", 1));
	t_ok(kc_connect_admin(d.sock, &c));
	t_ok(unsetenv("KVMM_TEST_HELLO_MINOR"));
	t_assert_eq(c->hello.abi_minor, 21);
	t_ok(kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st),
			&len));
	t_assert_eq(len, offsetof(struct kvmm_status_reply, nr_sizes));
	t_assert_eq(st.size, len);
	kvmm_disconnect(c);
}

static void bad_values(void)
{
	static const char *const minors[] = {
		"26", "x", "-1", "+5", " 19", "19x", "", "99999999999"
	};
	static const char minor_line[] =
		": expected an ABI minor (the HELLO says 1.N) from 0 to 25, digits only (the connection is refused, EINVAL)\n";
	static const char give_line[] =
		": expected a number of blocks from 0 to 4294967295, digits only (the connection is refused, EINVAL)\n";
	char line[256];

	_Static_assert(KVMM_ABI_MINOR == 25, "minor_line names 25");
	for (size_t i = 0; i < sizeof(minors) / sizeof(minors[0]); i++) {
		snprintf(
			line, sizeof(line),
			"ERR   lib-test-knobs[%d]: libkvmm: KVMM_TEST_HELLO_MINOR=%s%s",
			(int)getpid(), minors[i], minor_line);
		refused("KVMM_TEST_HELLO_MINOR", minors[i], line);
	}
	snprintf(line, sizeof(line), "KVMM_TEST_GIVE_AHEAD_MAX=abc%s",
		 give_line);
	refused("KVMM_TEST_GIVE_AHEAD_MAX", "abc", line);
	snprintf(line, sizeof(line), "KVMM_TEST_GIVE_AHEAD_MAX=4294967296%s",
		 give_line);
	refused("KVMM_TEST_GIVE_AHEAD_MAX", "4294967296", line);
}

static void bad_names(void)
{
	refused("KVMM_TEST_HELO_MINOR", "19",
		"libkvmm: KVMM_TEST_HELO_MINOR=19: not a libkvmm test knob; did you mean KVMM_TEST_HELLO_MINOR? (the connection is refused, EINVAL)\n");
	refused("KVMM_TEST_GIVE_AHEAD_MX", "0",
		"libkvmm: KVMM_TEST_GIVE_AHEAD_MX=0: not a libkvmm test knob; did you mean KVMM_TEST_GIVE_AHEAD_MAX?");
	refused("KVMM_TEST_BOGUS", "1",
		"libkvmm: KVMM_TEST_BOGUS=1: not a libkvmm test knob (they are KVMM_TEST_HELLO_MINOR, KVMM_TEST_GIVE_AHEAD_MAX and KVMM_TEST_MAPAHEAD_DELAY_MS; the connection is refused, EINVAL)\n");
	/* what cache-publish-revoked and lib-mapahead-lend-procs set
	 * until 7 December: now refused, not run as the newest client */
	refused("KVMM_TEST_HELLO_1_19", "1",
		"libkvmm: KVMM_TEST_HELLO_1_19=1: a retired libkvmm test knob: set KVMM_TEST_HELLO_MINOR=19 (the connection is refused, EINVAL)\n");
	refused("KVMM_TEST_HELLO_1_18", "1",
		"set KVMM_TEST_HELLO_MINOR=18 (the connection is refused");
}

/* kvmmctl with a misspelt knob: exit 1, the library's line and its own */
static void kvmmctl_refused(void)
{
	static char out[4096];

	t_ok(setenv("KVMM_TEST_HELO_MINOR", "12", 1));
	t_assert_eq(td_kvmmctl(d.sock, "status 2>&1", out, sizeof(out)), 1);
	t_ok(unsetenv("KVMM_TEST_HELO_MINOR"));
	if (!strstr(out,
		    "libkvmm: KVMM_TEST_HELO_MINOR=12: not a libkvmm test knob; did you mean KVMM_TEST_HELLO_MINOR?") ||
	    !strstr(out, ": Invalid argument\n") || strstr(out, "backend"))
		t_fail("kvmmctl with a misspelt knob:\n%s", out);
}

int main(void)
{
	struct kvmm_status_reply st;
	uint64_t before;

	td_start_ok(&d, NULL);
	good_minors();
	served_as_announced();
	t_ok(td_status(&d, &st));
	before = st.sessions_total;
	bad_values();
	bad_names();
	kvmmctl_refused();
	/* none of them reached kvmmd: the one session since is this one */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.sessions_total, before + 1);
	td_stop_ok(&d);
	return 0;
}
