// SPDX-License-Identifier: MIT
/*
 * A build without <sys/sdt.h> (HAVE_SDT=0): every probe compiles to
 * nothing, KVMM_PROBE_ENABLED() is a constant 0, so guarded argument code
 * is never run, and the shm recorders still work.  This file forces
 * HAVE_SDT to 0 whatever configure found.
 */
#undef HAVE_SDT
#define HAVE_SDT 0
#include <stdio.h>
#include <sys/mman.h>

#include "ebpf/probes.h"
#include "ebpf/telemetry_shm.h"
#include "tests/lib/test.h"

static int built;

static uint32_t build_args(struct kvmm_access_rec *r)
{
	built++;
	r->hash = 42;
	r->seq = 1;
	r->tier = KVMM_TEL_TIER_HOST;
	r->flags = 0;
	return 1;
}

int main(void)
{
	size_t size = kvmm_tel_shm_size(64);
	struct kvmm_tel_shm *shm;
	struct kvmm_access_rec r;

	_Static_assert(!KVMM_PROBE_ENABLED(access), "constant 0 without sdt");
	if (KVMM_PROBE_ENABLED(access))
		kvmm_probe_access(1, &r, build_args(&r));
	t_assert_eq(built, 0);
	kvmm_probe_kernel(KVMM_TEL_ATTENTION, 1, 1, 1);
	kvmm_probe_evict(1, 0, 1);

	shm = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	t_assert(shm != MAP_FAILED);
	t_ok(kvmm_tel_shm_init(shm, size));
	t_assert(!kvmm_tel_want(shm, access)); /* not enabled by a daemon */
	shm->enabled = 1;
	t_assert(kvmm_tel_want(shm, access));
	kvmm_tel_access(shm, 1, &r, build_args(&r));
	kvmm_tel_restore(shm, 42, KVMM_TEL_TIER_HOST, 4096, 3000);
	t_assert_eq(built, 1);
	t_assert_eq(shm->counters.accesses, 1);
	t_assert_eq(shm->counters.tier_accesses[KVMM_TEL_TIER_HOST], 1);
	t_assert_eq(shm->counters.events[KVMM_TEL_RESTORE], 1);
	printf("ok: probes compile to nothing without sdt.h\n");
	return 0;
}
