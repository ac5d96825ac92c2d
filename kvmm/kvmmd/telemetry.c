// SPDX-License-Identifier: MIT
/*
 * kvmmd's telemetry: starts the loader of ebpf/telemetry.h with the
 * --telemetry options (auto: BPF if it works, else the shared-memory
 * counters, with the reason logged once), polls it from a loop timer and
 * feeds each poll into d->tel_feed (ebpf/tel_policy.h).  The policy side
 * plugs in by setting d->tel_feed.cache / .cost once kvmmd owns a
 * pol_cache and a cost model; until then the feed only counts.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/kvmmd.h"

#define KD_TEL_POLL_MS 250

static void on_tel_timer(struct kd_loop *loop, struct kd_timer *t)
{
	struct kd_daemon *d = t->data;
	int err = tel_poll(d->tel);

	if (err)
		vmm_log(VMM_LOG_WARN, "telemetry poll: %s", strerror(-err));
	kd_timer_arm(loop, t, kd_now_ns() + KD_TEL_POLL_MS * 1000000ull);
}

int kd_telemetry_start(struct kd_daemon *d)
{
	const char *targets[KD_MAX_TELEMETRY_ATTACH + 2];
	char self[PATH_MAX];
	struct tel_opts o = { .size = sizeof(o) };
	struct tel_sink sink;
	uint32_t i;
	int err;

	o.mode = (enum tel_mode)d->cfg.telemetry;
	if (o.mode == TEL_MODE_OFF)
		return 0;
	if (d->cfg.telemetry_pin_root[0])
		o.pin_root = d->cfg.telemetry_pin_root;
	if (d->cfg.nr_telemetry_attach) {
		for (i = 0; i < d->cfg.nr_telemetry_attach; i++)
			targets[i] = d->cfg.telemetry_attach[i];
		/* and always the daemon's own probes */
		if (realpath("/proc/self/exe", self))
			targets[i++] = self;
		targets[i] = NULL;
		o.targets = targets;
	}
	err = tel_open(&o, &d->tel);
	if (err) {
		vmm_log(VMM_LOG_ERR, "telemetry (%s): %s",
			tel_mode_string(o.mode), strerror(-err));
		return err;
	}
	vmm_log(VMM_LOG_INFO, "telemetry: %s%s%s",
		tel_source_string(tel_source(d->tel)),
		tel_source(d->tel) == TEL_SOURCE_BPF ? ", maps in " : "",
		tel_pin_dir(d->tel));
	tel_policy_init(&d->tel_feed, NULL, NULL, true);
	tel_policy_sink(&d->tel_feed, &sink);
	tel_set_sink(d->tel, &sink);
	d->tel_timer.fn = on_tel_timer;
	d->tel_timer.data = d;
	kd_timer_arm(&d->loop, &d->tel_timer,
		     kd_now_ns() + KD_TEL_POLL_MS * 1000000ull);
	return 0;
}

void kd_telemetry_stop(struct kd_daemon *d)
{
	if (!d->tel)
		return;
	kd_timer_cancel(&d->loop, &d->tel_timer);
	tel_close(d->tel); /* detaches and removes the pins */
	d->tel = NULL;
}
