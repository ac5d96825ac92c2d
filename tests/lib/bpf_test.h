/* SPDX-License-Identifier: MIT */
/*
 * The start the BPF telemetry tests share: skip (77) unless built with
 * BPF and USDT and run as root; this binary's path (the probes' target)
 * and a pin root of the test's own; telemetry opened in BPF mode on
 * them, or a skip where this machine cannot load BPF.  The pin root is
 * removed however the test ends (tests/lib/bpf_pins.h), and the roots
 * of runs that died are removed first.
 */
#ifndef KVMM_TESTS_BPF_TEST_H
#define KVMM_TESTS_BPF_TEST_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "tests/lib/bpf_pins.h"
#include "tests/lib/test.h"

struct bpf_test {
	char self[4096]; /* /proc/self/exe, resolved */
	char pin[128]; /* /sys/fs/bpf/kvmm-NAME-PID */
};

/* Skips unless BPF telemetry can be tried here; fills b. */
static inline void bpf_test_init(struct bpf_test *b, const char *name)
{
	ssize_t n;

	if (!HAVE_BPF || !HAVE_SDT)
		t_skip("built without BPF or USDT support");
	if (geteuid() != 0)
		t_skip("BPF telemetry needs root");
	n = readlink("/proc/self/exe", b->self, sizeof(b->self) - 1);
	t_assert(n > 0);
	b->self[n] = 0;
	snprintf(b->pin, sizeof(b->pin), "/sys/fs/bpf/kvmm-%s-%d", name,
		 (int)getpid());
	bpf_pins_own(b->pin);
}

/* Telemetry in BPF mode on this binary's probes, pinned under b->pin;
 * skips when BPF cannot be loaded. */
static inline struct tel *bpf_test_open(const struct bpf_test *b)
{
	const char *targets[2] = { b->self, NULL };
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_BPF,
			      .pin_root = b->pin,
			      .targets = targets,
			      .quiet = true };
	struct tel *t;
	int err = tel_open(&o, &t);

	if (err)
		t_skip("BPF unavailable: %s", strerror(-err));
	return t;
}

/* A command's standard output (a static buffer, NUL-terminated); fails
 * the test unless it exits 0 (kvmmctl trace, as the tests run it). */
static inline char *bpf_test_run(const char *cmd)
{
	static char buf[1 << 16];
	size_t n;
	FILE *p = popen(cmd, "r");

	t_assert(p);
	n = fread(buf, 1, sizeof(buf) - 1, p);
	buf[n] = 0;
	t_assert_eq(pclose(p), 0);
	return buf;
}

#endif
