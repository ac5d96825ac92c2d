// SPDX-License-Identifier: MIT
/*
 * Relative path options of a daemonizing kvmmd.  daemonize() moves to /
 * (so that kvmmd holds no directory busy), and every path used after it,
 * at the start or later (the socket, the pid file, the policy state and
 * its saves, the NVMe tier, the log file reopened on SIGHUP), resolved
 * against / instead of where kvmmd was started: "cd /tmp/x; kvmmd
 * --socket rel.sock" made /rel.sock, and "kvmmctl --socket rel.sock"
 * found nothing.  They are made absolute here, before it daemonizes,
 * once every option (command line and config files: both are relative
 * to where kvmmd starts) is read.  In the foreground nothing moves, and
 * the paths stay as given.
 *
 * It also says which of the errors a path option's file gives at start
 * are the operator's (exit 2) and which may pass (exit 1): admin.md,
 * "The rule for a refused start".
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/paths.h"

struct cwd {
	char path[PATH_MAX];
	bool known;
};

/* path (in a buffer of len) prefixed with the current directory unless
 * it is absolute or empty (off) */
static int make_absolute(const char *what, struct cwd *cwd, char *path,
			 size_t len)
{
	char abs[PATH_MAX + 256];
	int n;

	if (!path[0] || path[0] == '/')
		return 0;
	if (!cwd->known) {
		if (!getcwd(cwd->path, sizeof(cwd->path))) {
			int err = -errno;

			fprintf(stderr,
				"kvmmd: %s %s: the current directory, which it is relative to, is not known: %s\n",
				what, path, strerror(-err));
			return err;
		}
		cwd->known = true;
	}
	/* "/" and "rel" make "/rel", not "//rel" */
	n = snprintf(abs, sizeof(abs), "%s/%s",
		     strcmp(cwd->path, "/") ? cwd->path : "", path);
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr,
			"kvmmd: %s: '%s' is too long made absolute ('%.40s...', %d bytes, at most %zu): give a shorter path\n",
			what, path, abs, n, len - 1);
		return -ENAMETOOLONG;
	}
	memcpy(path, abs, (size_t)n + 1);
	return 0;
}

/* --profile NAME is looked up among the profiles; only a path (a '/' in
 * it, or .profile at its end: pol_cost_load()) is relative */
static bool profile_is_path(const char *p)
{
	size_t n = strlen(p), ext = strlen(".profile");

	return strchr(p, '/') || (n >= ext && !strcmp(p + n - ext, ".profile"));
}

#define ABS(what, field)                                               \
	do {                                                           \
		err = make_absolute(what, &cwd, field, sizeof(field)); \
		if (err)                                               \
			return err;                                    \
	} while (0)

int kd_config_paths_absolute(struct kd_config *cfg)
{
	struct cwd cwd = { .known = false };
	int err;

	ABS("--socket", cfg->socket_path);
	ABS("--pid-file", cfg->pid_file);
	ABS("--log-file", cfg->log_file);
	ABS("--policy-state", cfg->policy_state);
	ABS("--nvme-path", cfg->nvme_path);
	ABS("--telemetry-pin-root", cfg->telemetry_pin_root);
	for (uint32_t i = 0; i < cfg->nr_telemetry_attach; i++)
		ABS("--telemetry-attach", cfg->telemetry_attach[i]);
	if (profile_is_path(cfg->profile))
		ABS("--profile", cfg->profile);
	return 0;
}

int kd_path_refused(const char *option, const char *path, int err)
{
	const char *why = strerror(err < 0 ? -err : err);

	if (kd_path_err_is_operators(err)) {
		fprintf(stderr,
			"kvmmd: %s %s: %s\n"
			"kvmmd: cannot start: an option is wrong (above)\n",
			option, path, why);
		return 2;
	}
	fprintf(stderr, "kvmmd: cannot start: %s %s: %s\n", option, path, why);
	return 1;
}

bool kd_path_err_is_operators(int err)
{
	switch (err < 0 ? -err : err) {
	case EISDIR:
	case ENOENT:
	case ENOTDIR:
	case ELOOP:
	case EACCES:
	case EPERM:
	case EROFS:
	case ENAMETOOLONG:
		return true;
	default:
		return false;
	}
}
