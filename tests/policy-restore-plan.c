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
	 * 40 blocks on NVMe (9.69 ms each, 387 ms in one queue).  The first
	 * blocks need no block before them: the GPU recomputes them while
	 * the copy queue brings the others.  16 recomputed (one chunk of
	 * 222.4 ms) and 24 reloaded (232.5 ms) end at 232.5 ms; one more
	 * recomputed would end at 238 ms.  With MSA the greedy finds the
	 * same plan.
	 */
	uint8_t nv[40];
	double Rv = 67108864 / 7e9 + 100e-6, copy_all = 40 * Rv;
	memset(nv, V, sizeof(nv));
	t_ok(pol_restore_plan_build(&m, nv, 40, NULL, &p));
	t_assert_eq(p.recomputes, 16);
	t_assert_eq(p.reloads[V], 24);
	for (int i = 0; i < 40; i++)
		t_assert_eq(p.action[i], i < 16 ? POL_RESTORE_RECOMPUTE :
						  POL_RESTORE_RELOAD);
	t_assert(chunk(0, 16, 1) < 24 * Rv && chunk(0, 17, 1) > 23 * Rv);
	t_assert(fabs(p.total_s - 24 * Rv) < 1e-12);
	t_assert(p.total_s < p.serial_s); /* the overlap is real */
	pol_restore_plan_free(&p);
	t_ok(pol_restore_plan_build(&m, nv, 40, &msa, &p));
	t_assert(p.recomputes > 0 && p.reloads[V] > 0);
	t_assert(p.action[0] == POL_RESTORE_RECOMPUTE);
	t_assert(p.total_s < copy_all - 0.01);
	t_assert(fabs(p.total_s - 24 * Rv) < 1e-12);
	pol_restore_plan_free(&p);

	/*
	 * An NVMe tier 8 times slower than the profile (online correction
	 * goes that far: 76.7 ms a block) with a GPU block last (lru's
	 * layout).  The greedy looked at the deepest block only, a GPU one,
	 * and reloaded all 20 (1534 ms in one queue); recomputing the first
	 * 17 while 3 come from NVMe ends at 236 ms, recomputing all 20 at
	 * 287 ms.
	 */
	{
		struct pol_cost_model slow = m;
		uint8_t t2[21];
		double Rs;

		slow.bandwidth[V] = m.bandwidth[V] / 8;
		Rs = 67108864 / slow.bandwidth[V] + 100e-6;
		memset(t2, V, 20);
		t2[20] = G;
		t_ok(pol_restore_plan_build(&slow, t2, 21, NULL, &p));
		for (int i = 0; i < 21; i++)
			t_assert_eq(p.action[i], i < 17 ?
							 POL_RESTORE_RECOMPUTE :
						 i < 20 ? POL_RESTORE_RELOAD :
							  POL_RESTORE_USE);
		t_assert(fabs(p.total_s - fmax(chunk(0, 17, 1), 3 * Rs)) <
			 1e-12);
		t_assert(p.total_s < 0.240);
		pol_restore_plan_free(&p);

		/*
		 * A 1 GB/s NVMe (67 ms a block), 10 blocks on it and the last
		 * in host memory: a host block is never worth recomputing, so
		 * the greedy stopped and reloaded 10 from NVMe (672 ms).  The
		 * head 0..8 is recomputed (117.8 ms) while block 9 comes from
		 * NVMe and 10 from host.
		 */
		uint8_t t3[11];

		slow.bandwidth[V] = 1e9;
		Rs = 67108864 / 1e9 + 100e-6;
		memset(t3, V, 10);
		t3[10] = H;
		t_ok(pol_restore_plan_build(&slow, t3, 11, NULL, &p));
		for (int i = 0; i < 11; i++)
			t_assert_eq(p.action[i], i < 9 ? POL_RESTORE_RECOMPUTE :
							 POL_RESTORE_RELOAD);
		t_assert(chunk(0, 9, 1) > Rs);
		t_assert(fabs(p.total_s - chunk(0, 9, 1)) < 1e-12);
		pol_restore_plan_free(&p);
	}

	/*
	 * A host reload (1.23 ms) beats recomputing its block (>= 12 ms),
	 * but 40 of them queue for 49 ms: the first 3 blocks (36.9 ms) are
	 * recomputed while the other 37 are copied (45.5 ms); 4 would take
	 * longer than the 36 copies left.  Serially (no overlap) every
	 * block is reloaded.
	 */
	memset(nv, H, sizeof(nv));
	t_ok(pol_restore_plan_build(&m, nv, 40, NULL, &p));
	t_assert_eq(p.recomputes, 3);
	t_assert_eq(p.reloads[H], 37);
	t_assert(p.action[2] == POL_RESTORE_RECOMPUTE &&
		 p.action[3] == POL_RESTORE_RELOAD);
	t_assert(chunk(0, 4, 1) > 36 * R);
	t_assert(fabs(p.total_s - 37 * R) < 1e-12);
	pol_restore_plan_free(&p);
	struct pol_restore_opts serial = { .size = sizeof(serial),
					   .no_overlap = true };
	t_ok(pol_restore_plan_build(&m, nv, 40, &serial, &p));
	t_assert_eq(p.reloads[H], 40);
	t_assert(fabs(p.total_s - 40 * R) < 1e-12);
	pol_restore_plan_free(&p);

	/*
	 * Host and NVMe blocks interleaved, 40 of them (H V H V ...).  The
	 * best window recomputes the first 10 while 15 + 15 are copied
	 * (145.3 ms).  Reloading every host block and recomputing the first
	 * 8 NVMe blocks between them, each as soon as the host block before
	 * it is in, ends with the 12 other NVMe copies at 116.2 ms (the last
	 * chunk is done at 113.5 ms).
	 */
	{
		uint8_t hv[40], win[40];
		double wt, Rv = 67108864 / 7e9 + 100e-6;

		for (int i = 0; i < 40; i++) {
			hv[i] = i % 2 ? V : H;
			win[i] = i < 10 ? POL_RESTORE_RECOMPUTE :
					  POL_RESTORE_RELOAD;
		}
		t_ok(pol_restore_plan_eval(&m, hv, 40, NULL, win, &wt));
		t_assert(wt > 0.145 && wt < 0.146);
		t_ok(pol_restore_plan_build(&m, hv, 40, NULL, &p));
		for (int i = 0; i < 40; i++)
			t_assert_eq(p.action[i], i < 16 && i % 2 ?
							 POL_RESTORE_RECOMPUTE :
							 POL_RESTORE_RELOAD);
		t_assert_eq(p.reloads[H], 20);
		t_assert_eq(p.reloads[V], 12);
		t_assert_eq(p.nchunks, 8);
		t_assert(p.chunks[0].first == 1 && p.chunks[0].count == 1);
		t_assert(fabs(p.chunks[0].start_s - R) < 1e-12);
		t_assert(p.chunks[7].end_s < 12 * Rv);
		t_assert(fabs(p.total_s - 12 * Rv) < 1e-12);
		t_assert(p.total_s < 0.81 * wt);
		pol_restore_plan_free(&p);

		/*
		 * Serially, with NVMe 8 times slower (76.7 ms a block): 10
		 * blocks H V H V ..., every host block reloaded and every
		 * NVMe one recomputed, each in its chunk: 72.8 ms; the best
		 * window (recompute 0..7, reload 8, recompute 9) 119.3 ms.
		 */
		struct pol_cost_model slow = m;
		struct pol_restore_opts ser = { .size = sizeof(ser),
						.no_overlap = true };
		double want = 5 * R;

		slow.bandwidth[V] = m.bandwidth[V] / 8;
		for (int i = 0; i < 10; i++)
			win[i] = i == 8 ? POL_RESTORE_RELOAD :
					  POL_RESTORE_RECOMPUTE;
		t_ok(pol_restore_plan_eval(&slow, hv, 10, &ser, win, &wt));
		t_ok(pol_restore_plan_build(&slow, hv, 10, &ser, &p));
		for (int i = 0; i < 10; i++) {
			t_assert_eq(p.action[i], i % 2 ? POL_RESTORE_RECOMPUTE :
							 POL_RESTORE_RELOAD);
			if (i % 2)
				want += chunk(i, i + 1, 1);
		}
		t_assert(fabs(p.total_s - want) < 1e-12);
		t_assert(want < 0.073 && wt > 0.119);
		pol_restore_plan_free(&p);
	}

	/* Chunking: 40 missing blocks, at most 16384 tokens (32 blocks). */
	memset(nv, X, sizeof(nv));
	t_ok(pol_restore_plan_build(&m, nv, 40, NULL, &p));
	t_assert_eq(p.nchunks, 2);
	t_assert_eq(p.chunks[0].count, 32);
	t_assert_eq(p.chunks[1].first, 32);
	t_assert(fabs(p.total_s - (chunk(0, 32, 1) + chunk(32, 40, 1))) <
		 1e-12);
	pol_restore_plan_free(&p);

	/*
	 * A model made by hand with no compute rate (pol_cost_parse()
	 * refuses one): serially no plan has a finite time.  Block 1 is in
	 * no tier, so it is recomputed all the same, never "reloaded"
	 * (the serial walk back took a reload for it, from an unset state).
	 */
	{
		struct pol_cost_model dead = m;
		struct pol_restore_opts ser = { .size = sizeof(ser),
						.no_overlap = true };
		uint8_t hx[2] = { H, X };

		dead.peak_flops = 0;
		t_ok(pol_restore_plan_build(&dead, hx, 2, &ser, &p));
		t_assert_eq(p.action[1], POL_RESTORE_RECOMPUTE);
		t_assert(isinf(p.total_s));
		pol_restore_plan_free(&p);
	}

	t_assert_eq(pol_restore_plan_build(&m, NULL, 3, NULL, &p), -EINVAL);
	return 0;
}
