// SPDX-License-Identifier: MIT
/*
 * BPF telemetry's default attach targets (no --telemetry-attach): the
 * libkvmm.so.1 in LIBDIR first, then the one next to the binary, each
 * once by its real path, the binary itself last; with none, the places
 * tried (for kvmmd's warning) are LIBDIR's, the binary's directory,
 * /usr/local/lib and /usr/lib, in that order.  An install under a PREFIX
 * other than /usr or /usr/local found none but kvmmd's own probes.
 * Path logic only: no root or BPF needed.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ebpf/telemetry_targets.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define MAXT 8

static char dir[64];
static char paths[MAXT][PATH_MAX];

static void touch(const char *rel)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	t_assert(fd >= 0);
	close(fd);
}

static const char *at(const char *rel)
{
	static char p[4][PATH_MAX];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, rel);
	return p[i];
}

/* Libraries installed on this machine outside the test's directory. */
static int system_libs(void)
{
	char a[PATH_MAX], b[PATH_MAX];
	int n = 0;

	if (realpath("/usr/local/lib/libkvmm.so.1", a))
		n++;
	if (realpath("/usr/lib/libkvmm.so.1", b) && (!n || strcmp(a, b)))
		n++;
	return n;
}

int main(void)
{
	char tried[2048], expect[2048];
	int sys, nr;

	td_tmp_path("kvmm-targets.XXXXXX", dir, sizeof(dir));
	t_assert(mkdtemp(dir));
	t_assert(!mkdir(at("lib"), 0755) && !mkdir(at("bin"), 0755));
	touch("lib/libkvmm.so.1");
	touch("bin/kvmmd");
	sys = system_libs();

	/* LIBDIR's library, first; the binary last */
	nr = tel_default_targets(at("lib"), at("bin/kvmmd"), paths, MAXT, tried,
				 sizeof(tried));
	t_assert_eq(nr, 2 + sys);
	t_assert(!strcmp(paths[0], at("lib/libkvmm.so.1")));
	t_assert(!strcmp(paths[nr - 1], at("bin/kvmmd")));

	/* a build tree's library next to the binary comes after LIBDIR's */
	touch("bin/libkvmm.so.1");
	nr = tel_default_targets(at("lib"), at("bin/kvmmd"), paths, MAXT, tried,
				 sizeof(tried));
	t_assert_eq(nr, 3 + sys);
	t_assert(!strcmp(paths[0], at("lib/libkvmm.so.1")));
	t_assert(!strcmp(paths[1], at("bin/libkvmm.so.1")));

	/* the same file by two names is one target */
	t_assert(!symlink("lib", at("lib2")));
	nr = tel_default_targets(at("lib2"), at("lib/kvmmd"), paths, MAXT,
				 tried, sizeof(tried));
	t_assert_eq(nr, 2 + sys);
	t_assert(!strcmp(paths[0], at("lib/libkvmm.so.1")));

	/* room for one library and the binary */
	nr = tel_default_targets(at("lib"), at("bin/kvmmd"), paths, 2, tried,
				 sizeof(tried));
	t_assert_eq(nr, 2);
	t_assert(!strcmp(paths[0], at("lib/libkvmm.so.1")));
	t_assert(!strcmp(paths[1], at("bin/kvmmd")));

	/* none: the binary alone, and every place tried, in order */
	nr = tel_default_targets(at("none"), at("none2/kvmmd"), paths, MAXT,
				 tried, sizeof(tried));
	t_assert_eq(nr, 1 + sys);
	t_assert(!strcmp(paths[nr - 1], at("none2/kvmmd")));
	snprintf(expect, sizeof(expect),
		 "%s/libkvmm.so.1, %s/libkvmm.so.1, "
		 "/usr/local/lib/libkvmm.so.1, /usr/lib/libkvmm.so.1",
		 at("none"), at("none2"));
	printf("tried: %s\n", tried);
	t_assert(!strcmp(tried, expect));

	/* a LIBDIR among the usual places is tried once */
	tel_default_targets("/usr/lib", at("none2/kvmmd"), paths, MAXT, tried,
			    sizeof(tried));
	t_assert(t_count(tried, "/usr/lib/libkvmm.so.1") == 1);

	/* a short buffer is cut, not overrun */
	nr = tel_default_targets(at("none"), at("none2/kvmmd"), paths, MAXT,
				 tried, 16);
	t_assert_eq(strlen(tried), 15);
	t_assert_eq(nr, 1 + sys); /* only the list of what was tried is cut */

	unlink(at("lib2"));
	unlink(at("lib/libkvmm.so.1"));
	unlink(at("bin/libkvmm.so.1"));
	unlink(at("bin/kvmmd"));
	rmdir(at("lib"));
	rmdir(at("bin"));
	rmdir(dir);
	printf("ok: LIBDIR's libkvmm first, each once, the binary last "
	       "(%d installed elsewhere)\n",
	       sys);
	return 0;
}
