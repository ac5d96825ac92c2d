// SPDX-License-Identifier: MIT
/*
 * Host tier slab: placement, first touch, optional pinning and a free-slot
 * stack.  See tier_host.h for the slot state machine.
 */
#include "tier_host.h"

#include "vmm/vmm.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if HAVE_LIBNUMA
#include <numa.h>
#endif

struct tier_host_slot {
	enum tier_slot_state state;
	uint64_t hash;
	uint64_t length;
};

struct tier_host {
	pthread_mutex_t lock; /* protects slots, free stack and counters */
	unsigned char *base;
	size_t len;
	size_t slot_bytes;
	size_t stride; /* headroom + slot_bytes */
	uint32_t nslots;
	bool numa_allocated; /* base came from numa_alloc_onnode */
	int node;
	bool pinned;
	int (*unpin)(void *arg, void *addr);
	void *pin_arg;
	struct tier_host_slot *slots;
	uint32_t *free_stack;
	uint32_t nfree;
	struct tier_host_stats st;
};

const char *tier_slot_state_string(enum tier_slot_state state)
{
	switch (state) {
	case TIER_SLOT_FREE:
		return "free";
	case TIER_SLOT_FILLING:
		return "filling";
	case TIER_SLOT_READY:
		return "ready";
	}
	return "unknown";
}

int tier_parse_size(const char *s, uint64_t *bytes)
{
	char *end;
	double v;
	uint64_t mul = 1;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		mul = 1ull << 10;
		break;
	case 'M':
		mul = 1ull << 20;
		break;
	case 'G':
		mul = 1ull << 30;
		break;
	case 'T':
		mul = 1ull << 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end) {
		end++;
		if (toupper((unsigned char)*end) == 'I')
			end++;
		if (toupper((unsigned char)*end) == 'B')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (v * (double)mul > 1.8e19)
		return -ERANGE;
	*bytes = (uint64_t)(v * (double)mul);
	return 0;
}

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
static int pick_node(const struct tier_host_config *cfg, char *why,
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

struct touch_arg {
	unsigned char *base;
	size_t len;
	int node;
};

/* Runs bound to the slab's node so the kernel places each page there on
 * the first write, whatever the allocation policy of the caller. */
static void *touch_thread(void *p)
{
	struct touch_arg *a = p;
	long pg = sysconf(_SC_PAGESIZE);

#if HAVE_LIBNUMA
	if (a->node >= 0 && numa_available() >= 0)
		(void)numa_run_on_node(a->node);
#endif
	for (size_t off = 0; off < a->len; off += (size_t)pg)
		a->base[off] = 0;
	return NULL;
}

static int slab_alloc(struct tier_host *h, int node)
{
#if HAVE_LIBNUMA
	if (numa_available() >= 0) {
		if (node > numa_max_node()) {
			vmm_log(VMM_LOG_WARN,
				"tier_host: NUMA node %d does not exist; using node 0",
				node);
			node = 0;
		}
		h->base = numa_alloc_onnode(h->len, node);
		if (!h->base)
			return -ENOMEM;
		h->numa_allocated = true;
		h->node = node;
		return 0;
	}
#endif
	(void)node;
	h->base = mmap(NULL, h->len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h->base == MAP_FAILED) {
		h->base = NULL;
		return -ENOMEM;
	}
	h->node = -1;
	return 0;
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
static void slab_want_huge_pages(struct tier_host *h)
{
	const uintptr_t huge = 2u << 20;
	uintptr_t a = ((uintptr_t)h->base + huge - 1) & ~(huge - 1);
	uintptr_t end = ((uintptr_t)h->base + h->len) & ~(huge - 1);

	if (end > a)
		(void)madvise((void *)a, end - a, MADV_HUGEPAGE);
}

static void slab_free(struct tier_host *h)
{
#if HAVE_LIBNUMA
	if (h->numa_allocated) {
		numa_free(h->base, h->len);
		return;
	}
#endif
	munmap(h->base, h->len);
}

int tier_host_open(const struct tier_host_config *cfg, struct tier_host **out)
{
	struct tier_host *h;
	struct touch_arg ta;
	pthread_t th;
	uint64_t nslots;
	char why[64];
	int r;

	if (!cfg || cfg->size < sizeof(*cfg) || !cfg->slot_bytes ||
	    cfg->slot_bytes % 4096)
		return -EINVAL;
	nslots = cfg->capacity_bytes / cfg->slot_bytes;
	if (nslots == 0 || nslots > UINT32_MAX)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	h->slot_bytes = cfg->slot_bytes;
	h->nslots = (uint32_t)nslots;
	h->stride = TIER_HOST_HEADROOM + cfg->slot_bytes;
	h->len = (size_t)nslots * h->stride;
	h->slots = calloc(nslots, sizeof(*h->slots));
	h->free_stack = calloc(nslots, sizeof(*h->free_stack));
	if (!h->slots || !h->free_stack) {
		r = -ENOMEM;
		goto err_free_meta;
	}
	r = slab_alloc(h, pick_node(cfg, why, sizeof(why)));
	if (r)
		goto err_free_meta;
	slab_want_huge_pages(h);
	ta = (struct touch_arg){ h->base, h->len, h->node };
	if (pthread_create(&th, NULL, touch_thread, &ta) == 0)
		pthread_join(th, NULL);
	else
		touch_thread(&ta);
	if (cfg->pin) {
		r = cfg->pin(cfg->pin_arg, h->base, h->len);
		if (r) {
			vmm_log(VMM_LOG_ERR,
				"tier_host: pinning %zu bytes for DMA failed: %s",
				h->len, strerror(-r));
			goto err_free_slab;
		}
		h->pinned = true;
		h->unpin = cfg->unpin;
		h->pin_arg = cfg->pin_arg;
	}
	/* Lowest slot on top so allocation order is predictable. */
	for (uint32_t i = 0; i < h->nslots; i++)
		h->free_stack[i] = h->nslots - 1 - i;
	h->nfree = h->nslots;
	h->st.slot_bytes = h->slot_bytes;
	h->st.capacity_slots = h->nslots;
	h->st.capacity_bytes = (uint64_t)h->nslots * h->slot_bytes;
	h->st.numa_node = h->node;
	h->st.pinned = h->pinned;
	vmm_log(VMM_LOG_INFO,
		"tier_host: %u slots of %zu bytes (%zu MiB) on NUMA node %d (%s)%s",
		h->nslots, h->slot_bytes, h->len >> 20, h->node,
		h->node < 0 ? "no libnuma" : why, h->pinned ? ", pinned" : "");
	*out = h;
	return 0;

err_free_slab:
	slab_free(h);
err_free_meta:
	free(h->free_stack);
	free(h->slots);
	pthread_mutex_destroy(&h->lock);
	free(h);
	return r;
}

void tier_host_close(struct tier_host *h)
{
	if (!h)
		return;
	if (h->nfree != h->nslots)
		vmm_log(VMM_LOG_WARN,
			"tier_host: %u slots still in use at close",
			h->nslots - h->nfree);
	if (h->pinned && h->unpin)
		h->unpin(h->pin_arg, h->base);
	slab_free(h);
	free(h->free_stack);
	free(h->slots);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

int tier_host_alloc(struct tier_host *h, uint32_t *slot)
{
	uint32_t s;

	pthread_mutex_lock(&h->lock);
	if (h->nfree == 0) {
		h->st.alloc_failures++;
		pthread_mutex_unlock(&h->lock);
		return -ENOSPC;
	}
	s = h->free_stack[--h->nfree];
	h->slots[s] = (struct tier_host_slot){ .state = TIER_SLOT_FILLING };
	h->st.allocs++;
	h->st.used_slots++;
	if (h->st.used_slots > h->st.peak_used_slots)
		h->st.peak_used_slots = h->st.used_slots;
	pthread_mutex_unlock(&h->lock);
	*slot = s;
	return 0;
}

int tier_host_publish(struct tier_host *h, uint32_t slot, uint64_t hash,
		      uint64_t length)
{
	int r = 0;

	if (slot >= h->nslots || length > h->slot_bytes)
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	if (h->slots[slot].state != TIER_SLOT_FILLING) {
		r = -EBUSY;
	} else {
		h->slots[slot].state = TIER_SLOT_READY;
		h->slots[slot].hash = hash;
		h->slots[slot].length = length;
		h->st.ready_slots++;
	}
	pthread_mutex_unlock(&h->lock);
	return r;
}

int tier_host_free(struct tier_host *h, uint32_t slot)
{
	if (slot >= h->nslots)
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	if (h->slots[slot].state == TIER_SLOT_FREE) {
		pthread_mutex_unlock(&h->lock);
		return -ENOENT;
	}
	if (h->slots[slot].state == TIER_SLOT_READY)
		h->st.ready_slots--;
	h->slots[slot] = (struct tier_host_slot){ .state = TIER_SLOT_FREE };
	h->free_stack[h->nfree++] = slot;
	h->st.used_slots--;
	h->st.frees++;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

void *tier_host_slot_addr(struct tier_host *h, uint32_t slot)
{
	void *p = NULL;

	if (slot >= h->nslots)
		return NULL;
	pthread_mutex_lock(&h->lock);
	if (h->slots[slot].state != TIER_SLOT_FREE)
		p = h->base + (size_t)slot * h->stride + TIER_HOST_HEADROOM;
	pthread_mutex_unlock(&h->lock);
	return p;
}

const void *tier_host_read_addr(struct tier_host *h, uint32_t slot,
				uint64_t hash)
{
	const void *p = NULL;

	if (slot >= h->nslots)
		return NULL;
	pthread_mutex_lock(&h->lock);
	if (h->slots[slot].state == TIER_SLOT_READY &&
	    (hash == 0 || h->slots[slot].hash == hash))
		p = h->base + (size_t)slot * h->stride + TIER_HOST_HEADROOM;
	pthread_mutex_unlock(&h->lock);
	return p;
}

enum tier_slot_state tier_host_slot_state(struct tier_host *h, uint32_t slot)
{
	enum tier_slot_state s;

	if (slot >= h->nslots)
		return TIER_SLOT_FREE;
	pthread_mutex_lock(&h->lock);
	s = h->slots[slot].state;
	pthread_mutex_unlock(&h->lock);
	return s;
}

uint64_t tier_host_slot_hash(struct tier_host *h, uint32_t slot)
{
	uint64_t v;

	if (slot >= h->nslots)
		return 0;
	pthread_mutex_lock(&h->lock);
	v = h->slots[slot].hash;
	pthread_mutex_unlock(&h->lock);
	return v;
}

void *tier_host_base(struct tier_host *h, size_t *len)
{
	if (len)
		*len = h->len;
	return h->base;
}

void tier_host_get_stats(struct tier_host *h, struct tier_host_stats *st)
{
	pthread_mutex_lock(&h->lock);
	*st = h->st;
	pthread_mutex_unlock(&h->lock);
}
