/* SPDX-License-Identifier: MIT */
/*
 * BPF telemetry loaded on the bench itself (its own probes, a pin root of
 * its own), for the benches that time telemetry (probes, tel-poll).
 */
#ifndef KVMM_BENCH_BENCH_TEL_H
#define KVMM_BENCH_BENCH_TEL_H

#include <stdio.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "tests/lib/bpf_pins.h"

/* Telemetry in BPF mode on this executable, pins under
 * /sys/fs/bpf/kvmm-bench-NAME-PID; NULL without root or BPF. */
static inline struct tel *bench_tel_self(const char *name)
{
	static char self[4096], pin[96];
	static const char *targets[2] = { self, NULL };
	struct tel_opts o = { .size = sizeof(o) };
	struct tel *t;
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (len <= 0 || !HAVE_BPF || geteuid() != 0)
		return NULL;
	self[len] = 0;
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/kvmm-bench-%s-%d", name,
		 (int)getpid());
	bpf_pins_own(pin); /* removed however the bench ends */
	o.mode = TEL_MODE_BPF;
	o.pin_root = pin;
	o.targets = targets;
	o.quiet = true;
	return tel_open(&o, &t) ? NULL : t;
}

#endif
