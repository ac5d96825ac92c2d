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
#include <sys/stat.h>
#include <unistd.h>

#include "kvmm/policy/cost_model.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define near(a, b) (fabs((a) - (b)) <= 1e-9 * fabs(b) + 1e-15)
#define t_near(a, b)                                                      \
	do {                                                              \
		double _x = (a), _y = (b);                                \
		if (!near(_x, _y))                                        \
			t_fail("%s = %.12g, expected %.12g", #a, _x, _y); \
	} while (0)

/* The reference profile's text, one "key = value" a line. */
static const char reference_text[] =
	"layers = 32\nq_heads = 32\nkv_heads = 8\nhead_dim = 128\n"
	"dtype_bytes = 2\ntokens_per_block = 512\n"
	"linear_flops_per_token = 13.96e9\npeak_flops = 989e12\n"
	"efficiency = 0.6\ngpu_bandwidth = 4.8e12\ngpu_latency = 0\n"
	"host_bandwidth = 55e9\nhost_latency = 10e-6\n"
	"nvme_bandwidth = 7e9\nnvme_latency = 100e-6\nmsa_alpha = 0.05\n"
	"ewma_weight = 0.1\n";

static const struct {
	const char *key, *value, *why;
} bad_values[] = {
	{ "efficiency", "nan", "line 9: 'nan' is not a decimal number" },
	{ "efficiency", "NAN", "'NAN' is not a decimal number" },
	{ "host_bandwidth", "inf", "line 12: 'inf' is not a decimal number" },
	{ "host_bandwidth", "1e999", "'1e999' is out of a double's range" },
	{ "ewma_weight", "nan", "'nan' is not a decimal number" },
	{ "peak_flops", "0x1p40", "'0x1p40' is not a decimal number" },
	{ "gpu_latency", "-0", "'-0' is not a decimal number" },
	{ "host_latency", "1e", "'1e' is not a decimal number" },
	{ "host_latency", ".", "'.' is not a decimal number" },
	{ "layers", "0x20", "line 1: '0x20' is not a decimal integer" },
	{ "layers", "32.0", "'32.0' is not a decimal integer" },
	{ "layers", "+32", "'+32' is not a decimal integer" },
	{ "layers", "4294967296", "'4294967296' is out of range" },
	{ "head_dim", "1e2", "'1e2' is not a decimal integer" },
	/* decimal, but a block's cost overflows: --json printed inf */
	{ "peak_flops", "1e-300", "inconsistent profile (recompute" },
	{ "efficiency", "1e-300", "inconsistent profile (recompute" },
	{ "nvme_bandwidth", "1e-300", "inconsistent profile (nvme reload" },
	{ "host_bandwidth", "1e-300", "inconsistent profile (host reload" },
	{ "linear_flops_per_token", "1e305",
	  "inconsistent profile (recompute" },
	{ "nvme_latency", "1e300", "inconsistent profile (nvme reload" },
};

/* In text (size bytes), give key's line the value v. */
static void replace_line(char *text, size_t size, const char *key,
			 const char *v)
{
	char rest[1024], *line = strstr(text, key), *eol;

	if (!line)
		t_fail("no %s in the profile", key);
	eol = strchr(line, '\n');
	snprintf(rest, sizeof(rest), "%s", eol);
	snprintf(line, size - (size_t)(line - text), "%s = %s%s", key, v, rest);
}

int main(void)
{
	struct pol_cost_model m, f;
	const char *src;
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
	src = getenv("KVMM_SRC");
	setenv("KVMM_PROFILE_DIR", src ? src : ".", 1);
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

	/* Values as a person writes them: strtod took nan, inf and hex, and
	 * nan passed every check after it (nan < 0 is false). */
	for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]);
	     i++) {
		char text[4096];

		snprintf(text, sizeof(text), "%s", reference_text);
		replace_line(text, sizeof(text), bad_values[i].key,
			     bad_values[i].value);
		t_assert_eq(pol_cost_parse(text, "x", &f, err, sizeof(err)),
			    -EINVAL);
		if (!strstr(err, bad_values[i].why))
			t_fail("%s = %s: '%s', expected '%s'",
			       bad_values[i].key, bad_values[i].value, err,
			       bad_values[i].why);
	}
	/* what stays accepted: exponents, a leading '.', 0 */
	t_ok(pol_cost_parse("layers = 32\nq_heads = 32\nkv_heads = 8\n"
			    "head_dim = 128\ndtype_bytes = 2\n"
			    "tokens_per_block = 512\n"
			    "linear_flops_per_token = 13.96E+9\n"
			    "peak_flops = 989e12\nefficiency = .6\n"
			    "host_bandwidth = 55e9\nhost_latency = 10e-6\n"
			    "nvme_bandwidth = 7000000000\nmsa_alpha = 0\n",
			    "x", &f, err, sizeof(err)));
	t_near(f.efficiency, 0.6);
	t_near(f.linear_flops_per_token, 13.96e9);
	/* Line numbers are the file's: blank lines count (they were
	 * merged away, so the error named a line 3 too early). */
	t_assert_eq(pol_cost_parse("\n\n\n# c\nlayers = 0x20\n", "x", &f, err,
				   sizeof(err)),
		    -EINVAL);
	t_assert(strstr(err, "bad value for 'layers' on line 5: '0x20' is "
			     "not a decimal integer"));
	t_assert_eq(pol_cost_parse("\n\r\nwat = 1\n", "x", &f, err,
				   sizeof(err)),
		    -EINVAL);
	t_assert(strstr(err, "unknown key 'wat' on line 3"));
	/* a FIFO as the profile is refused, not waited on */
	{
		char fifo[128];
		int fd;

		td_tmp_path("kvmm-profile-fifo-XXXXXX", fifo, sizeof(fifo));
		fd = mkstemp(fifo);

		t_assert(fd >= 0);
		close(fd);
		unlink(fifo);
		t_ok(mkfifo(fifo, 0600));
		alarm(10); /* the old code blocked here */
		t_assert_eq(pol_cost_load(fifo, &f, err, sizeof(err)), -ENOENT);
		alarm(0);
		unlink(fifo);
		t_assert(strstr(err, "not a regular file"));
	}

	/* Online correction: EWMA with weight 0.1 after the latency. */
	pol_cost_observe_transfer(&m, 1, 67108864, 67108864 / 27.5e9 + 10e-6);
	t_near(m.bandwidth[1], 0.9 * 55e9 + 0.1 * 27.5e9);
	pol_cost_observe_compute(&m, 1e12, 1e12 / (989e12 * 0.3));
	t_near(m.efficiency, 0.9 * 0.6 + 0.1 * 0.3);
	/* A wild measurement is clamped to 1/8 .. 8x the profile. */
	for (int i = 0; i < 200; i++)
		pol_cost_observe_transfer(&m, 2, 1, 1);
	t_near(m.bandwidth[2], 7e9 / 8);
	/* NaN passed "<= 0" and stayed in the rates for good; inf too */
	{
		double bw = m.bandwidth[1], eff = m.efficiency;

		pol_cost_observe_transfer(&m, 1, NAN, 0.01);
		pol_cost_observe_transfer(&m, 1, 67108864, NAN);
		pol_cost_observe_transfer(&m, 1, INFINITY, 0.01);
		pol_cost_observe_transfer(&m, 1, 67108864, INFINITY);
		pol_cost_observe_compute(&m, NAN, 0.01);
		pol_cost_observe_compute(&m, 1e12, NAN);
		pol_cost_observe_compute(&m, INFINITY, 0.01);
		pol_cost_observe_compute(&m, 1e12, INFINITY);
		t_assert(m.bandwidth[1] == bw && m.efficiency == eff);
	}
	return 0;
}
