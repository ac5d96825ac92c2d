/* SPDX-License-Identifier: MIT */
/*
 * Restore plans: reload vs recompute per block, overlap, the prefix rule
 * without MSA, segments with MSA, and chunking, against hand-computed
 * times for the reference profile.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "kvmm/policy/restore_plan.h"
#include "tests/lib/test.h"

#define G POL_TIER_GPU
#define H POL_TIER_HOST
#define V POL_TIER_NVME
#define X POL_TIER_NONE

static struct pol_cost_model m;

static double chunk(uint32_t a, uint32_t b, unsigned k)
{
	double B = 512, tok = (b - a) * B;
	double fl = 13.96e9 * tok + 524288.0 * tok * (a * B + (tok + 1) / 2) *
					    (1 + 0.05 * (k - 1));

	return fl / (0.6 * 989e12) + 20e-6;
}

int main(void)
{
	struct pol_restore_plan p;
	double R = 67108864 / 55e9 + 10e-6;

	pol_cost_reference(&m);

	/* Everything on the GPU: nothing to do. */
	uint8_t all[4] = { G, G, G, G };
	t_ok(pol_restore_plan_build(&m, all, 4, NULL, &p));
	t_assert_eq(p.uses, 4);
	t_assert(p.total_s == 0);
	pol_restore_plan_free(&p);

	/*
	 * [G H H X H]: 0 used, 1 and 2 reloaded from host (R each, in
	 * order), 3 missing so 3 and 4 are recomputed (4 is cached, but
	 * without MSA it cannot follow a gap), as one chunk that starts
	 * when block 2 has arrived: total = 2R + chunk(3, 5).
	 */
	uint8_t t1[5] = { G, H, H, X, H };
	t_ok(pol_restore_plan_build(&m, t1, 5, NULL, &p));
	t_assert_eq(p.action[0], POL_RESTORE_USE);
	t_assert_eq(p.action[1], POL_RESTORE_RELOAD);
	t_assert_eq(p.action[2], POL_RESTORE_RELOAD);
	t_assert_eq(p.action[3], POL_RESTORE_RECOMPUTE);
	t_assert_eq(p.action[4], POL_RESTORE_RECOMPUTE);
	t_assert_eq(p.nchunks, 1);
	t_assert(fabs(p.total_s - (2 * R + chunk(3, 5, 1))) < 1e-12);
	t_assert(fabs(p.serial_s - p.total_s) < 1e-12); /* nothing overlaps */
	pol_restore_plan_free(&p);

	/* With MSA, block 4 is reloaded; attention pays for 2 segments. */
	struct pol_restore_opts msa = { .size = sizeof(msa),
					.allow_segments = true };
	t_ok(pol_restore_plan_build(&m, t1, 5, &msa, &p));
	t_assert_eq(p.action[4], POL_RESTORE_RELOAD);
	t_assert_eq(p.segments, 2);
	/* copies: 1, 2, 4 back to back; chunk [3,4) after block 2 */
	t_assert(fabs(p.total_s - fmax(3 * R, 2 * R + chunk(3, 4, 2))) < 1e-12);
	pol_restore_plan_free(&p);

	/*
	 * 40 blocks on NVMe (9.69 ms each, 387 ms in one queue).  As a
	 * prefix cache, recomputing the deepest block would wait for all
	 * the others (attention reads them): all 40 are reloaded.  With MSA
	 * the GPU recomputes the first blocks while the copy queue brings
	 * the later ones: faster than copying everything.
	 */
	uint8_t nv[40];
	double copy_all = 40 * (67108864 / 7e9 + 100e-6);
	memset(nv, V, sizeof(nv));
	t_ok(pol_restore_plan_build(&m, nv, 40, NULL, &p));
	t_assert_eq(p.reloads[V], 40);
	t_assert(fabs(p.total_s - copy_all) < 1e-12);
	pol_restore_plan_free(&p);
	t_ok(pol_restore_plan_build(&m, nv, 40, &msa, &p));
	t_assert(p.recomputes > 0 && p.reloads[V] > 0);
	t_assert(p.action[0] == POL_RESTORE_RECOMPUTE);
	t_assert(p.total_s < copy_all - 0.01);
	t_assert(p.total_s < p.serial_s); /* the overlap is real */
	pol_restore_plan_free(&p);

	/* Host reloads always beat recomputation: all 40 are reloaded. */
	memset(nv, H, sizeof(nv));
	t_ok(pol_restore_plan_build(&m, nv, 40, NULL, &p));
	t_assert_eq(p.reloads[H], 40);
	t_assert(fabs(p.total_s - 40 * R) < 1e-12);
	pol_restore_plan_free(&p);

	/* Chunking: 40 missing blocks, at most 16384 tokens (32 blocks). */
	memset(nv, X, sizeof(nv));
	t_ok(pol_restore_plan_build(&m, nv, 40, NULL, &p));
	t_assert_eq(p.nchunks, 2);
	t_assert_eq(p.chunks[0].count, 32);
	t_assert_eq(p.chunks[1].first, 32);
	t_assert(fabs(p.total_s - (chunk(0, 32, 1) + chunk(32, 40, 1))) <
		 1e-12);
	pol_restore_plan_free(&p);

	t_assert_eq(pol_restore_plan_build(&m, NULL, 3, NULL, &p), -EINVAL);
	return 0;
}
