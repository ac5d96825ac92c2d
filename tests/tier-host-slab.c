// SPDX-License-Identifier: MIT
/*
 * Host tier slab: capacity is whole slots of --host-mem, allocation runs out
 * with -ENOSPC and never hands a slot out twice, a FILLING slot is not
 * readable until published, freed slots are reused, the slab sits on the
 * requested NUMA node, the pin hook sees the whole slab, and the sysfs
 * lookup of a GPU's node handles -1 and malformed addresses.  Where
 * transparent huge pages are not off, a 32 MiB slab is faulted in 2 MiB
 * pages (it asks for them before its first touch).  A slab made before
 * the slot size is known (kvmmd at start) is touched in full, fits any
 * slot size from the smallest up, and the tier cut from it gives back the
 * part its slots do not use unless the slab is pinned; a tier closed
 * keeping its slab hands the same memory back, still pinned, for another
 * open; a slab too small is refused and stays the caller's.
 */
#include "kvmm/kvmmd/tier_host.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if HAVE_LIBNUMA
#include <numaif.h>
#endif

static size_t pinned_len;
static void *pinned_at;
static int unpins;

static int fake_pin(void *arg, void *addr, size_t len)
{
	t_assert(arg == &pinned_len);
	pinned_at = addr;
	pinned_len = len;
	return 0;
}

static int fake_unpin(void *arg, void *addr)
{
	t_assert(addr == pinned_at);
	unpins++;
	return 0;
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	t_assert(f);
	fputs(s, f);
	fclose(f);
}

static void check_sysfs(void)
{
	char root[64], dir[256], file[300];
	int node = 99;

	td_tmp_path("kvmm-sysfs-XXXXXX", root, sizeof(root));
	t_assert(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices/0000:3b:00.0", root);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
	t_ok(system(cmd));
	snprintf(file, sizeof(file), "%s/numa_node", dir);
	write_file(file, "1\n");
	t_ok(tier_host_pci_numa_node(root, "0000:3b:00.0", &node));
	t_assert_eq(node, 1);
	t_ok(tier_host_pci_numa_node(root, "3B:00.0", &node));
	t_assert_eq(node, 1);
	write_file(file, "-1\n"); /* no affinity */
	t_assert_eq(tier_host_pci_numa_node(root, "0000:3b:00.0", &node),
		    -ENODATA);
	t_assert_eq(tier_host_pci_numa_node(root, "0000:3c:00.0", &node),
		    -ENOENT);
	t_assert_eq(tier_host_pci_numa_node(root, "../../etc", &node), -EINVAL);
	t_assert_eq(tier_host_pci_numa_node(root, "0000:3b:00.0/x", &node),
		    -EINVAL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	t_ok(system(cmd));
}

static bool thp_off(void)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	char line[128] = "";
	bool off;

	if (!f)
		return true;
	off = !fgets(line, sizeof(line), f) || strstr(line, "[never]");
	fclose(f);
	return off;
}

/*
 * The slab's whole 2 MiB pages are huge after the open (at least half of
 * them: the kernel falls back to 4 KiB pages where it has no huge page to
 * give, which direct compaction makes rare for a madvised range).
 */
static void check_huge_pages(void)
{
	struct tier_host_config cfg = {
		.size = sizeof(cfg),
		.capacity_bytes = 32u << 20,
		.slot_bytes = 256 * 1024,
		.numa_node = -1,
	};
	struct tier_host *h;
	long long before = t_anon_huge_bytes(), after;

	if (thp_off() || before < 0) {
		printf("transparent huge pages off: slab page size not checked\n");
		return;
	}
	t_ok(tier_host_open(&cfg, &h));
	after = t_anon_huge_bytes();
	printf("32 MiB slab: %lld MiB in huge pages\n", (after - before) >> 20);
	t_assert(after - before >= 8ll << 20);
	tier_host_close(h);
}

/* Bytes of [p, p + len) resident in memory (mincore). */
static size_t resident(const void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = 0;
	unsigned char *vec;

	if (!len)
		return 0;
	vec = malloc((len + pg - 1) / pg);
	t_assert(vec);
	t_ok(mincore((void *)p, len, vec));
	for (size_t i = 0; i < (len + pg - 1) / pg; i++)
		n += vec[i] & 1 ? pg : 0;
	free(vec);
	return n;
}

static int progress_calls;

static void count_progress(void *arg, const char *what, uint64_t done,
			   uint64_t total)
{
	(void)arg;
	t_assert(!strcmp(what, "touching") || !strcmp(what, "pinning"));
	t_assert(done <= total);
	progress_calls++;
}

static void check_slab_made_first(void)
{
	const uint64_t cap = 64ull << 20;
	const size_t min_slot = 128 * 1024, slot = 1 << 20;
	const size_t len = tier_host_slab_len_max(cap, min_slot);
	const size_t used = 64 * (slot + TIER_HOST_HEADROOM);
	struct tier_host_slab_config sc = { .size = sizeof(sc),
					    .len = len,
					    .numa_node = -1,
					    .progress = count_progress };
	struct tier_host_config hc = { .size = sizeof(hc),
				       .capacity_bytes = cap,
				       .slot_bytes = slot };
	struct tier_host_slab_info si;
	struct tier_host_slab *slab;
	struct tier_host_stats st;
	struct tier_host *h;
	unsigned char *base;
	size_t n;

	/* 512 slots of the smallest size, each with its headroom */
	t_assert_eq(len, cap + 512 * TIER_HOST_HEADROOM);
	t_assert_eq(tier_host_slab_len(cap, slot), used);
	t_assert_eq(tier_host_slab_len(cap, 0), 0);
	t_assert_eq(tier_host_slab_len(cap, 2 * cap), 0);
	for (size_t b = min_slot; b <= cap; b += 12 * 4096)
		t_assert(tier_host_slab_len(cap, b) <= len);

	t_ok(tier_host_slab_open(&sc, &slab));
	tier_host_slab_get_info(slab, &si);
	t_assert_eq(si.len, len);
	t_assert(!si.pinned);
	t_assert_eq(resident(si.base, si.len), len); /* touched in full */
	hc.slab = slab;
	t_ok(tier_host_open(&hc, &h));
	base = tier_host_base(h, &n);
	t_assert(base == si.base);
	t_assert_eq(n, used);
	tier_host_get_stats(h, &st);
	t_assert_eq(st.capacity_slots, 64);
	t_assert(!st.pinned);
	t_assert_eq(resident(base, used), used);
	t_assert_eq(resident(base + used, len - used), 0); /* given back */
	tier_host_close(h);

	/* pinned: the driver holds the pages, nothing is given back */
	sc.pin = fake_pin;
	sc.unpin = fake_unpin;
	sc.pin_arg = &pinned_len;
	unpins = 0;
	t_ok(tier_host_slab_open(&sc, &slab));
	t_assert_eq(pinned_len, len);
	hc.slab = slab;
	t_ok(tier_host_open(&hc, &h));
	base = tier_host_base(h, &n);
	tier_host_get_stats(h, &st);
	t_assert(st.pinned);
	t_assert_eq(resident(base + used, len - used), len - used);
	tier_host_close(h);
	t_assert_eq(unpins, 1);

	/* closed keeping its slab: the same memory, still pinned, opens a
	 * tier again (kvmmd's set-up that failed after the host tier opened
	 * tries again with it) */
	t_ok(tier_host_slab_open(&sc, &slab));
	tier_host_slab_get_info(slab, &si);
	hc.slab = slab;
	t_ok(tier_host_open(&hc, &h));
	t_assert(tier_host_close_keep_slab(h) == slab);
	t_assert_eq(unpins, 1);
	t_ok(tier_host_open(&hc, &h));
	t_assert(tier_host_base(h, &n) == si.base);
	t_assert_eq(n, used);
	tier_host_close(h);
	t_assert_eq(unpins, 2);
	t_assert(tier_host_close_keep_slab(NULL) == NULL);

	/* too small for 64 slots of 1 MiB: refused, and the slab stays the
	 * caller's (not unpinned), which closes it (ASan's leak check sees
	 * the rest) */
	sc.len = used - 4096;
	t_ok(tier_host_slab_open(&sc, &slab));
	hc.slab = slab;
	t_assert_eq(tier_host_open(&hc, &h), -EINVAL);
	t_assert_eq(unpins, 2);
	tier_host_slab_close(slab);
	t_assert_eq(unpins, 3);
	/* a bad tier config leaves the slab it was given to the caller too */
	t_ok(tier_host_slab_open(&sc, &slab));
	hc.slab = slab;
	hc.slot_bytes = 1000;
	t_assert_eq(tier_host_open(&hc, &h), -EINVAL);
	t_assert_eq(unpins, 3);
	tier_host_slab_close(slab);
	t_assert_eq(unpins, 4);

	sc.len = 0;
	t_assert_eq(tier_host_slab_open(&sc, &slab), -EINVAL);
	sc.len = len;
	sc.size = 4;
	t_assert_eq(tier_host_slab_open(&sc, &slab), -EINVAL);
	printf("slab made first: %zu of %zu bytes used, %d progress calls\n",
	       used, len, progress_calls);
	unpins = 0;
	pinned_len = 0;
}

int main(void)
{
	const size_t slot = 64 * 1024;
	struct tier_host_config cfg = {
		.size = sizeof(cfg),
		.capacity_bytes = 10 * slot + 1000, /* rounds down to 10 */
		.slot_bytes = slot,
		.numa_node = 0,
		.pin = fake_pin,
		.unpin = fake_unpin,
		.pin_arg = &pinned_len,
	};
	struct tier_host *h;
	struct tier_host_stats st;
	uint32_t s[11];
	uint64_t v;

	check_sysfs();
	check_huge_pages();
	check_slab_made_first();
	t_ok(tier_parse_size("64M", &v));
	t_assert_eq(v, 64ull << 20);
	t_ok(tier_parse_size("1.5GiB", &v));
	t_assert_eq(v, 3ull << 29);
	t_ok(tier_parse_size("4096", &v));
	t_assert_eq(v, 4096);
	t_assert_eq(tier_parse_size("12Q", &v), -EINVAL);
	t_assert_eq(tier_parse_size("", &v), -EINVAL);

	/* bad configs */
	struct tier_host_config bad = cfg;
	bad.slot_bytes = 1000;
	t_assert_eq(tier_host_open(&bad, &h), -EINVAL);
	bad = cfg;
	bad.capacity_bytes = slot - 1;
	t_assert_eq(tier_host_open(&bad, &h), -EINVAL);
	bad = cfg;
	bad.size = 4;
	t_assert_eq(tier_host_open(&bad, &h), -EINVAL);

	t_ok(tier_host_open(&cfg, &h));
	tier_host_get_stats(h, &st);
	t_assert_eq(st.capacity_slots, 10);
	t_assert_eq(st.capacity_bytes, 10 * slot);
	t_assert_eq(pinned_len, 10 * (slot + TIER_HOST_HEADROOM));
	t_assert(st.pinned);

	for (int i = 0; i < 10; i++) {
		t_ok(tier_host_alloc(h, &s[i]));
		t_assert_eq(tier_host_slot_state(h, s[i]), TIER_SLOT_FILLING);
		for (int j = 0; j < i; j++)
			t_assert(s[i] != s[j]);
		memset(tier_host_slot_addr(h, s[i]), 'a' + i, slot);
	}
	t_assert_eq(tier_host_alloc(h, &s[10]), -ENOSPC);
	/* FILLING is not readable */
	t_assert(tier_host_read_addr(h, s[3], 0) == NULL);
	t_ok(tier_host_publish(h, s[3], 0x1234, slot));
	t_assert_eq(tier_host_publish(h, s[3], 0x1234, slot), -EBUSY);
	const unsigned char *p = tier_host_read_addr(h, s[3], 0x1234);
	t_assert(p != NULL);
	t_assert_eq(p[0], 'd');
	t_assert_eq(p[slot - 1], 'd');
	t_assert(tier_host_read_addr(h, s[3], 0x9999) == NULL);
	t_assert_eq(tier_host_slot_hash(h, s[3]), 0x1234);
	/* slots do not overlap */
	t_assert_eq(((unsigned char *)tier_host_slot_addr(h, s[4]))[0], 'e');
	t_assert_eq(((unsigned char *)tier_host_slot_addr(h, s[2]))[slot - 1],
		    'c');

	tier_host_get_stats(h, &st);
	t_assert_eq(st.used_slots, 10);
	t_assert_eq(st.ready_slots, 1);
	t_assert_eq(st.alloc_failures, 1);

	t_ok(tier_host_free(h, s[3]));
	t_assert_eq(tier_host_free(h, s[3]), -ENOENT);
	t_assert(tier_host_read_addr(h, s[3], 0x1234) == NULL);
	t_assert(tier_host_slot_addr(h, s[3]) == NULL);
	t_assert_eq(tier_host_free(h, 10), -EINVAL);
	uint32_t again;
	t_ok(tier_host_alloc(h, &again));
	t_assert_eq(again, s[3]);
	s[3] = again;

#if HAVE_LIBNUMA
	{
		int status = -1;
		void *page = tier_host_slot_addr(h, s[0]);

		t_ok(move_pages(0, 1, &page, NULL, &status, 0));
		t_assert_eq(status, 0);
		t_assert_eq(st.numa_node, 0);
	}
#endif
	for (int i = 0; i < 10; i++)
		t_ok(tier_host_free(h, s[i]));
	tier_host_get_stats(h, &st);
	t_assert_eq(st.used_slots, 0);
	t_assert_eq(st.ready_slots, 0);
	t_assert_eq(st.peak_used_slots, 10);
	t_assert_eq(st.allocs, 11);
	t_assert_eq(st.frees, 11);
	tier_host_close(h);
	t_assert_eq(unpins, 1);
	printf("host slab ok\n");
	return 0;
}
