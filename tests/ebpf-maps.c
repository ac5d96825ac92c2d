// SPDX-License-Identifier: MIT
/*
 * BPF telemetry end to end: the loader attaches to this binary's kvmm
 * probes (by path, every process), a forked client process drives a known
 * workload, and the pinned maps hold exactly its counts and histogram
 * buckets: through the telemetry API (the first poll in two halves,
 * tel_poll_begin() and tel_poll_end(), the next whole), through the sink
 * deltas, and through
 * `bpftool -j map dump pinned` (blocks keyed by hash, uid and gid).
 * Closing removes the pins.
 * Skips (77) without root or BPF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/ebpf-common.h"
#include "tests/lib/bpf_test.h"

/* Run bpftool and return its stdout (malloc'ed), or NULL. */
static char *run_bpftool(const char *args)
{
	char cmd[1024];
	size_t cap = 1 << 20, len = 0, n;
	char *buf = malloc(cap);
	FILE *p;

	snprintf(cmd, sizeof(cmd), "bpftool %s 2>/dev/null", args);
	p = popen(cmd, "r");
	if (!p || !buf) {
		if (p)
			pclose(p);
		free(buf);
		return NULL;
	}
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (len + 1 == cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	buf[len] = 0;
	if (pclose(p) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/*
 * In `bpftool -j map dump` of a BTF map each element has a "formatted"
 * object with named fields.  Find the element whose formatted key is `key`
 * and return the value of its `field`.
 */
static long long json_field_after(const char *json, const char *key_text,
				  const char *field)
{
	const char *p = strstr(json, key_text), *f;
	char pat[64];

	if (!p)
		return -1;
	snprintf(pat, sizeof(pat), "\"%s\":", field);
	f = strstr(p, pat);
	if (!f)
		return -1;
	return strtoll(f + strlen(pat), NULL, 10);
}

int main(void)
{
	char path[512], args[600];
	struct ebpf_sink_counts sc = { 0 };
	struct tel_sink sink = {
		.block = ebpf_sink_block,
		.latency = ebpf_sink_latency,
		.event = ebpf_sink_event,
		.arg = &sc,
	};
	struct bpf_test b;
	struct kvmm_block_stats s;
	uint64_t t0, t1;
	struct tel *t;
	struct stat st;
	char *json, key[128];
	pid_t pid;
	int r;

	bpf_test_init(&b, "test");
	t_assert(!KVMM_PROBE_ENABLED(access));
	t = bpf_test_open(&b);
	t_assert_eq(tel_source(t), TEL_SOURCE_BPF);
	t_assert_eq(tel_attachments(t), 8); /* every probe of ours */
	/* The attach bumped the semaphores: costly arguments get built. */
	t_assert(KVMM_PROBE_ENABLED(access));
	t_assert(KVMM_PROBE_ENABLED(evict));
	snprintf(path, sizeof(path), "%s/v%d/kvmm_blocks", b.pin,
		 KVMM_TEL_PIN_VERSION);
	t_assert(!stat(path, &st));
	tel_set_sink(t, &sink);

	t0 = kvmm_tel_now_ns();
	pid = ebpf_drive_process(NULL, 0);
	t1 = kvmm_tel_now_ns();

	/* the first poll in two halves, its walk on a thread (as kvmmd
	 * polls); the snapshot is the old (empty) one until it ends */
	t_ok(tel_poll_begin(t));
	t_assert_eq(tel_poll_begin(t), -EBUSY);
	t_assert_eq(tel_block_count(t), 0);
	while ((r = tel_poll_end(t)) == 0)
		ebpf_sleep_ms(1);
	t_assert_eq(r, 1);
	t_assert_eq(tel_poll_end(t), 1); /* nothing runs: nothing to do */
	ebpf_check(t, t0, t1);
	t_ok(tel_block_lookup(t, H1, &s));
	t_assert_eq(s.last_pid, pid);
	t_assert_eq(sc.blocks, 3 + NBULK);
	t_assert_eq(sc.h1_count, 5);
	t_assert_eq(sc.latency_events, EBPF_NR_LATENCY_EVENTS);
	t_assert_eq(sc.ring_events, EBPF_NR_RING_EVENTS);
	/* Nothing new: the next poll reports nothing. */
	memset(&sc, 0, sizeof(sc));
	t_ok(tel_poll(t));
	t_assert_eq(sc.blocks + sc.latency_events + sc.ring_events, 0);
	ebpf_check(t, t0, t1);

	/* bpftool sees the same numbers, with field names from BTF. */
	snprintf(args, sizeof(args), "-j map dump pinned %s", path);
	json = run_bpftool(args);
	if (!json)
		t_fail("bpftool %s failed", args);
	/* keyed by hash and the accessing process's uid and gid (the
	 * driven client is our child: ours) */
	snprintf(key, sizeof(key),
		 "\"key\":{\"hash\":%llu,\"uid\":%u,\"gid\":%u}",
		 (unsigned long long)H1, (unsigned)getuid(),
		 (unsigned)getgid());
	t_assert_eq(json_field_after(json, key, "count"), 5);
	t_assert_eq(json_field_after(json, key, "last_seq"), 4);
	snprintf(key, sizeof(key),
		 "\"key\":{\"hash\":%llu,\"uid\":%u,\"gid\":%u}",
		 (unsigned long long)H2, (unsigned)getuid(),
		 (unsigned)getgid());
	t_assert_eq(json_field_after(json, key, "count"), 3);
	free(json);

	snprintf(args, sizeof(args), "-j map dump pinned %s/v%d/kvmm_hist",
		 b.pin, KVMM_TEL_PIN_VERSION);
	json = run_bpftool(args);
	if (!json)
		t_fail("bpftool %s failed", args);
	t_assert(strstr(json, "\"kind\":1,\"tier\":0,\"dst_tier\":0,"
			      "\"segments\":3"));
	t_assert_eq(json_field_after(json,
				     "\"kind\":1,\"tier\":0,\"dst_tier\":0,"
				     "\"segments\":3",
				     "count"),
		    2);
	t_assert_eq(json_field_after(json,
				     "\"kind\":4,\"tier\":1,\"dst_tier\":0,"
				     "\"segments\":0",
				     "sum_bytes"),
		    3 * 65536);
	free(json);

	snprintf(args, sizeof(args), "-j map dump pinned %s/v%d/kvmm_counters",
		 b.pin, KVMM_TEL_PIN_VERSION);
	json = run_bpftool(args);
	if (!json)
		t_fail("bpftool %s failed", args);
	t_assert(strstr(json, "\"tier_accesses\":"));
	free(json);

	/* A poll in flight: tel_poll() waits for it and feeds what it
	 * found, once (a second client's steps: H1 again, 5 more) */
	memset(&sc, 0, sizeof(sc));
	ebpf_drive_process(NULL, 0);
	t_ok(tel_poll_begin(t));
	t_ok(tel_poll(t));
	t_assert_eq(sc.h1_count, 10);
	t_assert_eq(sc.blocks, 3 + NBULK);
	/* and tel_close() with one in flight leaves nothing behind (ASan) */
	t_ok(tel_poll_begin(t));
	tel_close(t);
	t_assert(stat(path, &st) && errno == ENOENT);
	t_assert(stat(b.pin, &st) && errno == ENOENT);
	/* Detached: the semaphores are back to zero. */
	t_assert(!KVMM_PROBE_ENABLED(access));
	printf("ok: maps, sink and bpftool agree\n");
	return 0;
}
