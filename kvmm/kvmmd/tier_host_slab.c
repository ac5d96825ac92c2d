// SPDX-License-Identifier: MIT
/*
 * Host tier slab: the memory under the host tier's slots, placed on a NUMA
 * node, touched by threads bound to that node and optionally pinned for
 * DMA.  Apart from the slots (tier_host.c) so that the daemon can make it
 * at start, before the block size is known.
 */
#include "tier_host.h"

#include "vmm/vmm.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if HAVE_LIBNUMA
#include <numa.h>
#endif

/* Above this a pin is announced through the progress hook. */
#define SLAB_PIN_ANNOUNCE (1ull << 30)
/* The most threads that touch a slab, and the least each gets: past
 * about 8 the memory controller, not the page faults, is the limit. */
#define SLAB_TOUCH_THREADS 8
#define SLAB_TOUCH_MIN_SHARE (256ull << 20)
/* Bytes a touching thread does between updates of the shared count. */
#define SLAB_TOUCH_STEP (64ull << 20)

struct tier_host_slab {
	unsigned char *base;
	size_t len;
	bool numa_allocated; /* base came from numa_alloc_onnode */
	int node;
	bool pinned;
	int (*unpin)(void *arg, void *addr);
	void *pin_arg;
	char why[64];
};

static bool pci_addr_valid(const char *a)
{
	size_t n = strlen(a);

	/* dddd:bb:dd.f or bb:dd.f */
	if (n != 12 && n != 7)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = a[i];
		size_t j = n == 12 ? i : i + 5;

		if (j == 4 || j == 7) {
			if (c != ':')
				return false;
		} else if (j == 10) {
			if (c != '.')
				return false;
		} else if (!isxdigit((unsigned char)c)) {
			return false;
		}
	}
	return true;
}

int tier_host_pci_numa_node(const char *sysfs_root, const char *pci_addr,
			    int *node)
{
	char path[512], buf[32], addr[32];
	int fd;
	ssize_t n;
	long v;
	char *end;

	if (!pci_addr || !pci_addr_valid(pci_addr))
		return -EINVAL;
	snprintf(addr, sizeof(addr), "%s%s",
		 strlen(pci_addr) == 7 ? "0000:" : "", pci_addr);
	for (char *p = addr; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/numa_node",
		 sysfs_root ? sysfs_root : "", addr);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = '\0';
	v = strtol(buf, &end, 10);
	if (end == buf)
		return -EIO;
	if (v < 0)
		return -ENODATA; /* no affinity: the caller's fallback */
	*node = (int)v;
	return 0;
}

/* The slab's node; why (for the log) says whose: asked for, the GPU's or
 * the CPU's. */
static int pick_node(const struct tier_host_slab_config *cfg, char *why,
		     size_t why_len)
{
	int node;

	if (cfg->numa_node >= 0) {
		snprintf(why, why_len, "asked for");
		return cfg->numa_node;
	}
	if (cfg->pci_addr && cfg->pci_addr[0]) {
		int r = tier_host_pci_numa_node(NULL, cfg->pci_addr, &node);

		if (r == 0) {
			snprintf(why, why_len, "the GPU's, %s", cfg->pci_addr);
			return node;
		}
		vmm_log(VMM_LOG_WARN,
			"tier_host: NUMA node of GPU %s unknown (%s); using the current CPU's node",
			cfg->pci_addr,
			r == -ENODATA ? "sysfs says no affinity" :
					strerror(-r));
	}
	snprintf(why, why_len, "the CPU's");
#if HAVE_LIBNUMA
	if (numa_available() >= 0) {
		int cpu = sched_getcpu();

		node = cpu >= 0 ? numa_node_of_cpu(cpu) : 0;
		return node < 0 ? 0 : node;
	}
#endif
	return 0;
}

int tier_host_max_node(void)
{
#if HAVE_LIBNUMA
	if (numa_available() >= 0)
		return numa_max_node();
#endif
	return 0;
}

static int slab_alloc(struct tier_host_slab *s, int node)
{
#if HAVE_LIBNUMA
	if (numa_available() >= 0) {
		if (node > numa_max_node()) {
			vmm_log(VMM_LOG_WARN,
				"tier_host: NUMA node %d does not exist; using node 0",
				node);
			node = 0;
		}
		s->base = numa_alloc_onnode(s->len, node);
		if (!s->base)
			return -ENOMEM;
		s->numa_allocated = true;
		s->node = node;
		return 0;
	}
#endif
	(void)node;
	s->base = mmap(NULL, s->len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->base == MAP_FAILED) {
		s->base = NULL;
		return -ENOMEM;
	}
	s->node = -1;
	return 0;
}

static void slab_free(struct tier_host_slab *s)
{
#if HAVE_LIBNUMA
	if (s->numa_allocated) {
		numa_free(s->base, s->len);
		return;
	}
#endif
	munmap(s->base, s->len);
}

/*
 * Ask for 2 MiB pages before the first touch, so the touch faults them in
 * huge: fewer TLB misses on block copies, and a block's DMA (NVMe I/O
 * from a registered slab, cuMemHostRegister'd copies) is one or two
 * segments instead of one per 4 KiB page.  Done afterwards instead (the
 * NVMe tier collapses its registered region), the conversion costs
 * seconds per GiB at start-up.  Best effort: with transparent huge pages
 * off the slab stays in 4 KiB pages and works the same.
 */
static void slab_want_huge_pages(struct tier_host_slab *s)
{
	const uintptr_t huge = 2u << 20;
	uintptr_t a = ((uintptr_t)s->base + huge - 1) & ~(huge - 1);
	uintptr_t end = ((uintptr_t)s->base + s->len) & ~(huge - 1);

	if (end > a)
		(void)madvise((void *)a, end - a, MADV_HUGEPAGE);
}

struct touch_share {
	unsigned char *base;
	size_t len;
	int node;
	_Atomic uint64_t *done; /* bytes touched by all the threads */
	pthread_t thread;
	bool started;
};

/* Runs bound to the slab's node so the kernel places each page there on
 * the first write, whatever the allocation policy of the caller. */
static void *touch_thread(void *p)
{
	struct touch_share *t = p;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t counted = 0;

#if HAVE_LIBNUMA
	if (t->node >= 0 && numa_available() >= 0)
		(void)numa_run_on_node(t->node);
#endif
	for (size_t off = 0; off < t->len; off += pg) {
		t->base[off] = 0;
		if (off + pg - counted >= SLAB_TOUCH_STEP) {
			atomic_fetch_add(t->done, off + pg - counted);
			counted = off + pg;
		}
	}
	atomic_fetch_add(t->done, t->len - counted);
	return NULL;
}

static unsigned int touch_threads(const struct tier_host_slab *s)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t by_size = s->len / SLAB_TOUCH_MIN_SHARE;

#if HAVE_LIBNUMA
	if (s->node >= 0 && numa_available() >= 0) {
		struct bitmask *m = numa_allocate_cpumask();

		if (m && numa_node_to_cpus(s->node, m) == 0) {
			long n = (long)numa_bitmask_weight(m);

			if (n > 0)
				cpus = n;
		}
		if (m)
			numa_free_cpumask(m);
	}
#endif
	if (cpus < 1)
		cpus = 1;
	if (cpus > SLAB_TOUCH_THREADS)
		cpus = SLAB_TOUCH_THREADS;
	if (by_size < 1)
		by_size = 1;
	return (unsigned int)(by_size < (uint64_t)cpus ? by_size :
							 (uint64_t)cpus);
}

/*
 * Fault every page in, in shares cut on 2 MiB boundaries (so no huge page
 * is split between two threads), one thread per share up to the node's
 * CPUs: one thread writes a few GB/s of fresh pages, a slab of hundreds
 * of GiB wants them all.  Reports progress every progress_ms (a second).
 */
static void slab_touch(struct tier_host_slab *s,
		       const struct tier_host_slab_config *cfg)
{
	struct touch_share share[SLAB_TOUCH_THREADS];
	unsigned int n = touch_threads(s);
	size_t cut = ((s->len / n) + (2u << 20) - 1) &
		     ~(size_t)((2u << 20) - 1);
	_Atomic uint64_t done = 0;
	unsigned int every_ms = cfg->progress_ms ? cfg->progress_ms : 1000;
	unsigned int i;

	memset(share, 0, sizeof(share));
	for (i = 0; i < n; i++) {
		size_t off = (size_t)i * cut;

		if (off >= s->len)
			break;
		share[i].base = s->base + off;
		share[i].len = s->len - off < cut ? s->len - off : cut;
		share[i].node = s->node;
		share[i].done = &done;
		/* a thread that cannot start: this one does its share */
		share[i].started = pthread_create(&share[i].thread, NULL,
						  touch_thread, &share[i]) == 0;
		if (!share[i].started)
			touch_thread(&share[i]);
	}
	n = i;
	for (i = 0; i < n; i++) {
		if (!share[i].started)
			continue;
		for (;;) {
			struct timespec when;

			clock_gettime(CLOCK_REALTIME, &when);
			when.tv_nsec += (long)(every_ms % 1000) * 1000000;
			when.tv_sec +=
				every_ms / 1000 + when.tv_nsec / 1000000000;
			when.tv_nsec %= 1000000000;
			if (pthread_timedjoin_np(share[i].thread, NULL,
						 &when) != ETIMEDOUT)
				break;
			if (cfg->progress)
				cfg->progress(cfg->progress_arg, "touching",
					      atomic_load(&done), s->len);
		}
	}
}

/* Whole slots of slot_bytes in capacity_bytes, as many as a tier may have. */
static uint64_t slots_in(uint64_t capacity_bytes, size_t slot_bytes)
{
	uint64_t n = capacity_bytes / slot_bytes;

	return n > UINT32_MAX ? UINT32_MAX : n;
}

size_t tier_host_slab_len(uint64_t capacity_bytes, size_t slot_bytes)
{
	if (!slot_bytes)
		return 0;
	return (size_t)slots_in(capacity_bytes, slot_bytes) *
	       (TIER_HOST_HEADROOM + slot_bytes);
}

size_t tier_host_slab_len_max(uint64_t capacity_bytes, size_t min_slot_bytes)
{
	if (!min_slot_bytes)
		return 0;
	/*
	 * n slots of b bytes use n(b + H) <= C + (C / b) H: the payloads
	 * never pass the capacity, the headroom grows with the number of
	 * slots, largest for the smallest slot.
	 */
	return (size_t)capacity_bytes +
	       (size_t)slots_in(capacity_bytes, min_slot_bytes) *
		       TIER_HOST_HEADROOM;
}

int tier_host_slab_open(const struct tier_host_slab_config *cfg,
			struct tier_host_slab **out)
{
	struct tier_host_slab *s;
	int r;

	if (!cfg || cfg->size < sizeof(*cfg) || !cfg->len ||
	    cfg->len > SIZE_MAX - 4096)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->len = (cfg->len + 4095) & ~(size_t)4095;
	r = slab_alloc(s, pick_node(cfg, s->why, sizeof(s->why)));
	if (r)
		goto err_free;
	slab_want_huge_pages(s);
	slab_touch(s, cfg);
	if (cfg->pin) {
		if (s->len >= SLAB_PIN_ANNOUNCE && cfg->progress)
			cfg->progress(cfg->progress_arg, "pinning", 0, s->len);
		r = cfg->pin(cfg->pin_arg, s->base, s->len);
		if (r) {
			vmm_log(VMM_LOG_ERR,
				"tier_host: pinning %zu bytes for DMA failed: %s",
				s->len, strerror(-r));
			goto err_free_slab;
		}
		s->pinned = true;
		s->unpin = cfg->unpin;
		s->pin_arg = cfg->pin_arg;
	}
	*out = s;
	return 0;

err_free_slab:
	slab_free(s);
err_free:
	free(s);
	return r;
}

void tier_host_slab_close(struct tier_host_slab *s)
{
	if (!s)
		return;
	if (s->pinned && s->unpin)
		s->unpin(s->pin_arg, s->base);
	slab_free(s);
	free(s);
}

void tier_host_slab_get_info(const struct tier_host_slab *s,
			     struct tier_host_slab_info *info)
{
	info->base = s->base;
	info->len = s->len;
	info->node = s->node;
	info->pinned = s->pinned;
	snprintf(info->why, sizeof(info->why), "%s", s->why);
}

void tier_host_slab_trim(struct tier_host_slab *s, size_t off)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	off = (off + pg - 1) & ~(pg - 1);
	/* pinned pages stay the driver's until unpinned: nothing to gain */
	if (s->pinned || off >= s->len)
		return;
	(void)madvise(s->base + off, s->len - off, MADV_DONTNEED);
}
