/* SPDX-License-Identifier: MIT */
/*
 * Cost-model formulas against hand-computed values for the reference
 * profile (issue #8), profile files against the built-in copy, parse
 * errors, and online correction of rates.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/policy/cost_model.h"
#include "tests/lib/test.h"

#define near(a, b) (fabs((a) - (b)) <= 1e-9 * fabs(b) + 1e-15)
#define t_near(a, b)                                                      \
	do {                                                              \
		double _x = (a), _y = (b);                                \
		if (!near(_x, _y))                                        \
			t_fail("%s = %.12g, expected %.12g", #a, _x, _y); \
	} while (0)

int main(void)
{
	struct pol_cost_model m, f;
	char err[256];
	double rate = 0.6 * 989e12;

	pol_cost_reference(&m);
	t_near(pol_cost_kv_bytes_per_token(&m), 131072); /* 128 KiB */
	t_near(pol_cost_block_bytes(&m), 67108864); /* 64 MiB */
	t_near(pol_cost_attn_coef(&m), 524288); /* 4 * 32 * 32 * 128 */
	/* (512 * 13.96e9 + 524288 * 512 * (512 * i + 256.5)) / rate */
	t_near(pol_cost_recompute_block_s(&m, 0),
	       (512 * 13.96e9 + 524288.0 * 512 * 256.5) / rate);
	t_near(pol_cost_recompute_block_s(&m, 10),
	       (512 * 13.96e9 + 524288.0 * 512 * (5120 + 256.5)) / rate);
	t_assert(fabs(pol_cost_recompute_block_s(&m, 0) - 0.012160) < 1e-5);
	t_near(pol_cost_reload_block_s(&m, 1), 67108864 / 55e9 + 10e-6);
	t_near(pol_cost_reload_block_s(&m, 2), 67108864 / 7e9 + 100e-6);
	t_near(pol_cost_msa_factor(&m, 1), 1.0);
	t_near(pol_cost_msa_factor(&m, 3), 1.1);

	/* The profile file is the built-in reference, byte for value. */
	setenv("KVMM_PROFILE_DIR",
	       getenv("KVMM_SRC") ? getenv("KVMM_SRC") : ".", 1);
	t_ok(pol_cost_load("h200-llama3-8b-ref", &f, err, sizeof(err)));
	t_ok(pol_cost_load("kvmm/policy/profiles/h200-llama3-8b-ref.profile",
			   &f, err, sizeof(err)));
	t_assert(!strcmp(f.name, m.name));
	t_near(pol_cost_recompute_block_s(&f, 7),
	       pol_cost_recompute_block_s(&m, 7));
	for (int t = 0; t < POL_TIER_COUNT; t++) {
		t_near(f.bandwidth[t], m.bandwidth[t]);
		t_near(f.latency[t] + 1, m.latency[t] + 1);
	}
	/* 70B: 80 layers x 8 KV heads x 128 x 2 B x 2 = 320 KiB a token. */
	t_ok(pol_cost_load("kvmm/policy/profiles/h200-llama3-70b.profile", &f,
			   err, sizeof(err)));
	t_near(pol_cost_kv_bytes_per_token(&f), 327680);
	t_near(pol_cost_attn_coef(&f), 4.0 * 80 * 64 * 128);
	t_ok(pol_cost_load("kvmm/policy/profiles/h200-llama3-8b.profile", &f,
			   err, sizeof(err)));

	/* Errors say what is wrong. */
	t_assert_eq(pol_cost_load("no-such-gpu", &f, err, sizeof(err)),
		    -ENOENT);
	t_assert(strstr(err, "no-such-gpu"));
	t_assert_eq(pol_cost_parse("layers = 32\nwat = 1\n", "x", &f, err,
				   sizeof(err)),
		    -EINVAL);
	t_assert(strstr(err, "unknown key 'wat' on line 2"));
	t_assert_eq(pol_cost_parse("layers = many\n", "x", &f, err,
				   sizeof(err)),
		    -EINVAL);
	t_assert(strstr(err, "bad value for 'layers'"));
	t_assert_eq(pol_cost_parse("layers = 32\n", "x", &f, err, sizeof(err)),
		    -EINVAL);
	t_assert(strstr(err, "missing key"));

	/* Online correction: EWMA with weight 0.1 after the latency. */
	pol_cost_observe_transfer(&m, 1, 67108864, 67108864 / 27.5e9 + 10e-6);
	t_near(m.bandwidth[1], 0.9 * 55e9 + 0.1 * 27.5e9);
	pol_cost_observe_compute(&m, 1e12, 1e12 / (989e12 * 0.3));
	t_near(m.efficiency, 0.9 * 0.6 + 0.1 * 0.3);
	/* A wild measurement is clamped to 1/8 .. 8x the profile. */
	for (int i = 0; i < 200; i++)
		pol_cost_observe_transfer(&m, 2, 1, 1);
	t_near(m.bandwidth[2], 7e9 / 8);
	return 0;
}
