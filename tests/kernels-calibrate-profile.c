/* SPDX-License-Identifier: MIT */
/*
 * kvmm-calibrate writes a profile the policy loads: the calibration tool,
 * built against the CUDA emulator (build/kernels/emu-calibrate) and run
 * with --tiny over the shipped H200 + Llama-3-8B profile, produces a file
 * that pol_cost_load() accepts, keeps the base's model and NVMe lines,
 * and replaces the measured keys with positive values.  (The emulator's
 * figures are meaningless; the format is what is tested.)
 */
#include <stdlib.h>
#include <unistd.h>

#include "kvmm/policy/cost_model.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

int main(void)
{
	const char *build = getenv("KVMM_BUILD"), *src = getenv("KVMM_SRC");
	char bin[512], base_path[512], out[128];
	char cmd[2048], err[256] = "";
	struct pol_cost_model m, base;
	int fd, rc;

	build = build ? build : "build";
	src = src ? src : ".";
	snprintf(bin, sizeof(bin), "%s/kernels/emu-calibrate", build);
	snprintf(base_path, sizeof(base_path),
		 "%s/kvmm/policy/profiles/h200-llama3-8b.profile", src);
	if (access(base_path, R_OK))
		t_skip("%s not found", base_path);
	t_assert(access(bin, X_OK) == 0);
	td_tmp_path("kvmm-calib-XXXXXX", out, sizeof(out));
	fd = mkstemp(out);
	t_assert(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "%s --tiny --base %s --name emu-test --out %s >/dev/null", bin,
		 base_path, out);
	rc = system(cmd);
	t_assert_eq(rc, 0);

	if (pol_cost_load(out, &m, err, sizeof(err)))
		t_fail("profile rejected: %s", err);
	t_ok(pol_cost_load(base_path, &base, err, sizeof(err)));
	t_assert(!strcmp(m.name, "emu-test"));
	t_assert_eq(m.layers, base.layers);
	t_assert_eq(m.q_heads, base.q_heads);
	t_assert_eq(m.kv_heads, base.kv_heads);
	t_assert_eq(m.head_dim, base.head_dim);
	t_assert_eq(m.tokens_per_block, base.tokens_per_block);
	t_assert(m.linear_flops_per_token == base.linear_flops_per_token);
	t_assert(m.bandwidth[POL_TIER_NVME] == base.bandwidth[POL_TIER_NVME]);
	t_assert(m.efficiency == base.efficiency);
	/* Measured (by the emulator: any positive value will do). */
	t_assert(m.bandwidth[POL_TIER_GPU] > 0);
	t_assert(m.bandwidth[POL_TIER_HOST] > 0);
	t_assert(m.msa_alpha >= 0 && m.msa_alpha < 100);
	t_assert(m.latency[POL_TIER_HOST] >= 0);
	unlink(out);
	printf("calibrated profile loads: gpu %.3g B/s, host %.3g B/s, "
	       "msa_alpha %.3f\n",
	       m.bandwidth[POL_TIER_GPU], m.bandwidth[POL_TIER_HOST],
	       m.msa_alpha);
	return 0;
}
