// SPDX-License-Identifier: MIT
/*
 * NVMe tier: a slot set aside by tier_nvme_reserve() goes to a reserved
 * write and to no other.  With 4 slots, 1 written and 3 reserved, a write
 * without a reservation finds the tier full (-ENOSPC) and a fourth
 * reservation is refused; reserved writes get the slots, and a reserved
 * write that is not written (a hash already on disk, a bad buffer) uses
 * its reservation up all the same; tier_nvme_unreserve() gives one back.
 * A reserved write whose batch cannot even be set up (no memory for its
 * bookkeeping: an address-space limit here) gives its reservation back
 * too; before, that slot was set aside for good.
 * A write stamped with a generation its caller took earlier
 * (tier_nvme_next_generation()) keeps it.  A hash on disk in another
 * layout is not a dedup hit (-EEXIST).
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define NSLOTS 4

static struct tier_nvme_io wio(unsigned char *buf, uint64_t hash,
			       bool reserved);

#if !defined(__SANITIZE_ADDRESS__)
/* VmSize of this process in bytes, 0 if unknown (reserved_write_nomem(),
 * which an ASan build does not run). */
static uint64_t vm_size(void)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}
#endif

/*
 * A reserved write in a batch whose bookkeeping cannot be allocated: every
 * io fails -ENOMEM and the reservation is given back.  The allocation is
 * made to fail with RLIMIT_AS just above what the process maps (not under
 * ASan, whose shadow memory needs the address space).
 */
static void reserved_write_nomem(struct tier_nvme *t, unsigned char *buf)
{
#if defined(__SANITIZE_ADDRESS__)
	(void)t;
	(void)buf;
	printf("(ASan build: the -ENOMEM case is not run)\n");
#else
	enum { N = 1u << 20 }; /* bookkeeping of 4-8 MiB per array */
	struct tier_nvme_io *ios = calloc(N, sizeof(*ios));
	struct tier_nvme_stats st;
	struct rlimit old, lim;
	int failed;

	t_assert(ios);
	for (unsigned int i = 0; i < N; i++)
		ios[i] = wio(buf, 0x200 + i, false);
	ios[0].reserved = true;
	t_ok(tier_nvme_reserve(t));
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.reserved_slots, 1);
	t_ok(getrlimit(RLIMIT_AS, &old));
	lim = old;
	lim.rlim_cur = vm_size() + (1u << 20);
	t_assert(lim.rlim_cur > (1u << 20));
	t_ok(setrlimit(RLIMIT_AS, &lim));
	failed = tier_nvme_write_batch(t, ios, N);
	t_ok(setrlimit(RLIMIT_AS, &old));
	t_assert_eq(failed, N);
	t_assert_eq(ios[0].result, -ENOMEM);
	t_assert_eq(ios[N - 1].result, -ENOMEM);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.reserved_slots, 0);
	free(ios);
#endif
}

static struct tier_nvme_io wio(unsigned char *buf, uint64_t hash, bool reserved)
{
	memset(buf, (int)(hash & 0xff), PAYLOAD);
	return (struct tier_nvme_io){ .hash = hash,
				      .layout_id = 1,
				      .buf = buf,
				      .length = PAYLOAD,
				      .reserved = reserved };
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char path[256];
	unsigned char *buf = NULL;
	struct tier_nvme *t;
	struct tier_nvme_stats st;
	struct tier_nvme_io io[2];

	if (!dir)
		dir = "/var/tmp";
	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-reserve-%d", dir,
		 getpid());
	buf = t_page_alloc(2 * PAYLOAD);
	struct tier_nvme_config cfg = {
		.size = sizeof(cfg),
		.path = path,
		.capacity_bytes = NT_CAPACITY(NSLOTS, PAYLOAD),
		.payload_bytes = PAYLOAD,
	};
	t = nt_open(cfg, NULL, NULL);

	io[0] = wio(buf, 0x100, false);
	t_assert_eq(tier_nvme_write_batch(t, io, 1), 0);
	for (int i = 0; i < NSLOTS - 1; i++)
		t_ok(tier_nvme_reserve(t));
	t_assert_eq(tier_nvme_reserve(t), -ENOSPC);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, 1);
	t_assert_eq(st.reserved_slots, NSLOTS - 1);

	/* the free slots are all set aside */
	io[0] = wio(buf, 0x101, false);
	t_assert_eq(tier_nvme_write_batch(t, io, 1), 1);
	t_assert_eq(io[0].result, -ENOSPC);

	/* two reserved writes in one batch get two of them, with the
	 * generations their caller took, whatever order they run in */
	io[0] = wio(buf, 0x102, true);
	io[1] = wio(buf + PAYLOAD, 0x103, true);
	io[1].generation = tier_nvme_next_generation(t);
	io[0].generation = tier_nvme_next_generation(t);
	t_assert_eq(io[0].generation, io[1].generation + 1);
	t_assert_eq(tier_nvme_write_batch(t, io, 2), 0);
	t_assert_eq(tier_nvme_slot_generation(t, io[0].slot), io[0].generation);
	t_assert_eq(tier_nvme_slot_generation(t, io[1].slot), io[1].generation);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, 3);
	t_assert_eq(st.reserved_slots, 1);

	/* a reserved write of a hash on disk is a dedup hit: its
	 * reservation is used up, its slot free for anyone */
	io[0] = wio(buf, 0x100, true);
	t_assert_eq(tier_nvme_write_batch(t, io, 1), 0);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.dedup_hits, 1);
	t_assert_eq(st.reserved_slots, 0);
	/* the same hash in another layout is other bytes: not a hit */
	io[0] = wio(buf, 0x100, false);
	io[0].layout_id = 2;
	t_assert_eq(tier_nvme_write_batch(t, io, 1), 1);
	t_assert_eq(io[0].result, -EEXIST);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.dedup_hits, 1);
	t_ok(tier_nvme_reserve(t));
	tier_nvme_unreserve(t);
	io[0] = wio(buf, 0x104, false);
	t_assert_eq(tier_nvme_write_batch(t, io, 1), 0);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.used_slots, NSLOTS);

	/* full: nothing to reserve; a slot freed can be, and a reserved
	 * write refused for a bad buffer gives it up too */
	t_assert_eq(tier_nvme_reserve(t), -ENOSPC);
	t_ok(tier_nvme_free(t, io[0].slot));
	t_ok(tier_nvme_reserve(t));
	io[0] = wio(buf, 0x105, true);
	io[0].buf = buf + 1;
	t_assert_eq(tier_nvme_write_batch(t, io, 1), 1);
	t_assert_eq(io[0].result, -EINVAL);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.reserved_slots, 0);
	t_assert_eq(st.used_slots, NSLOTS - 1);

	/* a batch that cannot be set up gives its reservation back: the
	 * last free slot can be reserved again and written */
	reserved_write_nomem(t, buf);
	t_ok(tier_nvme_reserve(t));
	io[0] = wio(buf, 0x106, true);
	t_assert_eq(tier_nvme_write_batch(t, io, 1), 0);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.reserved_slots, 0);
	t_assert_eq(st.used_slots, NSLOTS);

	tier_nvme_close(t);
	unlink(path);
	free(buf);
	printf("NVMe slot reservations ok\n");
	return 0;
}
