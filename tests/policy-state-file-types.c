// SPDX-License-Identifier: MIT
/*
 * A policy state's file (kvmm/policy/learned_file.c) that is no regular
 * file: a FIFO is refused at once, never waited on (its open blocked
 * kvmmd at start, deaf to SIGTERM), for the read and for the save's
 * FILE.tmp; a directory is -EISDIR, a device -EINVAL (both were -EFBIG,
 * "File too large"); pol_learned_check_path() names each, and a
 * symbolic link, before a program that saves starts.  An alarm fails
 * the test where the old code hung.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvmm/policy/policy.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: blocked on a FIFO\n";

	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* exiting anyway */
	}
	_exit(T_FAIL);
}

static void check_path(const char *path, int want, const char *why_has)
{
	char why[512] = "";
	int r = pol_learned_check_path(path, why, sizeof(why));

	if (r != want)
		t_fail("check_path(%s) = %d, expected %d (%s)", path, r, want,
		       why);
	if (want && !strstr(why, why_has))
		t_fail("check_path(%s): '%s', expected '%s'", path, why,
		       why_has);
}

int main(void)
{
	char dir[64];
	char fifo[512], sub[512], link_path[512], reg[512], tmp[512];
	void *buf = NULL;
	size_t len = 0;

	signal(SIGALRM, on_alarm);
	alarm(10);
	td_tmp_path("kvmm-state-types-XXXXXX", dir, sizeof(dir));
	if (!mkdtemp(dir))
		t_fail("mkdtemp: %s", strerror(errno));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(sub, sizeof(sub), "%s/dir", dir);
	snprintf(link_path, sizeof(link_path), "%s/link", dir);
	snprintf(reg, sizeof(reg), "%s/state", dir);
	snprintf(tmp, sizeof(tmp), "%s/state.tmp", dir);
	t_ok(mkfifo(fifo, 0600));
	t_ok(mkdir(sub, 0700));
	t_ok(symlink(reg, link_path));

	/* reads */
	t_assert_eq(pol_learned_read_file(fifo, &buf, &len), -EINVAL);
	t_assert_eq(pol_learned_read_file(sub, &buf, &len), -EISDIR);
	t_assert_eq(pol_learned_read_file("/dev/null", &buf, &len), -EINVAL);
	t_assert(strstr(pol_learned_file_strerror(-EINVAL),
			"not a regular file (a FIFO"));
	t_assert(strstr(pol_learned_file_strerror(-EISDIR), "a directory"));
	t_assert(!strcmp(pol_learned_file_strerror(-ENOENT), strerror(ENOENT)));

	/* the save: a regular file through FILE.tmp, never into a FIFO */
	t_ok(pol_learned_write_file(reg, "abc", 3));
	t_ok(pol_learned_read_file(reg, &buf, &len));
	t_assert(len == 3 && !memcmp(buf, "abc", 3));
	free(buf);
	t_ok(mkfifo(tmp, 0600));
	t_assert_eq(pol_learned_write_file(reg, "xyz", 3), -EINVAL);
	t_ok(unlink(tmp));
	t_ok(mkdir(tmp, 0700));
	t_assert_eq(pol_learned_write_file(reg, "xyz", 3), -EISDIR);

	/* before a start */
	check_path(tmp, -EISDIR, "/state.tmp is a directory");
	check_path(reg, -EISDIR,
		   "/state.tmp (each save writes it) is a directory, not a "
		   "regular file");
	t_ok(rmdir(tmp));
	check_path(reg, 0, NULL);
	check_path(sub, -EISDIR, "/dir is a directory, not a regular file");
	check_path(fifo, -EINVAL, "/fifo is a FIFO, not a regular file");
	check_path("/dev/null", -EINVAL, "/dev/null is a device");
	check_path(link_path, -ELOOP, "/link is a symbolic link");
	snprintf(tmp, sizeof(tmp), "%s/none", dir);
	check_path(tmp, 0, NULL);

	unlink(fifo);
	rmdir(sub);
	unlink(link_path);
	unlink(reg);
	rmdir(dir);
	return 0;
}
