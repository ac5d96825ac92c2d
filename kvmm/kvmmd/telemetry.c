// SPDX-License-Identifier: MIT
/*
 * kvmmd's telemetry: starts the loader of ebpf/telemetry.h with the
 * --telemetry options (auto: BPF if it works, else the shared-memory
 * counters, with the reason logged once), polls it from a loop timer and
 * feeds each poll into d->tel_feed (ebpf/tel_policy.h): cache_setup.c points
 * d->tel_feed.cache at its pol_cache when it opens its tiers, so traced
 * reuse raises the policy's access counts.  .cost is the --profile cost
 * model (kvmm/policy/cost_model.h): measured host/NVMe restores correct
 * its bandwidths and recomputations its efficiency online; the corrected
 * rates are logged at shutdown.  What telemetry could not count (its
 * *_dropped counters) is logged when it grows, at most once a minute,
 * and is in ADMIN_STATUS (kvmmctl status, the metrics).
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/policy/cost_model.h"

#define KD_TEL_POLL_MS 250
/* Block slots of a session's fallback region (~340 KiB with histograms). */
#define KD_TEL_SHM_BLOCKS 4096
/* Drops are said at most this often (an overflow lasts, a log must not). */
#define KD_TEL_DROP_LOG_MS 60000

/* --profile name did not load (err, msg): its line; a profile that is
 * not there or not one is the operator's to mend, exit 2 as for any bad
 * option (it was 1) */
static void profile_refused(struct kd_daemon *d, const char *name, int err,
			    const char *msg)
{
	if (err == -ENOENT || err == -EINVAL)
		d->bad_option = true;
	vmm_log(VMM_LOG_ERR, "--profile %s: %s", name,
		msg[0] ? msg : strerror(-err));
}

static int load_cost(struct kd_daemon *d)
{
	const char *name = d->cfg.profile[0] ? d->cfg.profile :
					       KD_DEFAULT_PROFILE;
	char msg[512] = "";
	int err;

	d->cost = calloc(1, sizeof(*d->cost));
	if (!d->cost)
		return -ENOMEM;
	err = pol_cost_load(name, d->cost, msg, sizeof(msg));
	if (err && !d->cfg.profile[0]) {
		/*
		 * No profile files where this kvmmd looks (installed under
		 * another PREFIX, run from a DESTDIR tree): the built-in
		 * reference, said with the directories tried, since its
		 * bandwidths may be far from this machine's.
		 */
		vmm_log(VMM_LOG_WARN, "cost model: %s; using the built-in %s",
			msg[0] ? msg : strerror(-err), "h200-llama3-8b-ref");
		pol_cost_reference(d->cost);
		err = 0;
	}
	if (err) {
		profile_refused(d, name, err, msg);
		free(d->cost);
		d->cost = NULL;
		return err;
	}
	vmm_log(VMM_LOG_INFO, "cost model: %s", d->cost->name);
	return 0;
}

/*
 * --telemetry off: no cost model is loaded (restore plans use the
 * built-in reference, admin.md), but a --profile named is still read, so
 * that a name that is no profile refuses the start as with telemetry on:
 * it was not read at all, and the mistake showed only once telemetry was
 * turned on.
 */
static int check_profile(struct kd_daemon *d)
{
	const char *name = d->cfg.profile;
	struct pol_cost_model *m;
	char msg[512] = "";
	int err;

	if (!name[0])
		return 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	err = pol_cost_load(name, m, msg, sizeof(msg));
	if (err)
		profile_refused(d, name, err, msg);
	else
		vmm_log(VMM_LOG_INFO,
			"cost model: %s, not used: --telemetry off (restore plans use the built-in reference)",
			m->name);
	free(m);
	return err;
}

static void log_cost(struct kd_daemon *d)
{
	const struct pol_cost_model *m = d->cost;

	if (!m)
		return;
	vmm_log(VMM_LOG_INFO,
		"cost model %s: host %.3f GB/s (profile %.3f), nvme %.3f GB/s "
		"(profile %.3f), efficiency %.3f (profile %.3f); %llu "
		"transfers, %llu recomputes observed",
		m->name, m->bandwidth[POL_TIER_HOST] / 1e9,
		m->base_bandwidth[POL_TIER_HOST] / 1e9,
		m->bandwidth[POL_TIER_NVME] / 1e9,
		m->base_bandwidth[POL_TIER_NVME] / 1e9, m->efficiency,
		m->base_efficiency, (unsigned long long)d->tel_feed.transfers,
		(unsigned long long)d->tel_feed.computes);
}

/*
 * The drop counters, and whether a drop loses kvmmd something.  The event
 * ring's records (one per probe firing) are for tools that link the
 * telemetry library and set an event sink; kvmmd sets none and only
 * drains the ring, while the per-event counters, the block statistics and
 * the histograms it reads are counted before the ring is tried: a full
 * ring loses it nothing, and a burst of probes fills the 256 KiB ring
 * between two drains every time.
 */
static const struct {
	const char *name;
	size_t off;
	bool lost; /* what the policy and the statistics read */
} tel_drops[] = {
	{ "access records", offsetof(struct kvmm_counters, access_dropped),
	  true },
	{ "block stats", offsetof(struct kvmm_counters, blocks_dropped), true },
	{ "histogram rows", offsetof(struct kvmm_counters, hist_dropped),
	  true },
	{ "event records", offsetof(struct kvmm_counters, events_dropped),
	  false },
};

static uint64_t drop_count(const struct kvmm_counters *c, size_t i)
{
	uint64_t v;

	memcpy(&v, (const char *)c + tel_drops[i].off, sizeof(v));
	return v;
}

/* "N what (M in all), ..." for the drops since `was` that lose kvmmd
 * something (lost) or not; its length (0: none). */
static size_t drops_text(const struct kvmm_counters *was,
			 const struct kvmm_counters *is, bool lost, char *msg,
			 size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < sizeof(tel_drops) / sizeof(tel_drops[0]); i++) {
		uint64_t a = drop_count(was, i), b = drop_count(is, i);

		if (tel_drops[i].lost == lost && b > a && n < cap)
			n += snprintf(msg + n, cap - n,
				      "%s%llu %s (%llu in all)", n ? ", " : "",
				      (unsigned long long)(b - a),
				      tel_drops[i].name, (unsigned long long)b);
	}
	return n;
}

/*
 * A WARN when telemetry dropped something the policy or the operator's
 * statistics read since the last one: they are short by that much (a
 * session touching more blocks at once than its region has slots, more
 * histogram rows than fit).  Event records the ring had no room for are
 * an INFO line (see tel_drops[]).  At most every KD_TEL_DROP_LOG_MS: the
 * next line says all that was dropped meanwhile.
 */
static void check_drops(struct kd_daemon *d)
{
	struct kvmm_counters c;
	char msg[256];
	uint64_t now = kd_now_ns();
	bool logged = false;
	const char *since;

	if (d->tel_drops_log_ns &&
	    now - d->tel_drops_log_ns < KD_TEL_DROP_LOG_MS * 1000000ull)
		return;
	tel_counters(d->tel, &c);
	since = d->tel_drops_log_ns ? " since the last line" : "";
	if (drops_text(&d->tel_drops_logged, &c, true, msg, sizeof(msg))) {
		vmm_log(VMM_LOG_WARN,
			"telemetry (%s) dropped %s%s; the policy and the statistics miss them",
			tel_source_string(tel_source(d->tel)), msg, since);
		logged = true;
	}
	if (drops_text(&d->tel_drops_logged, &c, false, msg, sizeof(msg))) {
		vmm_log(VMM_LOG_INFO,
			"telemetry (%s) dropped %s%s: the event ring was full; kvmmd reads no event record (the policy and the statistics come from the counters and maps, which missed nothing)",
			tel_source_string(tel_source(d->tel)), msg, since);
		logged = true;
	}
	if (!logged)
		return;
	d->tel_drops_logged = c;
	d->tel_drops_log_ns = now;
}

/*
 * Each tick feeds the policy what the poll begun at the last one found,
 * and begins the next: with BPF the map walk (tens of ms with a full map,
 * bench/tel-poll) runs on a thread of its own, not on this loop.  A poll
 * still running at the tick is left to finish by the next.
 */
static void on_tel_timer(struct kd_loop *loop, struct kd_timer *t)
{
	struct kd_daemon *d = t->data;
	int err = tel_poll_end(d->tel);
	bool fed = err > 0; /* or none was running */

	if (err < 0)
		vmm_log(VMM_LOG_WARN, "telemetry poll: %s", strerror(-err));
	if (err) /* fed, or failed: the next one now */
		err = tel_poll_begin(d->tel);
	if (err < 0)
		vmm_log(VMM_LOG_WARN, "telemetry poll: %s", strerror(-err));
	check_drops(d); /* the counters of the latest poll fed */
	/*
	 * Every poll begun before this tick is in the counters and the
	 * policy now (shm: the one begun here too, which polls at once).
	 * A test waits for two such lines after what it wants counted
	 * (a session's end, a restore), where it slept "two polls": the
	 * first tick after it begins a poll, the second feeds it.
	 */
	if (d->tel_poll_log && fed)
		vmm_log(VMM_LOG_INFO,
			"telemetry: test knob: tick %llu fed the polls begun before it (KVMMD_TEST_TEL_POLL_LOG)",
			(unsigned long long)++d->tel_ticks_fed);
	kd_timer_arm(loop, t, kd_now_ns() + KD_TEL_POLL_MS * 1000000ull);
}

int kd_telemetry_start(struct kd_daemon *d)
{
	const char *targets[KD_MAX_TELEMETRY_ATTACH + 2];
	char self[PATH_MAX];
	struct pol_cache *more[TEL_POLICY_MORE];
	struct tel_opts o = { .size = sizeof(o) };
	struct tel_sink sink;
	const char *poll_log;
	uint32_t i;
	int err;

	o.mode = (enum tel_mode)d->cfg.telemetry;
	if (o.mode == TEL_MODE_OFF)
		return check_profile(d);
	err = load_cost(d);
	if (err)
		return err;
	if (d->cfg.telemetry_pin_root[0])
		o.pin_root = d->cfg.telemetry_pin_root;
	o.own_exe_self_only = d->cfg.telemetry_own_exe_self_only;
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
		free(d->cost);
		d->cost = NULL;
		return err;
	}
	vmm_log(VMM_LOG_INFO, "telemetry: %s%s%s",
		tel_source_string(tel_source(d->tel)),
		tel_source(d->tel) == TEL_SOURCE_BPF ? ", maps in " : "",
		tel_pin_dir(d->tel));
	if (tel_source(d->tel) == TEL_SOURCE_SHM) {
		/* the daemon's own events go through a region of its own */
		size_t len = kvmm_tel_shm_size(KD_TEL_SHM_BLOCKS);

		d->tel_local = aligned_alloc(64, len); /* laid out by _add */
		if (d->tel_local &&
		    tel_shm_add(d->tel, KD_TEL_LOCAL_ID, (uint32_t)getpid(),
				d->tel_local, len)) {
			free(d->tel_local);
			d->tel_local = NULL;
		}
	}
	/* The cache clock is not CLOCK_MONOTONIC ns: reuse counts only.
	 * cache_setup.c sets .cache (the first block size's policy) and
	 * .more (the others') when each exists: already, when
	 * --cache-block-pages opened the tiers at start. */
	memcpy(more, d->tel_feed.more, sizeof(more));
	tel_policy_init(&d->tel_feed, d->tel_feed.cache, d->cost, false);
	memcpy(d->tel_feed.more, more, sizeof(more));
	if (d->scope.mode != KD_SCOPE_SHARED)
		/* the probes carry the clients' hashes, the cache its own */
		tel_set_rename(d->tel, kd_scope_tel_rename, d);
	tel_policy_sink(&d->tel_feed, &sink);
	tel_set_sink(d->tel, &sink);
	/* the table checked it is "0" or "1" (test_knob.c) */
	poll_log = getenv("KVMMD_TEST_TEL_POLL_LOG");
	d->tel_poll_log = poll_log && !strcmp(poll_log, "1");
	if (d->tel_poll_log)
		vmm_log(VMM_LOG_WARN,
			"telemetry: KVMMD_TEST_TEL_POLL_LOG=1: each tick that fed a poll logged (tests only)");
	d->tel_timer.fn = on_tel_timer;
	d->tel_timer.data = d;
	kd_timer_arm(&d->loop, &d->tel_timer,
		     kd_now_ns() + KD_TEL_POLL_MS * 1000000ull);
	return 0;
}

void kd_telemetry_rename_again(struct kd_daemon *d)
{
	/* tel_set_rename() joins a running poll and resyncs the map */
	if (d->tel && d->scope.mode != KD_SCOPE_SHARED)
		tel_set_rename(d->tel, kd_scope_tel_rename, d);
}

/* Only a daemon that reads shared memory gives sessions the room. */
void kd_telemetry_ring_layout(struct kd_daemon *d,
			      struct kvmm_ring_offsets *off)
{
	size_t len = (kvmm_tel_shm_size(KD_TEL_SHM_BLOCKS) + 4095) & ~4095ul;

	if (!d->tel || tel_source(d->tel) != TEL_SOURCE_SHM)
		return;
	off->tel_off = off->mmap_size; /* page aligned */
	off->tel_size = len;
	off->mmap_size += len;
}

void kd_telemetry_session_add(struct kd_daemon *d, uint32_t id, pid_t pid,
			      void *mem, const struct kvmm_ring_offsets *off)
{
	int err;

	if (!d->tel || !off->tel_size)
		return;
	err = tel_shm_add(d->tel, id, (uint32_t)pid, (char *)mem + off->tel_off,
			  off->tel_size);
	if (err)
		vmm_log(VMM_LOG_WARN, "session %u: telemetry region: %s", id,
			strerror(-err));
}

void kd_telemetry_session_remove(struct kd_daemon *d, uint32_t id)
{
	if (d->tel)
		tel_shm_remove(d->tel, id);
}

void kd_telemetry_status(struct kd_daemon *d, struct kvmm_status_reply *st)
{
	struct kvmm_counters c;

	if (!d->tel || tel_source(d->tel) == TEL_SOURCE_OFF)
		return;
	/* the latest poll's (the loop's last tick) */
	tel_counters(d->tel, &c);
	snprintf(st->telemetry, sizeof(st->telemetry), "%s",
		 tel_source_string(tel_source(d->tel)));
	st->tel_access_dropped = c.access_dropped;
	st->tel_blocks_dropped = c.blocks_dropped;
	st->tel_hist_dropped = c.hist_dropped;
	st->tel_events_dropped = c.events_dropped;
}

/* One line with the totals, so a log shows what telemetry saw. */
static void log_totals(struct kd_daemon *d)
{
	struct tel_poll_stats ps;
	struct kvmm_counters c;
	char ev[256];
	size_t n = 0;

	if (tel_poll(d->tel))
		return;
	tel_counters(d->tel, &c);
	for (int i = 0; i < KVMM_TEL_NR_EVENTS && n < sizeof(ev); i++)
		n += snprintf(ev + n, sizeof(ev) - n, " %s %llu",
			      tel_event_string(i),
			      (unsigned long long)c.events[i]);
	vmm_log(VMM_LOG_INFO,
		"telemetry totals (%s): %zu blocks, %llu accesses;%s; dropped: "
		"%llu access records, %llu block stats, %llu histogram rows, "
		"%llu events",
		tel_source_string(tel_source(d->tel)), tel_block_count(d->tel),
		(unsigned long long)c.accesses, ev,
		(unsigned long long)c.access_dropped,
		(unsigned long long)c.blocks_dropped,
		(unsigned long long)c.hist_dropped,
		(unsigned long long)c.events_dropped);
	tel_poll_stats(d->tel, &ps);
	if (ps.polls)
		vmm_log(VMM_LOG_INFO,
			"telemetry polls (bpf): %llu, %llu of them walked the "
			"map, the others read %llu changed entries by key; the "
			"dirty ring was full before %llu (%llu records lost, "
			"read by the walks)",
			(unsigned long long)ps.polls,
			(unsigned long long)ps.full_walks,
			(unsigned long long)ps.keys_read,
			(unsigned long long)ps.ring_full,
			(unsigned long long)ps.dirty_dropped);
}

void kd_telemetry_stop(struct kd_daemon *d)
{
	if (!d->tel)
		return;
	log_totals(d); /* with the drops, whenever the last warning was */
	log_cost(d);
	kd_timer_cancel(&d->loop, &d->tel_timer);
	tel_close(d->tel); /* detaches and removes the pins */
	d->tel = NULL;
	free(d->tel_local);
	d->tel_local = NULL;
	d->tel_feed.cost = NULL;
	free(d->cost);
	d->cost = NULL;
}
