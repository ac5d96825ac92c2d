// SPDX-License-Identifier: MIT
/*
 * A target named explicitly (kvmmd --telemetry-attach PATH) that no kvmm
 * probe attaches to is a wrong path, not a quiet success: in BPF mode
 * the open fails, in auto mode telemetry falls back to the shared-memory
 * counters (which every libkvmm client writes, whatever binary it is)
 * with a reason that names the option and the path, a missing file as
 * well as one without probes; the pins it made are gone.  Then the same
 * through kvmmd: `--telemetry bpf` stops the start, `auto` runs on shared
 * memory with a WARN.  Skips (77) without root or BPF.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "tests/lib/bpf_test.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define NO_PROBES "/bin/true"
#define MISSING "/nonexistent/kvmm-engine"

/* kvmmd attaching to path in mode: td_start()'s result, and its log. */
static int daemon_on(const struct bpf_test *b, const char *mode,
		     const char *path, char *log, size_t len)
{
	const char *args[] = { "--telemetry",
			       mode,
			       "--telemetry-pin-root",
			       b->pin,
			       "--telemetry-attach",
			       path,
			       NULL };
	struct td_daemon d;
	int err = td_start(&d, args);

	td_stop_log(&d, log, len);
	return err;
}

int main(void)
{
	static char log[1 << 16];
	const char *targets[3];
	struct tel_opts o = { .size = sizeof(o) };
	struct bpf_test b;
	struct stat st;
	struct tel *t;
	const char *why;

	bpf_test_init(&b, "attach");
	if (access(NO_PROBES, R_OK))
		t_skip("no %s to attach to", NO_PROBES);
	t = bpf_test_open(&b); /* can this machine load BPF at all? */
	tel_close(t);

	targets[0] = b.self;
	targets[1] = NO_PROBES;
	targets[2] = NULL;
	o.pin_root = b.pin;
	o.targets = targets;
	o.quiet = true;
	o.mode = TEL_MODE_BPF;
	t_assert(tel_open(&o, &t) < 0);
	t_assert(stat(b.pin, &st) && errno == ENOENT);

	o.mode = TEL_MODE_AUTO;
	t_ok(tel_open(&o, &t));
	why = tel_unavailable_reason(t);
	printf("auto, %s: %s\n", NO_PROBES, why);
	t_assert_eq(tel_source(t), TEL_SOURCE_SHM);
	t_assert(
		strstr(why, "--telemetry-attach " NO_PROBES ": no kvmm probe"));
	tel_close(t);
	t_assert(stat(b.pin, &st) && errno == ENOENT);

	targets[1] = MISSING;
	t_ok(tel_open(&o, &t));
	why = tel_unavailable_reason(t);
	printf("auto, %s: %s\n", MISSING, why);
	t_assert_eq(tel_source(t), TEL_SOURCE_SHM);
	t_assert(strstr(why, "--telemetry-attach " MISSING
			     ": No such file or directory"));
	tel_close(t);

	targets[1] = NULL; /* the good target alone: BPF */
	t_ok(tel_open(&o, &t));
	t_assert_eq(tel_source(t), TEL_SOURCE_BPF);
	t_assert(tel_attachments(t) > 0);
	tel_close(t);
	printf("ok: a target without probes is no silent success\n");

	t_assert_eq(daemon_on(&b, "bpf", NO_PROBES, log, sizeof(log)), -ECHILD);
	t_assert(
		strstr(log, "--telemetry-attach " NO_PROBES ": no kvmm probe"));
	t_assert_eq(daemon_on(&b, "auto", NO_PROBES, log, sizeof(log)), 0);
	t_assert(strstr(log, "WARN") &&
		 strstr(log,
			"--telemetry-attach " NO_PROBES ": no kvmm probe") &&
		 strstr(log, "using shared-memory counters"));
	t_assert(stat(b.pin, &st) && errno == ENOENT);
	printf("ok: kvmmd refuses (bpf) or falls back (auto)\n");
	return 0;
}
