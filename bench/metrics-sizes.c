// SPDX-License-Identifier: MIT
/*
 * What the per-size tenant families (kvmm_size_tenant_*, metrics_sizes.c)
 * cost the exposition: kd_metrics_write(), the formatter both exporters
 * use, on the same synthetic replies with one block size cached (the
 * baseline: no per-size family) and with --sizes sizes, every one of
 * --tenants tenant rows holding blocks in every size (the worst case: a
 * tenant with nothing in a size has no series of it).  Prints the bytes
 * and the median build time of each, and their ratios.
 *
 *   build/bench/metrics-sizes [--tenants N (255)] [--sizes N (2, 2-4)]
 *                             [--rounds N (21)] [--text]
 *
 * --text prints the exposition with --sizes sizes instead, once:
 * tests/doc-names.sh reads the kvmm_size_* families and their types
 * there, which a live kvmmd with one size never prints.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "kvmm/kvmmd/metrics_text.h"

static const char usage[] =
	"usage: metrics-sizes [--tenants N (255)] [--sizes N (2, 2-4)] [--rounds N (21)] [--text]\n"
	"  --text  print the exposition with --sizes sizes, not its cost\n";

/* An ADMIN_TENANTS reply of n tenants, each with blocks (base + i ...). */
static struct kvmm_tenants_reply *tenants_reply(uint32_t n, uint64_t base)
{
	size_t len = sizeof(struct kvmm_tenants_reply) +
		     n * sizeof(struct kvmm_tenant_info);
	struct kvmm_tenants_reply *r = calloc(1, len);

	if (!r) {
		perror("metrics-sizes");
		exit(1);
	}
	r->size = (uint32_t)len;
	r->nr = n;
	r->entry_size = sizeof(r->tenants[0]);
	r->kind = KVMM_TENANT_UID;
	for (uint32_t i = 0; i < n; i++) {
		struct kvmm_tenant_info *t = &r->tenants[i];

		t->size = sizeof(*t);
		/* the 256th and later tenants are added up as others */
		t->id = i == 254 ? KVMM_TENANT_OTHERS : 2001 + i;
		t->sessions = 1;
		t->cached_blocks[0] = base + i;
		t->cached_blocks[1] = 2 * base + i;
		t->admitted_blocks = 1000 * base + i;
		t->dropped_blocks = 10 * base + i;
		t->prefix_opens = 100 + i;
		t->published_blocks = 1000 + i;
	}
	return r;
}

/* One exposition of src, rounds times: its bytes, the median us. */
static size_t build(const struct kd_metrics_src *src, int rounds,
		    double *median_us)
{
	double *us = calloc((size_t)rounds, sizeof(*us));
	size_t len = 0;

	if (!us) {
		fprintf(stderr, "metrics-sizes: out of memory\n");
		exit(1);
	}
	for (int k = 0; k < rounds; k++) {
		char *text = NULL;
		double t0 = now_s();
		FILE *f = open_memstream(&text, &len);

		if (!f || kd_metrics_write(f, src) || fclose(f)) {
			fprintf(stderr, "metrics-sizes: the build failed\n");
			exit(1);
		}
		us[k] = (now_s() - t0) * 1e6;
		free(text);
	}
	*median_us = median(us, (unsigned int)rounds);
	free(us);
	return len;
}

int main(int argc, char **argv)
{
	static struct kvmm_status_reply st = { .size = sizeof(st) };
	static struct kvmm_tier_stats_reply ts = { .size = sizeof(ts) };
	struct kd_metrics_size sz[KVMM_TIER_STATS_SIZES] = { 0 };
	struct kd_metrics_src src = { .st = &st,
				      .ts = &ts,
				      .abi_major = KVMM_ABI_MAJOR,
				      .abi_minor = KVMM_ABI_MINOR };
	int tenants = 255, sizes = 2, rounds = 21;
	bool text = false;
	size_t one, many;
	double one_us, many_us;

	if (bench_help(argc, argv, usage))
		return 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--tenants") && i + 1 < argc)
			tenants = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
			sizes = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--text"))
			text = true;
		else
			return bench_usage_error("metrics-sizes", argv[i],
						 usage);
	}
	if (tenants < 1 || tenants > 255 || sizes < 2 ||
	    sizes > KVMM_TIER_STATS_SIZES || rounds < 1) {
		fprintf(stderr,
			"metrics-sizes: --tenants is 1-255, --sizes 2-%d, --rounds 1 or more\n%s",
			KVMM_TIER_STATS_SIZES, usage);
		return 2;
	}
	src.tn = tenants_reply((uint32_t)tenants, 100);
	st.nr_sizes = 1;
	st.sizes[0] = 64;
	if (!text)
		one = build(&src, rounds, &one_us);

	st.nr_sizes = (uint32_t)sizes;
	ts.nr_sizes = (uint32_t)sizes; /* kvmm_size_weight{size} */
	for (int i = 0; i < sizes; i++) {
		st.sizes[i] = 64 >> i;
		ts.sizes[i] = 64 >> i;
		ts.weights[i] = (uint32_t)(sizes - i);
		sz[i].pages = 64 >> i;
		sz[i].tn = tenants_reply((uint32_t)tenants, 10 * (i + 1));
	}
	src.sizes = sz;
	src.nr_sizes = (uint32_t)sizes;
	if (text) {
		int r = kd_metrics_write(stdout, &src);

		if (r || fflush(stdout)) {
			fprintf(stderr, "metrics-sizes: the text failed\n");
			return 1;
		}
		goto out;
	}
	many = build(&src, rounds, &many_us);

	printf("%d tenant rows: one size %zu bytes, %.0f us; %d sizes, every tenant in each, %zu bytes (x%.2f), %.0f us (x%.2f)\n",
	       tenants, one, one_us, sizes, many, (double)many / one, many_us,
	       many_us / one_us);
	printf("{\"bench\":\"metrics-sizes\",\"tenants\":%d,\"sizes\":%d,\"bytes_one\":%zu,\"bytes_sizes\":%zu,\"us_one\":%.0f,\"us_sizes\":%.0f,\"ratio_bytes\":%.3f,\"ratio_us\":%.3f}\n",
	       tenants, sizes, one, many, one_us, many_us, (double)many / one,
	       many_us / one_us);
out:
	free((void *)src.tn);
	for (int i = 0; i < sizes; i++)
		free((void *)sz[i].tn);
	return 0;
}
