// SPDX-License-Identifier: MIT
/*
 * kvmmd makes the host tier's memory at start, before it knows the block
 * size: the first client's publish must not wait while gigabytes are
 * touched and pinned with the event loop held (0.3-0.6 s per GiB; 9 s for
 * 4 GiB on a fresh VM).
 *
 *   - --host-mem 32M, no --cache-block-pages: before any client connects
 *     the daemon's anonymous memory already holds the slab (RssAnon >= 32
 *     MiB; the log says "host tier: 33 MiB ... made in": sized for the
 *     smallest block, 2 pages); the first region's blocks (4 pages, 256
 *     KiB) then get 128 slots from it, and blocks
 *     pushed off the GPU come back from the host tier byte-identical;
 *   - a host tier that cannot be made stops the start, with its reason
 *     (--host-mem 100T);
 *   - --host-mem smaller than any block: no slab, no host tier, the cache
 *     works on the GPU alone.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/cache-common.h"

/* The process's anonymous resident memory, in KiB (/proc/PID/status). */
static unsigned long long rss_anon_kib(pid_t pid)
{
	char path[64], line[256];
	unsigned long long kib = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	t_assert(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %llu kB", &kib) == 1)
			break;
	fclose(f);
	t_assert(kib > 0);
	return kib;
}

static void made_at_start(void)
{
	const char *args[] = { "--host-mem", "32M", "--cache-gpu-blocks", "2",
			       NULL };
	const struct cc_contents cs = { .base = 0x5ab0000,
					.tag0 = 40,
					.nb = 2 };
	struct kvmm_tier_stats_reply ts;
	static char log[1 << 16];
	struct td_daemon d;
	unsigned long long kib;

	cc_start(&d, args);
	/* no client yet: the slab is there, every page of it touched */
	kib = rss_anon_kib(d.pid);
	if (kib < 32ull << 10)
		t_fail("RssAnon %llu KiB before any client, want >= 32 MiB",
		       kib);
	t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
	t_assert_eq(t_count(log, "host tier: 33 MiB on NUMA node"), 1);
	t_assert_eq(t_count(log, "made in"), 1);
	t_assert_eq(t_count(log, "tier_host:"), 0); /* no slots yet */

	for (int k = 0; k < 4; k++)
		cc_write_content(d.sock, &cs, k);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].capacity_blocks, 128); /* slots */
	t_assert_eq(ts.tiers[0].used_blocks, 2);
	t_assert_eq(ts.tiers[1].used_blocks, 6);
	/* content 0 went down first: all of it from the host tier */
	cc_read_content(d.sock, &cs, 0, cs.nb, 1);
	t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
	t_assert_eq(t_count(log, "tier_host: 128 slots of 262144 bytes"), 1);
	cc_stop(&d);
}

static void cannot_make(void)
{
	const char *args[] = { "--host-mem", "100T", NULL };
	static char log[1 << 16];
	struct td_daemon d;

	t_assert_eq(td_start(&d, args), -ECHILD);
	t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
	if (t_count(log, "of host memory failed: Cannot allocate memory") != 1)
		td_dump_log(&d);
	t_assert_eq(t_count(log,
			    "of host memory failed: Cannot allocate memory"),
		    1);
	unlink(d.log);
	rmdir(d.dir);
}

static void too_small(void)
{
	const char *args[] = { "--host-mem", "64K", NULL };
	const struct cc_contents cs = { .base = 0x5ac0000,
					.tag0 = 50,
					.nb = 2 };
	struct kvmm_tier_stats_reply ts;
	static char log[1 << 16];
	struct td_daemon d;

	cc_start(&d, args);
	cc_write_content(d.sock, &cs, 0);
	cc_read_content(d.sock, &cs, 0, cs.nb, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[1].capacity_blocks, 0);
	t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
	t_assert_eq(t_count(log, "host tier:"), 0);
	cc_stop(&d);
}

int main(void)
{
	made_at_start();
	cannot_make();
	too_small();
	return 0;
}
