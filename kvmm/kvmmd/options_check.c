// SPDX-License-Identifier: MIT
/*
 * kvmmd's options checked together once the command line and the config
 * file are all read (kd_config_check()): options that need one another
 * (--nvme-size and --nvme-path, --nvme-path and --host-mem, a tenant
 * limit on a tier there is), and what the system says of a value
 * (--socket, --cpu, --policy-state, --nvme-path), each error naming the
 * config file's line that set it.  Split from options.c, which applies
 * each option as it is read.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "kvmm/kvmmd/options.h"
#include "kvmm/policy/policy.h"

/*
 * --nvme-path at option time: what the tier's open would find only at the
 * first publish without --cache-block-pages (a path whose directory is
 * no directory, a file with no size to make it; tiers.md).  A directory
 * that does not exist yet is waited for.  Whether another kvmmd holds it and
 * what it holds is the start's to say (cache_nvme_join.c, kc_nvme_claim()).
 */
static int check_nvme_path(const struct kd_config *cfg)
{
	char where[300], dir[sizeof(cfg->nvme_path)], *slash;
	const char *w =
		kd_config_where(cfg, KD_ORIGIN_NVME_PATH, where, sizeof(where));
	const char *path = cfg->nvme_path;
	struct stat st;

	if (!stat(path, &st)) {
		if (S_ISBLK(st.st_mode))
			return 0;
		if (!S_ISREG(st.st_mode)) {
			fprintf(stderr,
				"kvmmd: %s--nvme-path %s: not a file or a block device\n",
				w, path);
			return -EINVAL;
		}
		/* a file a run before made opens at its own size */
		if (!cfg->nvme_size && !st.st_size) {
			fprintf(stderr,
				"kvmmd: %s--nvme-path %s is an empty file: give --nvme-size\n",
				w, path);
			return -EINVAL;
		}
		return 0;
	}
	if (errno != ENOENT) {
		fprintf(stderr, "kvmmd: %s--nvme-path %s: %s\n", w, path,
			strerror(errno));
		return -errno;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash) {
		slash[slash == dir] = '\0';
		/*
		 * A directory that is not there yet (a file system mounted
		 * later at boot, a directory made later): the start goes
		 * on, and the tier joins when it can be claimed
		 * (cache_nvme_join.c).  One that is no directory is a path
		 * no wait mends.
		 */
		if (stat(dir, &st) ? errno != ENOENT : !S_ISDIR(st.st_mode)) {
			fprintf(stderr,
				"kvmmd: %s--nvme-path %s: %s is not a directory\n",
				w, path, dir);
			return -ENOTDIR;
		}
	}
	if (!cfg->nvme_size) {
		fprintf(stderr,
			"kvmmd: %s--nvme-path %s does not exist: give --nvme-size\n",
			w, path);
		return -EINVAL;
	}
	return 0;
}

/* --cpu N: one this process may run on (a WARN and an unpinned loop at
 * start, before; admin.md says a bad value stops the start). */
static int check_cpu(const struct kd_config *cfg)
{
	char where[300];
	cpu_set_t set;
	int first = -1, last = -1;

	if (cfg->cpu < 0 || sched_getaffinity(0, sizeof(set), &set))
		return 0;
	if (CPU_ISSET(cfg->cpu, &set))
		return 0;
	for (int i = 0; i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, &set))
			continue;
		if (first < 0)
			first = i;
		last = i;
	}
	fprintf(stderr,
		"kvmmd: %s--cpu %d: not a CPU kvmmd may run on (%d of them, %d to %d)\n",
		kd_config_where(cfg, KD_ORIGIN_CPU, where, sizeof(where)),
		cfg->cpu, CPU_COUNT(&set), first, last);
	return -EINVAL;
}

int kd_config_check(const struct kd_config *cfg)
{
	char why[sizeof(cfg->policy_state) + 200], where[300];
	struct stat st;
	int err;

#define WHERE(o) kd_config_where(cfg, o, where, sizeof(where))
	/* a file someone gave as --socket was unlinked for the socket */
	if (kd_socket_path_check(cfg->socket_path) == -EEXIST) {
		fprintf(stderr,
			"kvmmd: %s--socket %s: exists and is not a socket\n",
			WHERE(KD_ORIGIN_SOCKET), cfg->socket_path);
		return -EEXIST;
	}
	/* a path under a file: the start's mkdir -p found it (exit 1, as
	 * if a later start could work) */
	if (stat(cfg->socket_path, &st) && errno == ENOTDIR) {
		fprintf(stderr,
			"kvmmd: %s--socket %s: Not a directory (a file on the path where a directory should be)\n",
			WHERE(KD_ORIGIN_SOCKET), cfg->socket_path);
		return -ENOTDIR;
	}
	err = check_cpu(cfg);
	if (err)
		return err;
	/* a FIFO there hung the start (its open waited for a writer, and
	 * SIGTERM with it); a directory or a link the saves cannot keep */
	if (cfg->policy_state[0] &&
	    pol_learned_check_path(cfg->policy_state, why, sizeof(why))) {
		fprintf(stderr, "kvmmd: %s--policy-state: %s\n",
			WHERE(KD_ORIGIN_POLICY_STATE), why);
		return -EINVAL;
	}
	/* it was ignored without a word */
	if (cfg->nvme_size && !cfg->nvme_path[0]) {
		fprintf(stderr,
			"kvmmd: %s--nvme-size without --nvme-path: there is no NVMe tier to size\n",
			WHERE(KD_ORIGIN_NVME_SIZE));
		return -EINVAL;
	}
	/* blocks reach NVMe only through host slots (tiers.md) */
	if (cfg->nvme_path[0] && !cfg->host_mem) {
		fprintf(stderr,
			"kvmmd: %s--nvme-path %s needs --host-mem: blocks reach the NVMe tier through the host tier\n",
			WHERE(KD_ORIGIN_NVME_PATH), cfg->nvme_path);
		return -EINVAL;
	}
	if (cfg->nvme_path[0]) {
		err = check_nvme_path(cfg);
		if (err)
			return err;
	}
	for (uint32_t i = 0; i < cfg->nr_tenant_limits; i++) {
		const struct kd_tenant_limit *l = &cfg->tenant_limits[i];
		const struct kd_opt_origin *o = &cfg->tenant_limit_origin[i];
		const char *no = l->blocks[1] && !cfg->host_mem ?
					 "host tier (--host-mem)" :
				 l->blocks[2] && !cfg->nvme_path[0] ?
					 "NVMe tier (--nvme-path)" :
					 NULL;

		if (o->file)
			snprintf(where, sizeof(where), "%s:%d: ", o->file,
				 o->line);
		else
			where[0] = '\0';
		if (no) {
			fprintf(stderr,
				"kvmmd: %s--tenant-limit %u: there is no %s to limit\n",
				where, l->id, no);
			return -EINVAL;
		}
	}
#undef WHERE
	return 0;
}
