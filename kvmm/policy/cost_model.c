/* SPDX-License-Identifier: MIT */
/*
 * Cost model (formulas in cost_model.h and Documentation/policy.md):
 * profile parsing, the per-block costs, and online correction.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "install_paths.h" /* KVMM_PROFILE_DIR_DEFAULT (DATADIR) */
#include "kvmm/policy/cost_model.h"
#include "kvmm/policy/policy.h"

static const char reference_profile[] =
	"name = h200-llama3-8b-ref\n"
	"layers = 32\nq_heads = 32\nkv_heads = 8\nhead_dim = 128\n"
	"dtype_bytes = 2\ntokens_per_block = 512\n"
	"linear_flops_per_token = 13.96e9\npeak_flops = 989e12\n"
	"efficiency = 0.6\ngpu_bandwidth = 4.8e12\ngpu_latency = 0\n"
	"host_bandwidth = 55e9\nhost_latency = 10e-6\n"
	"nvme_bandwidth = 7e9\nnvme_latency = 100e-6\nmsa_alpha = 0.05\n"
	"min_chunk_tokens = 2048\nmax_chunk_tokens = 16384\n"
	"ewma_weight = 0.1\n";

__attribute__((format(printf, 3, 4))) static void set_err(char *err, size_t len,
							  const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

struct key {
	const char *name;
	size_t off;
	char type; /* 'u' uint32, 'd' double */
	bool required;
};

#define U(f, req)                                                \
	{                                                        \
#f, offsetof(struct pol_cost_model, f), 'u', req \
	}
#define D(f, req)                                                \
	{                                                        \
#f, offsetof(struct pol_cost_model, f), 'd', req \
	}
#define T(n, f, i, req)                                                       \
	{                                                                     \
		n, offsetof(struct pol_cost_model, f) + (i) * sizeof(double), \
			'd', req                                              \
	}

static const struct key keys[] = {
	U(layers, true),
	U(q_heads, true),
	U(kv_heads, true),
	U(head_dim, true),
	U(dtype_bytes, true),
	U(tokens_per_block, true),
	D(linear_flops_per_token, true),
	D(attn_coef, false),
	D(peak_flops, true),
	D(efficiency, true),
	T("gpu_bandwidth", bandwidth, POL_TIER_GPU, false),
	T("gpu_latency", latency, POL_TIER_GPU, false),
	T("host_bandwidth", bandwidth, POL_TIER_HOST, true),
	T("host_latency", latency, POL_TIER_HOST, false),
	T("nvme_bandwidth", bandwidth, POL_TIER_NVME, true),
	T("nvme_latency", latency, POL_TIER_NVME, false),
	D(msa_alpha, false),
	U(min_chunk_tokens, false),
	U(max_chunk_tokens, false),
	D(ewma_weight, false),
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

bool pol_decimal_syntax(const char *s, bool integer)
{
	bool digits = false;

	for (; isdigit((unsigned char)*s); s++)
		digits = true;
	if (integer)
		return digits && !*s;
	if (*s == '.')
		for (s++; isdigit((unsigned char)*s); s++)
			digits = true;
	if (digits && (*s == 'e' || *s == 'E')) {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!isdigit((unsigned char)*s))
			return false;
		while (isdigit((unsigned char)*s))
			s++;
	}
	return digits && !*s;
}

/*
 * A value as a person writes it in a profile: a decimal integer for the
 * counts ('u'); for the rates a decimal number, optionally with an
 * exponent (13.96e9, 10e-6).  strtod alone took hex, nan and inf, and nan
 * passed every later check (nan < 0 is false).  0, or the reason.
 */
static const char *parse_value(const char *v, char type, void *out)
{
	char *end;

	if (type == 'u') {
		unsigned long long u;

		if (!pol_decimal_syntax(v, true))
			return "not a decimal integer";
		errno = 0;
		u = strtoull(v, &end, 10);
		if (errno || u > UINT32_MAX)
			return "out of range (at most 4294967295)";
		*(uint32_t *)out = (uint32_t)u;
		return NULL;
	}
	if (!pol_decimal_syntax(v, false))
		return "not a decimal number >= 0 (no sign, hex, nan or inf)";
	errno = 0;
	*(double *)out = strtod(v, &end);
	/* 1e999 (inf) or 1e-999 (not the value written) */
	if (errno || *end)
		return "out of a double's range";
	return NULL;
}

/*
 * Decimal values can still multiply or divide out of a double's range:
 * peak_flops = 1e-300 made every recomputation inf and --json printed
 * "modeled_prefill_s":inf.  Every per-block cost, at the rates online
 * correction may reach (1/8 of the profile's) and for the deepest block
 * index, must stay finite after a sum over 2^64 blocks, so that no total
 * of a replay or a plan overflows.  NULL, or which cost does not.
 */
static const char *costs_finite(struct pol_cost_model *m)
{
	const double blocks = 18446744073709551616.0; /* 2^64 */
	struct pol_cost_model worst = *m;
	double rate = m->peak_flops * m->efficiency / 8;

	if (!isfinite(pol_cost_block_bytes(m) * blocks))
		return "block bytes";
	if (!(rate > 0) ||
	    !isfinite(pol_cost_flops(m,
				     (double)m->tokens_per_block * UINT32_MAX,
				     m->tokens_per_block) *
		      pol_cost_msa_factor(m, UINT32_MAX) / rate * blocks))
		return "recompute";
	for (int t = 0; t < POL_TIER_COUNT; t++) {
		worst.bandwidth[t] = m->bandwidth[t] / 8;
		if (!(worst.bandwidth[t] > 0) ||
		    !isfinite(pol_cost_reload_block_s(&worst, t) * blocks))
			return t == POL_TIER_GPU  ? "gpu reload" :
			       t == POL_TIER_HOST ? "host reload" :
						    "nvme reload";
	}
	return NULL;
}

int pol_cost_parse(const char *text, const char *name, struct pol_cost_model *m,
		   char *err, size_t errlen)
{
	bool seen[NKEYS] = { false };
	char *copy, *line, *next;
	const char *why;
	int lineno = 0, r = 0;

	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name ? name : "unnamed");
	m->bandwidth[POL_TIER_GPU] = 4.8e12;
	m->min_chunk_tokens = 2048;
	m->max_chunk_tokens = 16384;
	m->ewma_weight = 0.1;
	copy = strdup(text);
	if (!copy)
		return -ENOMEM;
	/* line by line, blank ones too: errors name the file's line */
	for (line = copy; line; line = next) {
		char *hash, *eq, *k, *v;
		size_t i;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		k = trim(line);
		if (!*k)
			continue;
		eq = strchr(k, '=');
		if (!eq) {
			set_err(err, errlen, "line %d: expected key = value",
				lineno);
			r = -EINVAL;
			goto out;
		}
		*eq = '\0';
		k = trim(k);
		v = trim(eq + 1);
		if (!strcmp(k, "name")) {
			snprintf(m->name, sizeof(m->name), "%s", v);
			continue;
		}
		for (i = 0; i < NKEYS; i++)
			if (!strcmp(k, keys[i].name))
				break;
		if (i == NKEYS) {
			set_err(err, errlen, "unknown key '%s' on line %d", k,
				lineno);
			r = -EINVAL;
			goto out;
		}
		why = parse_value(v, keys[i].type, (char *)m + keys[i].off);
		if (why) {
			set_err(err, errlen,
				"bad value for '%s' on line %d: '%s' is %s", k,
				lineno, v, why);
			r = -EINVAL;
			goto out;
		}
		seen[i] = true;
	}
	for (size_t i = 0; i < NKEYS; i++)
		if (keys[i].required && !seen[i]) {
			set_err(err, errlen, "missing key '%s'", keys[i].name);
			r = -EINVAL;
			goto out;
		}
	if (!m->layers || !m->tokens_per_block || !m->peak_flops ||
	    !m->efficiency || m->efficiency > 1 || !m->bandwidth[0] ||
	    !m->bandwidth[1] || !m->bandwidth[2] || m->ewma_weight > 1) {
		set_err(err, errlen,
			"inconsistent profile (zero rate or efficiency > 1)");
		r = -EINVAL;
		goto out;
	}
	for (int t = 0; t < POL_TIER_COUNT; t++)
		m->base_bandwidth[t] = m->bandwidth[t];
	m->base_efficiency = m->efficiency;
	why = costs_finite(m);
	if (why) {
		set_err(err, errlen,
			"inconsistent profile (%s: its rates are too small "
			"for a finite time)",
			why);
		r = -EINVAL;
		goto out;
	}
out:
	free(copy);
	return r;
}

void pol_cost_reference(struct pol_cost_model *m)
{
	pol_cost_parse(reference_profile, "h200-llama3-8b-ref", m, NULL, 0);
}

char *pol_cost_read_text(const char *path)
{
	void *buf;
	size_t len;
	int r = pol_read_file(path, 1 << 20, &buf, &len);

	if (r) {
		errno = -r;
		return NULL;
	}
	return buf;
}

/* A place pol_cost_load() looks for NAME.profile (see there). */
struct profile_dir {
	const char *dir;
	bool source_root;
};

/*
 * The directory above this executable's (/proc/self/exe: build/kvmmd ->
 * build/..), into root; false when it cannot be read.  A kvmmd run from
 * the build tree anywhere but the source root missed the profiles there
 * and fell back to the reference with a WARN at every start.
 */
static bool exe_parent(char *root, size_t len)
{
	char exe[4096], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return false;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	return snprintf(root, len, "%s/..", exe) < (int)len;
}

int pol_cost_load(const char *what, struct pol_cost_model *m, char *err,
		  size_t errlen)
{
	char path[4096];
	char *text = NULL;
	size_t nd = 0, len;
	int r;

	if (!what || !*what) {
		set_err(err, errlen, "empty profile name");
		return -EINVAL;
	}
	len = strlen(what);
	if (strchr(what, '/') ||
	    (len > 8 && !strcmp(what + len - 8, ".profile"))) {
		text = pol_cost_read_text(what);
		if (!text) {
			set_err(err, errlen, "cannot read profile %s: %s", what,
				errno == EINVAL ? "not a regular file" :
						  strerror(errno));
			return -ENOENT;
		}
		snprintf(path, sizeof(path), "%s", what);
	} else {
		/*
		 * Where a name is looked for, in order.  A profile
		 * directory (KVMM_PROFILE_DIR, the installed DATADIR) holds
		 * NAME.profile itself; a source root (KVMM_SRC, the working
		 * directory) holds it there or under kvmm/policy/profiles.
		 * Whether a place is a source root is the place's, not its
		 * rank: with KVMM_PROFILE_DIR unset, "." came first and its
		 * kvmm/policy/profiles was never tried.
		 */
		struct profile_dir dirs[6];
		char tried[4096] = "", root[4096], share[4096 + 32];
		size_t off = 0;

		if (getenv("KVMM_PROFILE_DIR"))
			dirs[nd++] = (struct profile_dir){
				getenv("KVMM_PROFILE_DIR"), false
			};
		if (getenv("KVMM_SRC"))
			dirs[nd++] = (struct profile_dir){ getenv("KVMM_SRC"),
							   true };
		dirs[nd++] = (struct profile_dir){ ".", true };
		/* the tree this executable runs from: a build tree's root,
		 * or an installed tree's share/kvmm/profiles (a DESTDIR or
		 * a moved PREFIX) */
		if (exe_parent(root, sizeof(root))) {
			dirs[nd++] = (struct profile_dir){ root, true };
			snprintf(share, sizeof(share), "%s/share/kvmm/profiles",
				 root);
			dirs[nd++] = (struct profile_dir){ share, false };
		}
		/* where make install puts them */
		dirs[nd++] =
			(struct profile_dir){ KVMM_PROFILE_DIR_DEFAULT, false };
		for (size_t i = 0; i < nd && !text; i++) {
			/* cppcheck-suppress compareBoolExpressionWithInt ;
			 * sub 1 only in a source tree (true is 1) */
			for (int sub = 0; sub <= dirs[i].source_root && !text;
			     sub++) {
				snprintf(path, sizeof(path), "%s/%s%s.profile",
					 dirs[i].dir,
					 sub ? "kvmm/policy/profiles/" : "",
					 what);
				text = pol_cost_read_text(path);
				if (!text && off < sizeof(tried))
					off += snprintf(tried + off,
							sizeof(tried) - off,
							"%s%s", off ? ", " : "",
							path);
			}
		}
		if (!text && !strcmp(what, "h200-llama3-8b-ref")) {
			pol_cost_reference(m);
			return 0;
		}
		if (!text) {
			/* every path: a tool run from a DESTDIR tree or
			 * another PREFIX says where it looked */
			set_err(err, errlen,
				"unknown profile '%s' (tried %s; "
				"set KVMM_PROFILE_DIR)",
				what, tried);
			return -ENOENT;
		}
	}
	r = pol_cost_parse(text, what, m, err, errlen);
	free(text);
	return r;
}

double pol_cost_kv_bytes_per_token(const struct pol_cost_model *m)
{
	return 2.0 * m->layers * m->kv_heads * m->head_dim * m->dtype_bytes;
}

double pol_cost_block_bytes(const struct pol_cost_model *m)
{
	return pol_cost_kv_bytes_per_token(m) * m->tokens_per_block;
}

double pol_cost_attn_coef(const struct pol_cost_model *m)
{
	if (m->attn_coef > 0)
		return m->attn_coef;
	return 4.0 * m->layers * m->q_heads * m->head_dim;
}

double pol_cost_flops(const struct pol_cost_model *m, double pos, double tokens)
{
	return m->linear_flops_per_token * tokens +
	       pol_cost_attn_coef(m) * tokens * (pos + (tokens + 1) / 2);
}

double pol_cost_compute_s(const struct pol_cost_model *m, double flops)
{
	return flops / (m->peak_flops * m->efficiency);
}

double pol_cost_recompute_block_s(const struct pol_cost_model *m,
				  uint32_t index)
{
	double b = m->tokens_per_block;

	return pol_cost_compute_s(m, pol_cost_flops(m, b * index, b));
}

double pol_cost_reload_s(const struct pol_cost_model *m, unsigned tier,
			 double bytes)
{
	if (tier >= POL_TIER_COUNT)
		return 0;
	return bytes / m->bandwidth[tier] + m->latency[tier];
}

double pol_cost_reload_block_s(const struct pol_cost_model *m, unsigned tier)
{
	return pol_cost_reload_s(m, tier, pol_cost_block_bytes(m));
}

double pol_cost_msa_factor(const struct pol_cost_model *m, unsigned k)
{
	return 1 + m->msa_alpha * (k > 1 ? k - 1 : 0);
}

static double clamp(double v, double base)
{
	if (v < base / 8)
		return base / 8;
	if (v > base * 8)
		return base * 8;
	return v;
}

void pol_cost_observe_transfer(struct pol_cost_model *m, unsigned tier,
			       double bytes, double seconds)
{
	double busy, bw;

	/* NaN passes "<= 0" and would stay for good */
	if (tier >= POL_TIER_COUNT || !(bytes > 0) || !(seconds > 0) ||
	    !isfinite(bytes) || !isfinite(seconds))
		return;
	/* The fixed latency is not bandwidth: take it out first. */
	busy = seconds - m->latency[tier];
	if (busy <= seconds / 100)
		busy = seconds / 100;
	bw = bytes / busy;
	m->bandwidth[tier] = clamp((1 - m->ewma_weight) * m->bandwidth[tier] +
					   m->ewma_weight * bw,
				   m->base_bandwidth[tier]);
}

void pol_cost_observe_compute(struct pol_cost_model *m, double flops,
			      double seconds)
{
	double eff;

	if (!(flops > 0) || !(seconds > 0) || !isfinite(flops) ||
	    !isfinite(seconds))
		return;
	eff = flops / seconds / m->peak_flops;
	eff = (1 - m->ewma_weight) * m->efficiency + m->ewma_weight * eff;
	if (eff > 1)
		eff = 1;
	m->efficiency = clamp(eff, m->base_efficiency);
}
