// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * tier_nvme_restamp_batch() (tier_nvme_restamp.c): the header of a block
 * an operator's drop kept, written again above the drop's mark, on a
 * tier opened in this process, no kvmmd:
 *   - blocks A and B of tenant 1 and C of no known tenant (a header as
 *     files before the tenants had); a mark of every block; A restamped
 *     with a generation taken after it: its slot's generation is the new
 *     one, it still reads back; the reopen recovers A alone (B and C
 *     counted in drop_marked_slots, 0 recovered without the restamp),
 *     byte-identical, its header naming tenant 1; C restamped after a
 *     reopen that kept it stays of no known tenant (flags 0 on disk):
 *     the next tenant's mark covers it;
 *   - refused, nothing written: a freed slot or one claimed for an
 *     invalidation (-ENOENT), another hash (-ENOENT), no such slot
 *     (-EINVAL); a generation not above the slot's: 0, unchanged;
 *   - with the write held back (KVMMD_TEST_NVME_RESTAMP_DELAY_MS, the
 *     slot taken): a read of the slot waits for it (ends at least half
 *     the delay after the take, the new header accepted), a free meanwhile succeeds at once,
 *     the block is out of lookups, its slot stays used (no other block
 *     gets it) until the write ended, and is a stale copy of the free's
 *     tenant then.
 */
#include "kvmm/kvmmd/crc32c.h"
#include "kvmm/kvmmd/tier_nvme_priv.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define NSLOTS 8
#define DELAY_MS 400

static unsigned char *buf, *rbuf;

static struct tier_nvme *open_tier(const char *path, bool reformat)
{
	return nt_open_slots(path, NSLOTS, PAYLOAD, 0, reformat);
}

/* Write hash for tenant (tests/lib/nvme_tier.h): its slot. */
static uint32_t put(struct tier_nvme *t, uint64_t hash, uint32_t tenant)
{
	return nt_put(t, hash, tenant, buf, PAYLOAD);
}

/* Read hash back from its slot: 0 and its bytes checked, or the error
 * (-ENOENT: not in the index).  Its own, not nt_read_check(): a block a
 * drop took is a miss here, which that helper would fail on. */
static int get(struct tier_nvme *t, uint64_t hash)
{
	struct tier_nvme_io io = { .hash = hash, .buf = rbuf };
	uint64_t len, layout;

	if (tier_nvme_lookup(t, hash, &io.slot, &len, &layout))
		return -ENOENT;
	tier_nvme_read_batch(t, &io, 1);
	if (io.result)
		return io.result;
	for (size_t i = 0; i < PAYLOAD; i++)
		if (rbuf[i] != (unsigned char)(hash & 0xff))
			t_fail("block %#llx: byte %zu is %#x",
			       (unsigned long long)hash, i, rbuf[i]);
	return 0;
}

static int restamp(struct tier_nvme *t, uint64_t hash, uint32_t slot,
		   uint64_t generation)
{
	struct tier_nvme_io io = { .hash = hash,
				   .slot = slot,
				   .generation = generation };

	tier_nvme_restamp_batch(t, &io, 1);
	return io.result;
}

static struct tier_nvme_slot_header on_disk(const char *path, uint32_t slot)
{
	struct tier_nvme_slot_header h;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	t_assert(fd >= 0);
	t_assert_eq(pread(fd, &h, sizeof(h), NT_SLOT_OFFSET(slot, PAYLOAD)),
		    (ssize_t)sizeof(h));
	close(fd);
	return h;
}

static uint32_t slot_of(struct tier_nvme *t, uint64_t hash)
{
	uint32_t slot;

	t_ok(tier_nvme_lookup(t, hash, &slot, NULL, NULL));
	return slot;
}

static void above_the_mark(const char *path)
{
	struct tier_nvme *t = open_tier(path, true);
	uint32_t a, c;
	uint64_t g;

	a = put(t, 0xa1, 1);
	put(t, 0xb1, 1);
	c = put(t, 0xc1, 2);
	tier_nvme_close(t);
	nt_make_old(path, c, PAYLOAD);

	t = open_tier(path, false);
	t_assert_eq(nt_stats(t).recovered_slots, 3);
	t_ok(tier_nvme_mark_drop(t, true, 0, tier_nvme_drop_generation(t)));
	g = tier_nvme_next_generation(t);
	t_ok(restamp(t, 0xa1, a, g));
	t_assert_eq(tier_nvme_slot_generation(t, a), g);
	t_assert_eq(nt_stats(t).restamps, 1);
	t_ok(get(t, 0xa1));
	tier_nvme_close(t);

	t = open_tier(path, false);
	t_assert_eq(nt_stats(t).recovered_slots, 1);
	t_assert_eq(nt_stats(t).drop_marked_slots, 2);
	t_ok(get(t, 0xa1));
	t_assert_eq(tier_nvme_slot_generation(t, a), g);
	t_assert_eq(on_disk(path, a).tenant, 1);
	t_assert_eq(on_disk(path, a).flags, TIER_NVME_HDR_TENANT);
	c = put(t, 0xc1, 2); /* written again, then made tenant-less */
	tier_nvme_close(t);
	nt_make_old(path, c, PAYLOAD);

	/* a tenant-less block restamped stays tenant-less */
	t = open_tier(path, false);
	t_assert_eq(nt_stats(t).recovered_slots, 2);
	t_ok(tier_nvme_mark_drop(t, false, 5, tier_nvme_drop_generation(t)));
	t_ok(restamp(t, 0xc1, slot_of(t, 0xc1), tier_nvme_next_generation(t)));
	t_assert_eq(on_disk(path, c).flags, 0);
	tier_nvme_close(t);
	t = open_tier(path, false);
	/* above tenant 5's mark: A was below it but names tenant 1 */
	t_assert_eq(nt_stats(t).recovered_slots, 2);
	t_ok(get(t, 0xc1));
	t_ok(tier_nvme_mark_drop(t, false, 6, tier_nvme_drop_generation(t)));
	tier_nvme_close(t);
	t = open_tier(path, false);
	t_assert_eq(nt_stats(t).recovered_slots, 1); /* A: tenant 1's */
	t_ok(get(t, 0xa1));
	t_assert_eq(get(t, 0xc1), -ENOENT);
	tier_nvme_close(t);
}

static void refused(const char *path)
{
	struct tier_nvme *t = open_tier(path, true);
	uint32_t a = put(t, 0xa2, 1), b = put(t, 0xb2, 1), c = put(t, 0xc2, 1);
	uint64_t ga = tier_nvme_slot_generation(t, a);

	t_ok(tier_nvme_free(t, b));
	t_assert_eq(restamp(t, 0xb2, b, tier_nvme_next_generation(t)), -ENOENT);
	t_ok(tier_nvme_invalidate_claim(t, c, 0xc2));
	t_assert_eq(restamp(t, 0xc2, c, tier_nvme_next_generation(t)), -ENOENT);
	t_ok(tier_nvme_invalidate_unclaim(t, c));
	t_assert_eq(restamp(t, 0xdead, a, tier_nvme_next_generation(t)),
		    -ENOENT);
	t_assert_eq(restamp(t, 0xa2, NSLOTS + 5, tier_nvme_next_generation(t)),
		    -EINVAL);
	t_ok(restamp(t, 0xa2, a, ga)); /* not above: nothing to do */
	t_assert_eq(tier_nvme_slot_generation(t, a), ga);
	t_assert_eq(nt_stats(t).restamps, 0);
	t_assert_eq(nt_stats(t).restamp_errors, 0);
	tier_nvme_close(t);
}

struct held {
	struct tier_nvme *t;
	uint64_t hash;
	uint32_t slot;
	uint64_t gen;
	int result;
	struct timespec end;
};

static void *restamp_thread(void *arg)
{
	struct held *h = arg;

	h->result = restamp(h->t, h->hash, h->slot, h->gen);
	clock_gettime(CLOCK_MONOTONIC, &h->end);
	return NULL;
}

static void *read_thread(void *arg)
{
	struct held *h = arg;

	h->result = get(h->t, h->hash);
	clock_gettime(CLOCK_MONOTONIC, &h->end);
	return NULL;
}

/* Wait (5 s at most) for slot's restamp to have taken it. */
static void wait_taken(struct tier_nvme *t, uint32_t slot)
{
	for (int i = 0; i < 500; i++) {
		bool taken;

		pthread_mutex_lock(&t->lock);
		taken = t->slots[slot].restamping;
		pthread_mutex_unlock(&t->lock);
		if (taken)
			return;
		usleep(10000);
	}
	t_fail("slot %u's restamp never took it", slot);
}

static int64_t ms_between(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000 +
	       (b->tv_nsec - a->tv_nsec) / 1000000;
}

static bool stale_of(void *arg, uint64_t hash, uint32_t tenant)
{
	return hash == 0xa4 && tenant == *(uint32_t *)arg;
}

static void held_back(const char *path)
{
	char ms[16];
	struct tier_nvme *t;
	struct held rs, rd;
	struct timespec taken;
	pthread_t th_rs, th_rd;
	struct tier_nvme_stale *v;
	uint32_t a, n, left, tenant = 44;
	uint64_t used;

	snprintf(ms, sizeof(ms), "%d", DELAY_MS);
	setenv("KVMMD_TEST_NVME_RESTAMP_DELAY_MS", ms, 1);
	t = open_tier(path, true);
	unsetenv("KVMMD_TEST_NVME_RESTAMP_DELAY_MS");
	a = put(t, 0xa3, 1);

	/* a read waits for the header write, and takes the new header */
	rs = (struct held){ .t = t,
			    .hash = 0xa3,
			    .slot = a,
			    .gen = tier_nvme_next_generation(t) };
	t_assert_eq(pthread_create(&th_rs, NULL, restamp_thread, &rs), 0);
	wait_taken(t, a);
	clock_gettime(CLOCK_MONOTONIC, &taken);
	rd = (struct held){ .t = t, .hash = 0xa3 };
	t_assert_eq(pthread_create(&th_rd, NULL, read_thread, &rd), 0);
	t_assert_eq(pthread_join(th_rd, NULL), 0);
	t_assert_eq(pthread_join(th_rs, NULL), 0);
	t_ok(rs.result);
	t_ok(rd.result);
	/* its header written after DELAY_MS from the take (10 ms before
	 * taken at most); the read alone takes a few ms */
	if (ms_between(&taken, &rd.end) < DELAY_MS / 2)
		t_fail("the read ended %lld ms after the restamp took the slot, before its write (%d ms)",
		       (long long)ms_between(&taken, &rd.end), DELAY_MS);
	t_assert_eq(tier_nvme_slot_generation(t, a), rs.gen);

	/* a free meanwhile: done when the write ended */
	a = put(t, 0xa4, 1);
	used = nt_stats(t).used_slots;
	rs = (struct held){ .t = t,
			    .hash = 0xa4,
			    .slot = a,
			    .gen = tier_nvme_next_generation(t) };
	t_assert_eq(pthread_create(&th_rs, NULL, restamp_thread, &rs), 0);
	wait_taken(t, a);
	t_ok(tier_nvme_free_tenant(t, a, tenant));
	t_assert_eq(get(t, 0xa4), -ENOENT);
	t_assert_eq(nt_stats(t).used_slots, used); /* nobody else's yet */
	t_assert_eq(pthread_join(th_rs, NULL), 0);
	t_ok(rs.result);
	t_assert_eq(nt_stats(t).used_slots, used - 1);
	t_assert_eq(tier_nvme_slot_state(t, a), TIER_SLOT_FREE);
	/* its header names the block: a stale copy of the free's tenant */
	t_ok(tier_nvme_stale_claim(t, stale_of, &tenant, &v, &n, &left));
	t_assert_eq(n, 1);
	t_assert_eq(v[0].slot, a);
	t_assert_eq(on_disk(path, a).generation, rs.gen);
	t_ok(tier_nvme_invalidate_unclaim(t, a));
	free(v);
	tier_nvme_close(t);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char path[256];

	snprintf(path, sizeof(path), "%s/kvmm-tier-restamp-%d",
		 dir ? dir : "/var/tmp", (int)getpid());
	buf = t_page_alloc(PAYLOAD);
	rbuf = t_page_alloc(PAYLOAD);
	above_the_mark(path);
	unlink(path);
	refused(path);
	unlink(path);
	held_back(path);
	unlink(path);
	free(buf);
	free(rbuf);
	printf("restamps: above a drop mark, tenant-less kept so, refused, held back (a read waits, a free is deferred)\n");
	return 0;
}
