/* SPDX-License-Identifier: MIT */
/*
 * kvmm-calibrate: measure a cost-model profile on this GPU.
 *
 * Times, with the kernels in kernels/ and the CUDA runtime:
 *   - device-to-device, host-to-device and device-to-host copies (pinned
 *     host memory) from 4 KiB to 256 MiB, fitted as latency + bytes / bw;
 *   - MSA decode per layer over context lengths x batch sizes, and over
 *     1..16 segments, fitted as msa(k) = 1 + msa_alpha (k - 1);
 *   - MSA prefill per layer over chunk sizes and context lengths.
 * and writes a profile in the policy's "key = value" format
 * (kvmm/policy/cost_model.h): the model lines of --base (or Llama-3-8B
 * defaults) with gpu_bandwidth, gpu_latency, host_bandwidth, host_latency
 * and msa_alpha replaced by measured values; the raw tables follow as
 * '#' comments.  NVMe figures and the prefill efficiency are not measured
 * here and are kept from the base.
 *
 *   kvmm-calibrate [--out FILE] [--base PROFILE] [--name NAME] [--quick]
 *
 * --tiny shrinks every size so the CUDA emulator (kernels/emu) can run it
 * in a test; its figures mean nothing.
 *
 * Without a GPU: prints why and exits 77, writing nothing.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "kernels/gpu/gpu_util.h"
#include "kvmm/policy/cost_model.h"

static const char default_base[] =
	"layers = 32\nq_heads = 32\nkv_heads = 8\nhead_dim = 128\n"
	"dtype_bytes = 2\ntokens_per_block = 512\n"
	"linear_flops_per_token = 16.06e9\npeak_flops = 989e12\n"
	"efficiency = 0.55\n"
	"nvme_bandwidth = 6.5e9\nnvme_latency = 120e-6\n"
	"min_chunk_tokens = 2048\nmax_chunk_tokens = 16384\n"
	"ewma_weight = 0.1\n";

static const char *const measured_keys[] = { "name",	     "gpu_bandwidth",
					     "gpu_latency",  "host_bandwidth",
					     "host_latency", "msa_alpha" };

/* The key of a "key = value" line (into key, trimmed), or "" if none. */
static void line_key(const char *line, char *key, size_t len)
{
	size_t n = 0;

	while (*line == ' ' || *line == '\t')
		line++;
	while (*line && *line != '=' && *line != '#' && *line != ' ' &&
	       *line != '\t' && n + 1 < len)
		key[n++] = *line++;
	key[n] = '\0';
	while (*line == ' ' || *line == '\t')
		line++;
	if (*line != '=')
		key[0] = '\0';
}

static uint32_t base_uint(const char *text, const char *want, uint32_t dflt)
{
	const char *l = text;

	while (l && *l) {
		char key[64];
		const char *eq;

		line_key(l, key, sizeof(key));
		if (!strcmp(key, want) && (eq = strchr(l, '=')))
			return (uint32_t)strtoul(eq + 1, NULL, 10);
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	return dflt;
}

static char table[32768];
static size_t table_len;

/* Append to the comment table; what does not fit is dropped. */
__attribute__((format(printf, 1, 2))) static void table_add(const char *fmt,
							    ...)
{
	va_list ap;
	int n;

	if (table_len >= sizeof(table) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(table + table_len, sizeof(table) - table_len, fmt, ap);
	va_end(ap);
	if (n > 0)
		table_len += (size_t)n < sizeof(table) - table_len ?
				     (size_t)n :
				     sizeof(table) - table_len - 1;
}

/* latency + bytes / bw from the smallest and the largest size. */
static void fit(const double *bytes, const double *ms, int n, double *bw,
		double *lat)
{
	double t0 = ms[0] * 1e-3, t1 = ms[n - 1] * 1e-3;

	*bw = (bytes[n - 1] - bytes[0]) / (t1 - t0 > 1e-12 ? t1 - t0 : 1e-12);
	*lat = t0 - bytes[0] / *bw;
	if (*lat < 0)
		*lat = 0;
}

static const char usage[] =
	"usage: kvmm-calibrate [--out FILE] [--base PROFILE] [--name NAME] [--quick]\n"
	"  --out FILE      profile to write (default calibrated.profile)\n"
	"  --base PROFILE  model lines from this profile (default: built-in\n"
	"                  Llama-3-8B); the measured keys replace its own\n"
	"  --name NAME     the profile's name line (default calibrated)\n"
	"  --quick         fewer sizes and contexts: faster, rougher\n"
	"  --help          this text\n"
	"Needs a GPU: without one it says why and exits 77, writing nothing.\n"
	"See Documentation/kernels.md#calibration.\n";

int main(int argc, char **argv)
{
	const char *out = "calibrated.profile", *base_path = NULL;
	const char *name = NULL;
	bool quick = false, tiny = false;
	char *base = NULL, dev_name[256] = "";
	static const double sizes[] = { 4096, 65536, 2 << 20, 32 << 20,
					256 << 20 };
	double ms_d2d[5], ms_h2d[5], ms_d2h[5];
	double gpu_bw, gpu_lat, h2d_bw, h2d_lat, d2h_bw, d2h_lat, alpha = 0;
	uint32_t hq, hkv, dim, sms;
	struct cudaDeviceProp prop;
	struct gpu_bench b;
	char *dev_a, *dev_b, *host;
	FILE *f;
	int n_sizes, warm, iters;
	time_t now = time(NULL);
	char stamp[64];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--base") && i + 1 < argc)
			base_path = argv[++i];
		else if (!strcmp(argv[i], "--name") && i + 1 < argc)
			name = argv[++i];
		else if (!strcmp(argv[i], "--quick"))
			quick = true;
		else if (!strcmp(argv[i], "--tiny"))
			tiny = quick = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		} else {
			fprintf(stderr, "kvmm-calibrate: bad option '%s'\n%s",
				argv[i], usage);
			return 2;
		}
	}
	if (base_path && !(base = pol_cost_read_text(base_path))) {
		fprintf(stderr, "kvmm-calibrate: cannot read %s: %s\n",
			base_path, strerror(errno));
		return 1;
	}
	{
		int n = 0;
		cudaError_t e = cudaGetDeviceCount(&n);

		if (e != cudaSuccess || n < 1) {
			printf("kvmm-calibrate: no usable CUDA device (%s); a profile can only be measured on a GPU, nothing written\n",
			       e != cudaSuccess ? cudaGetErrorString(e) :
						  "0 devices");
			free(base);
			return 77;
		}
	}
	sms = (uint32_t)gpu_require(stdout, 77);
	GPU_CK(cudaGetDeviceProperties(&prop, 0));
	snprintf(dev_name, sizeof(dev_name), "%s", prop.name);
	hq = base_uint(base ? base : default_base, "q_heads", 32);
	hkv = base_uint(base ? base : default_base, "kv_heads", 8);
	dim = base_uint(base ? base : default_base, "head_dim", 128);

	/* Transfers. */
	n_sizes = tiny ? 3 : quick ? 4 : 5;
	warm = tiny ? 0 : 3;
	iters = tiny ? 1 : 20;
	GPU_CK(cudaMalloc((void **)&dev_a, (size_t)sizes[n_sizes - 1]));
	GPU_CK(cudaMalloc((void **)&dev_b, (size_t)sizes[n_sizes - 1]));
	GPU_CK(cudaMallocHost((void **)&host, (size_t)sizes[n_sizes - 1]));
	memset(host, 0x3c, (size_t)sizes[n_sizes - 1]);
	GPU_CK(cudaMemset(dev_a, 0x3c, (size_t)sizes[n_sizes - 1]));
	table_add("# copies: bytes d2d_us h2d_us d2h_us\n");
	for (int i = 0; i < n_sizes; i++) {
		size_t s = (size_t)sizes[i];
		int it = tiny ? 1 : s > (32 << 20) ? 5 : 20;

		ms_d2d[i] = gpu_copy_ms(dev_b, dev_a, s,
					cudaMemcpyDeviceToDevice, 2, it);
		ms_h2d[i] = gpu_copy_ms(dev_a, host, s, cudaMemcpyHostToDevice,
					2, it);
		ms_d2h[i] = gpu_copy_ms(host, dev_a, s, cudaMemcpyDeviceToHost,
					2, it);
		table_add("#   %zu %.2f %.2f %.2f\n", s, ms_d2d[i] * 1e3,
			  ms_h2d[i] * 1e3, ms_d2h[i] * 1e3);
	}
	fit(sizes, ms_d2d, n_sizes, &gpu_bw, &gpu_lat);
	fit(sizes, ms_h2d, n_sizes, &h2d_bw, &h2d_lat);
	fit(sizes, ms_d2h, n_sizes, &d2h_bw, &d2h_lat);
	cudaFree(dev_a);
	cudaFree(dev_b);
	cudaFreeHost(host);

	/* MSA decode and prefill, per layer. */
	{
		static const uint32_t big_ctxs[] = { 1024, 4096, 16384, 32768 };
		static const uint32_t tiny_ctxs[] = { 128, 256, 512, 1024 };
		static const uint32_t big_batches[] = { 1, 8, 32 };
		static const uint32_t tiny_batches[] = { 1, 2, 4 };
		const uint32_t *ctxs = tiny ? tiny_ctxs : big_ctxs;
		const uint32_t *batches = tiny ? tiny_batches : big_batches;
		static const uint32_t segs[] = { 1, 2, 4, 8, 16 };
		static const uint32_t big_chunks[] = { 512, 2048 };
		static const uint32_t tiny_chunks[] = { 32, 64 };
		const uint32_t *chunks = tiny ? tiny_chunks : big_chunks;
		uint32_t nctx = quick ? 3 : 4;
		uint32_t seg_ctx = tiny ? 512 : quick ? 4096 : 16384;
		uint32_t seg_batch = tiny ? 2 : 8;
		double t1 = 0, num = 0, den = 0;

		gpu_bench_init(&b, hq, hkv, dim, MSA_BF16,
			       (size_t)32 * (tiny  ? 1024 :
					     quick ? 16384 :
						     32768),
			       sms);
		table_add("# msa decode per layer: batch ctx us\n");
		for (uint32_t i = 0; i < 3; i++)
			for (uint32_t j = 0; j < nctx; j++) {
				if (gpu_bench_setup(&b, batches[i], ctxs[j], 1,
						    1, true))
					continue;
				table_add("#   %u %u %.2f\n", batches[i],
					  ctxs[j],
					  gpu_bench_time_ms(&b, warm, iters) *
						  1e3);
			}
		table_add("# msa decode, batch %u x %u: segments us ratio\n",
			  seg_batch, seg_ctx);
		for (uint32_t i = 0; i < 5; i++) {
			double t;

			GPU_OK(gpu_bench_setup(&b, seg_batch, seg_ctx, segs[i],
					       1, true));
			t = gpu_bench_time_ms(&b, warm, iters);
			if (i == 0)
				t1 = t;
			num += (segs[i] - 1.0) * (t / t1 - 1.0);
			den += (segs[i] - 1.0) * (segs[i] - 1.0);
			table_add("#   %u %.2f %.4f\n", segs[i], t * 1e3,
				  t / t1);
		}
		alpha = den > 0 ? num / den : 0;
		if (alpha < 0)
			alpha = 0;
		table_add("# msa prefill per layer: chunk ctx us\n");
		for (uint32_t i = 0; i < 2; i++)
			for (uint32_t j = 1; j < nctx; j++) {
				if (chunks[i] > ctxs[j] ||
				    gpu_bench_setup(&b, 1, ctxs[j], 1,
						    chunks[i], false))
					continue;
				table_add("#   %u %u %.2f\n", chunks[i],
					  ctxs[j],
					  gpu_bench_time_ms(&b, warm,
							    iters > 5 ? 5 :
									iters) *
						  1e3);
			}
		gpu_bench_free(&b);
	}

	f = fopen(out, "we");
	if (!f) {
		fprintf(stderr, "kvmm-calibrate: %s: %s\n", out,
			strerror(errno));
		free(base);
		return 1;
	}
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	fprintf(f, "# measured by kvmm-calibrate on %s (%u SMs) at %s\n",
		dev_name, sms, stamp);
	fprintf(f, "# model lines from %s; NVMe and efficiency not measured\n",
		base_path ? base_path : "built-in Llama-3-8B defaults");
	fprintf(f, "name = %s\n", name ? name : "calibrated");
	/* The base's lines, minus the keys measured here. */
	for (const char *l = base ? base : default_base; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char key[64];
		bool skip = false;

		line_key(l, key, sizeof(key));
		for (size_t i = 0; i < sizeof(measured_keys) / sizeof(char *);
		     i++)
			skip |= !strcmp(key, measured_keys[i]);
		if (!skip && !(len && l[0] == '#'))
			fprintf(f, "%.*s\n", (int)len, l);
		l = nl ? nl + 1 : NULL;
	}
	fprintf(f, "gpu_bandwidth = %.4g\ngpu_latency = %.4g\n", gpu_bw,
		gpu_lat);
	fprintf(f, "host_bandwidth = %.4g\nhost_latency = %.4g\n", h2d_bw,
		h2d_lat);
	fprintf(f, "msa_alpha = %.4g\n", alpha);
	fprintf(f, "# device-to-host: bandwidth %.4g B/s, latency %.4g s\n",
		d2h_bw, d2h_lat);
	fputs(table, f);
	fclose(f);
	printf("kvmm-calibrate: wrote %s (gpu %.3g B/s, host %.3g B/s, msa_alpha %.4f)\n",
	       out, gpu_bw, h2d_bw, alpha);
	free(base);
	return 0;
}
