// SPDX-License-Identifier: MIT
/*
 * Option parsing for kvmmd: each option of the command line or the
 * config file applied to struct kd_config as it is read
 * (kd_option_apply()), with the file and line that set it kept for the
 * later errors about it.  Every error prints one line naming the option
 * and what was wrong.  The value syntaxes shared with kvmmctl (sizes,
 * log levels, names, tenant limits) are in options_values.c, the checks
 * across options once all are read in options_check.c.
 */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kvmm/kvmmd/cache_plan.h"
#include "kvmm/kvmmd/log_sink.h"
#include "kvmm/kvmmd/metrics_http.h"
#include "kvmm/kvmmd/options.h"
#include "kvmm/kvmmd/scope.h"
#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"
#include "kvmm/policy/policy.h"

static int parse_u32(const char *what, const char *s, uint32_t *out, int base)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, base);
	/* a number, but more than 32 bits hold: say so, not "not a number" */
	if (isdigit((unsigned char)*s) && !*end &&
	    (errno == ERANGE || v > 0xffffffffu)) {
		fprintf(stderr,
			"kvmmd: %s: '%s' is out of range (at most %s)\n", what,
			s, base == 8 ? "037777777777" : "4294967295");
		return -ERANGE;
	}
	/* a digit first: no blanks, signs or 0x */
	if (errno || !isdigit((unsigned char)*s) || *end) {
		fprintf(stderr, "kvmmd: %s: '%s' is not a%s number\n", what, s,
			base == 8 ? "n octal" : "");
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/*
 * The weight of a size in --cache-block-pages N:W (tok, for the
 * message): 1 to TIER_NVME_WEIGHT_MAX, the size's share of --host-mem
 * and --nvme-size being its weight over their sum.  0 or -EINVAL,
 * -ERANGE, with one line naming the item and what was wrong.
 */
static int parse_block_weight(const char *tok, const char *w, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(w, &end, 10);
	/* a digit first: no blanks, signs (strtoul takes -1) or 0x */
	if (!isdigit((unsigned char)*w) || *end) {
		fprintf(stderr,
			"kvmmd: --cache-block-pages %s: the weight '%s' is not a number (N:W, W from 1 to %u)\n",
			tok, w, TIER_NVME_WEIGHT_MAX);
		return -EINVAL;
	}
	if (errno == ERANGE || v > TIER_NVME_WEIGHT_MAX) {
		fprintf(stderr,
			"kvmmd: --cache-block-pages %s: the weight %s is too large (at most %u)\n",
			tok, w, TIER_NVME_WEIGHT_MAX);
		return -ERANGE;
	}
	if (!v) {
		fprintf(stderr,
			"kvmmd: --cache-block-pages %s: a weight is at least 1 (a size without :W weighs 1)\n",
			tok);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

/*
 * --cache-block-pages A[:W][,B[:W]...]: the block sizes the cache serves,
 * each with its share of --host-mem and --nvme-size by its weight W (1
 * unless given: equal shares, cache_setup.c, tier_nvme_part.c),
 * KD_CACHE_SIZES at most, no size twice.
 */
static int parse_block_sizes(struct kd_config *cfg, const char *val)
{
	char buf[128], item[128], what[160], *rest, *tok, *colon;
	uint32_t n = 0, u, w;
	int err;

	if (strlen(val) >= sizeof(buf)) {
		fprintf(stderr, "kvmmd: --cache-block-pages %s: too long\n",
			val);
		return -EINVAL;
	}
	if (!*val) {
		fprintf(stderr,
			"kvmmd: --cache-block-pages '%s': no size named\n",
			val);
		return -EINVAL;
	}
	strcpy(buf, val);
	/* strsep, not strtok_r: "4,,2", ",4" and "4," name an empty size,
	 * a typo strtok_r merged away without a word */
	rest = buf;
	while ((tok = strsep(&rest, ",")) != NULL) {
		if (!*tok) {
			fprintf(stderr,
				"kvmmd: --cache-block-pages '%s': an empty size (a comma too many: A[:W][,B[:W]...])\n",
				val);
			return -EINVAL;
		}
		strcpy(item, tok); /* the item whole, for the messages */
		w = 1;
		colon = strchr(tok, ':');
		if (colon) {
			*colon = '\0';
			err = parse_block_weight(item, colon + 1, &w);
			if (err)
				return err;
		}
		/* an item with a weight is named whole: "4x:3" */
		snprintf(what, sizeof(what), "--cache-block-pages%s%s",
			 colon ? " " : "", colon ? item : "");
		err = parse_u32(what, tok, &u, 10);
		if (err)
			return err;
		/* a block is a K and a V page per layer: an odd count, or
		 * 0, matched no region and every one was uncached */
		if (u < 2 || u % 2) {
			fprintf(stderr,
				"kvmmd: --cache-block-pages %s: a block is 2 x layers pages (an even number, at least 2; leave the option out to take the first region's)\n",
				tok);
			return -EINVAL;
		}
		for (uint32_t i = 0; i < n; i++)
			if (cfg->cache_block_sizes[i] == u) {
				fprintf(stderr,
					"kvmmd: --cache-block-pages %s: %u named twice\n",
					val, u);
				return -EINVAL;
			}
		if (n == KD_CACHE_SIZES) {
			fprintf(stderr,
				"kvmmd: --cache-block-pages %s: at most %d sizes\n",
				val, KD_CACHE_SIZES);
			return -EINVAL;
		}
		cfg->cache_block_weights[n] = w;
		cfg->cache_block_sizes[n++] = u;
	}
	cfg->nr_cache_block_sizes = n;
	cfg->cache_block_pages = cfg->cache_block_sizes[0];
	return 0;
}

/* A path or name option into its fixed buffer: refused, with one line
 * naming the option, when it does not fit (never cut short). */
static int copy_path(const char *what, char *dst, size_t len, const char *val)
{
	size_t n = strlen(val);

	if (n >= len) {
		fprintf(stderr,
			"kvmmd: %s: '%.40s...' is too long (%zu bytes, at most %zu)\n",
			what, val, n, len - 1);
		return -ENAMETOOLONG;
	}
	memcpy(dst, val, n + 1);
	return 0;
}

/*
 * --cuda-device: an ordinal (as CUDA numbers the visible devices) or a
 * UUID as nvidia-smi -L prints it ("GPU-" optional), which stays the same
 * GPU whatever CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER say: what a
 * unit per GPU should name.  Whether such a GPU exists is the backend's
 * to say at start.
 */
static int parse_device(struct kd_config *cfg, const char *val)
{
	const char *hex = strncasecmp(val, "GPU-", 4) ? val : val + 4;
	size_t digits = 0;
	uint32_t u;

	if (val[0] >= '0' && val[0] <= '9' && !strchr(val, '-')) {
		int err = parse_u32("--cuda-device", val, &u, 10);

		/* CUDA's ordinals are ints: 2147483648 to 4294967295 exited
		 * 2 without a word */
		if (!err && u > INT32_MAX) {
			fprintf(stderr,
				"kvmmd: --cuda-device: %s is out of range (an ordinal at most %d, or a UUID)\n",
				val, INT32_MAX);
			err = -ERANGE;
		}
		if (err)
			return err;
		cfg->cuda_device = (int)u;
		cfg->gpu_uuid[0] = '\0';
		return 0;
	}
	for (const char *p = hex; *p; p++) {
		if (isxdigit((unsigned char)*p))
			digits++;
		else if (*p != '-')
			digits = 1000; /* not a UUID */
	}
	if (digits != 32 || strlen(val) >= sizeof(cfg->gpu_uuid)) {
		fprintf(stderr,
			"kvmmd: --cuda-device: '%s' is not a GPU ordinal or UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L prints it)\n",
			val);
		return -EINVAL;
	}
	memcpy(cfg->gpu_uuid, val, strlen(val) + 1);
	return 0;
}

/* Which enum kd_origin an option key is, or -1: not checked later. */
static int origin_of(int key)
{
	switch (key) {
	case 's':
		return KD_ORIGIN_SOCKET;
	case KD_OPT_POLICY_STATE:
		return KD_ORIGIN_POLICY_STATE;
	case 'H':
		return KD_ORIGIN_HOST_MEM;
	case 'N':
		return KD_ORIGIN_NVME_PATH;
	case 'Z':
		return KD_ORIGIN_NVME_SIZE;
	case KD_OPT_CACHE_BLOCK_PAGES:
		return KD_ORIGIN_CACHE_BLOCK_PAGES;
	case 'm':
		return KD_ORIGIN_GPU_MEM;
	case 'C':
		return KD_ORIGIN_CPU;
	default:
		return -1;
	}
}

const char *kd_config_where(const struct kd_config *cfg, int origin, char *buf,
			    size_t len)
{
	const struct kd_opt_origin *o = &cfg->origin[origin];

	if (!o->file)
		return "";
	snprintf(buf, len, "%s:%d: ", o->file, o->line);
	return buf;
}

static int apply(struct kd_config *cfg, int key, const char *val);

int kd_option_apply(struct kd_config *cfg, int key, const char *val)
{
	int err = apply(cfg, key, val), o = origin_of(key);

	if (!err && o >= 0)
		cfg->origin[o] = cfg->src;
	return err;
}

static int apply(struct kd_config *cfg, int key, const char *val)
{
	uint64_t size;
	/* the cases below store u and return parse_u32()'s error, which
	 * leaves u unset: 0, not stack garbage, in cfg until kvmmd exits */
	uint32_t u = 0;
	int err;

	switch (key) {
	case 's':
		/* there is no socket to turn off: "" bound a socket named
		 * ".PID" where kvmmd started, whose rename to "" failed
		 * (exit 1) */
		if (!*val) {
			fprintf(stderr,
				"kvmmd: --socket: an empty path (give the socket's path, or leave the option out for /run/kvmm/kvmm.sock)\n");
			return -EINVAL;
		}
		return copy_path("--socket", cfg->socket_path,
				 sizeof(cfg->socket_path), val);
	case 'b':
		if (!strcmp(val, "host"))
			cfg->backend = VMM_BACKEND_HOST;
		else if (!strcmp(val, "cuda"))
			cfg->backend = VMM_BACKEND_CUDA;
		else if (!strcmp(val, "auto"))
			cfg->backend = VMM_BACKEND_AUTO;
		else {
			fprintf(stderr,
				"kvmmd: --backend: '%s' is not host, cuda or auto\n",
				val);
			return -EINVAL;
		}
		return 0;
	case 'm':
		err = kd_parse_size("kvmmd: --gpu-mem", val, &size);
		if (err)
			return err;
		/* it meant the default (4096 pages), while 1 was refused */
		if (!size) {
			fprintf(stderr,
				"kvmmd: --gpu-mem: 0 is no pool (leave the option out for the default, 4096 pages)\n");
			return -EINVAL;
		}
		cfg->gpu_mem = size;
		return 0;
	case 'p':
		err = kd_parse_size("kvmmd: --page-size", val, &size);
		if (err)
			return err;
		if (!size || size % 4096) {
			fprintf(stderr,
				"kvmmd: --page-size: %s is not a multiple of 4K\n",
				val);
			return -EINVAL;
		}
		/* 1T made a pool of 4 PiB by default; no GPU maps pages
		 * that large, nor does the host backend want them */
		if (size > KD_PAGE_SIZE_MAX) {
			fprintf(stderr,
				"kvmmd: --page-size: %s is more than 1G (the largest page kvmmd maps)\n",
				val);
			return -EINVAL;
		}
		cfg->page_size = size;
		return 0;
	case 'd':
		return parse_device(cfg, val);
	case 'C':
		err = parse_u32("--cpu", val, &u, 10);
		if (!err && u >= CPU_SETSIZE) {
			fprintf(stderr, "kvmmd: --cpu: %s is out of range\n",
				val);
			return -EINVAL;
		}
		cfg->cpu = u;
		return err;
	case 'r':
		err = parse_u32("--revoke-timeout", val, &u, 10);
		if (!err && !u) {
			fprintf(stderr,
				"kvmmd: --revoke-timeout: must be > 0\n");
			return -EINVAL;
		}
		cfg->revoke_timeout_ms = u;
		return err;
	case 'S':
		return parse_u32("--spin-us", val, &cfg->spin_us, 10);
	case KD_OPT_LEND_WAIT:
		return parse_u32("--lend-wait", val, &cfg->lend_wait_ms, 10);
	case 'M':
		err = parse_u32("--socket-mode", val, &u, 8);
		if (!err && u > 0777) {
			fprintf(stderr,
				"kvmmd: --socket-mode: %s is more than 0777 (permission bits only: no setuid, setgid or sticky bit)\n",
				val);
			return -EINVAL;
		}
		cfg->socket_mode = u;
		return err;
	case 'l':
		err = kd_parse_log_level(val);
		if (err < 0) {
			fprintf(stderr,
				"kvmmd: --log-level: '%s' is not err, warn, info or debug\n",
				val);
			return err;
		}
		cfg->log_level = err;
		return 0;
	case 'P':
		return copy_path("--pid-file", cfg->pid_file,
				 sizeof(cfg->pid_file), val);
	case KD_OPT_LOG_FILE:
		return copy_path("--log-file", cfg->log_file,
				 sizeof(cfg->log_file), val);
	case 'f':
		cfg->foreground = true;
		return 0;
	case 'H':
		return kd_parse_size("kvmmd: --host-mem", val, &cfg->host_mem);
	case 'N':
		return copy_path("--nvme-path", cfg->nvme_path,
				 sizeof(cfg->nvme_path), val);
	case 'Z':
		err = kd_parse_size("kvmmd: --nvme-size", val, &size);
		if (err)
			return err;
		/* 0 read as "not given": "--nvme-size 0" then heard "does
		 * not exist: give --nvme-size", or had the file's own size */
		if (!size) {
			fprintf(stderr,
				"kvmmd: --nvme-size: 0 is no tier (leave the option out to use an existing file at its own size, a block device whole)\n");
			return -EINVAL;
		}
		cfg->nvme_size = size;
		return 0;
	case 'G':
		/* a count of blocks, not a size */
		err = parse_u32("--cache-gpu-blocks", val, &u, 10);
		cfg->cache_gpu_blocks = u;
		return err;
	case 'U':
		return parse_u32("--nvme-admit-uses", val,
				 &cfg->nvme_admit_uses, 10);
	case KD_OPT_NVME_SAVE:
		return parse_u32("--nvme-save-on-stop", val, &cfg->nvme_save_ms,
				 10);
	case KD_OPT_PIN_QUOTA:
		return parse_u32("--pin-quota", val, &cfg->pin_quota, 10);
	case KD_OPT_SESSIONS_PER_UID:
		return parse_u32("--max-sessions-per-uid", val,
				 &cfg->max_sessions_per_uid, 10);
	case KD_OPT_QUARANTINE_PER_UID:
		err = parse_u32("--quarantine-per-uid", val, &u, 10);
		if (!err && (!u || u > KD_ZOMBIES_PER_UID_MAX)) {
			fprintf(stderr,
				"kvmmd: --quarantine-per-uid: %u: must be at least 1 (0 refuses every process of a non-admin uid its session) and at most %d\n",
				u, KD_ZOMBIES_PER_UID_MAX);
			return -EINVAL;
		}
		cfg->quarantine_per_uid = u;
		return err;
	case KD_OPT_MAX_SESSIONS:
		err = parse_u32("--max-sessions", val, &u, 10);
		if (!err && (u <= KD_ADMIN_SESSIONS || u > KD_MAX_SESSIONS)) {
			fprintf(stderr,
				"kvmmd: --max-sessions: %u: must be above %d (the admin uids' sessions) and at most %d\n",
				u, KD_ADMIN_SESSIONS, KD_MAX_SESSIONS);
			return -EINVAL;
		}
		cfg->max_sessions = u;
		return err;
	case KD_OPT_HELLO_TIMEOUT:
		err = parse_u32("--hello-timeout", val, &u, 10);
		if (!err && !u) {
			fprintf(stderr,
				"kvmmd: --hello-timeout: must be > 0 (a connection that never sends HELLO keeps its slot)\n");
			return -EINVAL;
		}
		cfg->hello_timeout_ms = u;
		return err;
	case KD_OPT_TABLE_ENTRIES:
		/* a count of entries, not a size */
		err = parse_u32("--max-table-entries-per-uid", val, &u, 10);
		cfg->max_table_entries = u;
		return err;
	case KD_OPT_HOST_NUMA_NODE:
		err = parse_u32("--host-numa-node", val, &u, 10);
		if (err)
			return err;
		if (u > (uint32_t)tier_host_max_node()) {
			fprintf(stderr,
				"kvmmd: --host-numa-node %u: this machine's NUMA nodes are 0 to %d\n",
				u, tier_host_max_node());
			return -EINVAL;
		}
		cfg->host_numa_node = (int)u;
		return 0;
	case KD_OPT_CACHE_BLOCK_PAGES:
		return parse_block_sizes(cfg, val);
	case 'Y': {
		enum pol_kind k;

		if (pol_kind_parse(val, &k) || k == POL_BELADY) {
			fprintf(stderr,
				"kvmmd: --cache-policy: '%s' is not lru, lfu, "
				"arc or asym (belady needs the future: "
				"kvmm-replay only)\n",
				val);
			return -EINVAL;
		}
		cfg->cache_policy = (int)k;
		return 0;
	}
	case KD_OPT_POLICY_STATE:
		return copy_path("--policy-state", cfg->policy_state,
				 sizeof(cfg->policy_state), val);
	case KD_OPT_CACHE_SCOPE:
		return kd_scope_parse(val, &cfg->cache_scope);
	case KD_OPT_RESTORE_MODE:
		return kd_restore_mode_parse(val, &cfg->restore_mode);
	case KD_OPT_METRICS_LISTEN: {
		struct sockaddr_storage ss;
		socklen_t len;

		if (strlen(val) >= sizeof(cfg->metrics_listen)) {
			fprintf(stderr,
				"kvmmd: --metrics-listen: '%s' is too long\n",
				val);
			return -ENAMETOOLONG;
		}
		err = kd_metrics_parse_listen(val, &ss, &len);
		if (err)
			return err;
		strcpy(cfg->metrics_listen, val);
		return 0;
	}
	case 'q': {
		const char *eq = strchr(val, '=');
		char uid[32];

		if (!eq || eq == val || (size_t)(eq - val) >= sizeof(uid)) {
			fprintf(stderr,
				"kvmmd: --quota: '%s' is not UID=SIZE\n", val);
			return -EINVAL;
		}
		memcpy(uid, val, eq - val);
		uid[eq - val] = '\0';
		err = parse_u32("--quota uid", uid, &u, 10);
		if (!err)
			err = kd_parse_size("kvmmd: --quota", eq + 1, &size);
		if (err)
			return err;
		for (uint32_t i = 0; i < cfg->nr_quotas; i++) {
			if (cfg->quotas[i].uid == u) {
				cfg->quotas[i].bytes = size;
				return 0;
			}
		}
		if (cfg->nr_quotas == KD_MAX_QUOTA_OPTS) {
			fprintf(stderr,
				"kvmmd: --quota: more than %d uids (set more with kvmmctl quota)\n",
				KD_MAX_QUOTA_OPTS);
			return -ENOSPC;
		}
		cfg->quotas[cfg->nr_quotas++] =
			(struct kd_quota_opt){ .uid = u, .bytes = size };
		return 0;
	}
	case KD_OPT_TENANT_LIMIT: {
		const char *eq = strchr(val, '=');
		struct kd_tenant_limit l;
		char id[32];
		uint32_t i;

		if (!eq || eq == val || (size_t)(eq - val) >= sizeof(id)) {
			fprintf(stderr,
				"kvmmd: --tenant-limit: '%s' is not ID=TIER:N[,TIER:N...] (TIER gpu, host or nvme) or ID=none\n",
				val);
			return -EINVAL;
		}
		memcpy(id, val, eq - val);
		id[eq - val] = '\0';
		err = parse_u32("--tenant-limit id", id, &l.id, 10);
		if (!err && l.id == KVMM_TENANT_OTHERS) {
			fprintf(stderr,
				"kvmmd: --tenant-limit: %s is not a uid or gid\n",
				id);
			err = -EINVAL;
		}
		if (!err)
			err = kd_parse_tenant_limit(
				"kvmmd: --tenant-limit: ", eq + 1, l.blocks);
		if (err)
			return err;
		/* the last one for an id wins */
		for (i = 0; i < cfg->nr_tenant_limits; i++)
			if (cfg->tenant_limits[i].id == l.id)
				break;
		if (i == KD_MAX_TENANT_LIMITS) {
			fprintf(stderr,
				"kvmmd: --tenant-limit: more than %d tenants (set more with kvmmctl tenant-limit)\n",
				KD_MAX_TENANT_LIMITS);
			return -ENOSPC;
		}
		cfg->tenant_limits[i] = l;
		cfg->tenant_limit_origin[i] = cfg->src;
		if (i == cfg->nr_tenant_limits)
			cfg->nr_tenant_limits++;
		return 0;
	}
	case 'T': {
		enum tel_mode m;

		if (tel_mode_parse(val, &m) || m == TEL_MODE_PINNED) {
			fprintf(stderr,
				"kvmmd: --telemetry: '%s' is not auto, bpf, shm or off\n",
				val);
			return -EINVAL;
		}
		cfg->telemetry = m;
		return 0;
	}
	case 'R':
		return copy_path("--telemetry-pin-root",
				 cfg->telemetry_pin_root,
				 sizeof(cfg->telemetry_pin_root), val);
	case 'A':
		if (cfg->nr_telemetry_attach == KD_MAX_TELEMETRY_ATTACH) {
			fprintf(stderr,
				"kvmmd: --telemetry-attach: too many\n");
			return -ENOSPC;
		}
		err = copy_path("--telemetry-attach",
				cfg->telemetry_attach[cfg->nr_telemetry_attach],
				sizeof(cfg->telemetry_attach[0]), val);
		if (!err)
			cfg->nr_telemetry_attach++;
		return err;
	case 'W':
		return copy_path("--profile", cfg->profile,
				 sizeof(cfg->profile), val);
	case KD_OPT_SOCKET_GROUP: {
		struct group *g;

		/* a name, or a number (a group without a name here) */
		errno = 0;
		g = getgrnam(val);
		if (g) {
			cfg->socket_group = g->gr_gid;
			return 0;
		}
		if (isdigit((unsigned char)*val) &&
		    !parse_u32("--socket-group", val, &u, 10) &&
		    u != (uint32_t)-1) {
			cfg->socket_group = (gid_t)u;
			return 0;
		}
		fprintf(stderr, "kvmmd: --socket-group: '%s' is no group%s%s\n",
			val, errno ? ": " : "", errno ? strerror(errno) : "");
		return -EINVAL;
	}
	case KD_OPT_NVME_FORMAT:
		cfg->nvme_format = true;
		return 0;
	default:
		return -EINVAL;
	}
}
