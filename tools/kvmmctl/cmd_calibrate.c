// SPDX-License-Identifier: MIT
/*
 * kvmmctl calibrate [kvmm-calibrate options...]: run kvmm-calibrate, the
 * program that measures a cost-model profile on a GPU, for the operator.
 *
 * It is looked up next to this kvmmctl (the directory of /proc/self/exe,
 * so build/kvmmctl finds build/kvmm-calibrate and an installed one its
 * installed sibling), then in $PATH.  It is built only where nvcc is, so
 * a missing one is a one-line error naming what to build, exit 1.  The
 * options go through unchanged and kvmmctl exits with its status (77: no
 * GPU, nothing written).
 *
 * With --socket, the daemon is asked for its status first, so a wrong
 * socket fails before minutes of measuring, and once the profile is
 * written calibrate_report() compares it with the daemon's cost model and
 * prints the restart command that adopts it: kvmmd has no way to swap its
 * model at run time (--profile is read at start).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/kvmmctl/kvmmctl.h"

#define CALIBRATE_BIN "kvmm-calibrate"
/* kvmm-calibrate's own default for --out */
#define CALIBRATE_DEFAULT_OUT "calibrated.profile"

static bool is_program(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode) && !access(path, X_OK);
}

/* dir/name into buf; false if it does not fit or is not a program. */
static bool try_dir(const char *dir, size_t dir_len, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%.*s/%s", (int)dir_len, dir, CALIBRATE_BIN);

	return n > 0 && (size_t)n < len && is_program(buf);
}

/*
 * kvmm-calibrate next to this program, then in $PATH (an empty or unset
 * $PATH searches nothing).  0 with the path in buf, or -ENOENT; self gets
 * this program's directory ("" if unknown) for the error message.
 */
static int find_calibrate(char *buf, size_t len, char *self, size_t self_len)
{
	const char *p = getenv("PATH");
	ssize_t n;
	char *slash;

	n = readlink("/proc/self/exe", self, self_len - 1);
	self[n > 0 ? n : 0] = '\0';
	slash = strrchr(self, '/');
	if (slash) {
		*slash = '\0';
		if (try_dir(self, strlen(self), buf, len))
			return 0;
	} else {
		self[0] = '\0';
	}
	while (p && *p) {
		const char *end = strchrnul(p, ':');

		/* an empty entry is the current directory, as for execvp */
		if (end == p ? try_dir(".", 1, buf, len) :
			       try_dir(p, (size_t)(end - p), buf, len))
			return 0;
		p = *end ? end + 1 : end;
	}
	return -ENOENT;
}

/* The value of --out among kvmm-calibrate's options, or its default. */
static const char *out_path(int argc, char **argv)
{
	const char *out = CALIBRATE_DEFAULT_OUT;

	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--out"))
			out = argv[++i];
	return out;
}

/* Fork, exec path with argv[1..], wait: an exit-status-like int. */
static int run(const char *path, int argc, char **argv)
{
	char *args[64];
	int status;
	pid_t pid;

	args[0] = (char *)path;
	for (int i = 1; i < argc && i < 63; i++)
		args[i] = argv[i];
	args[argc < 63 ? argc : 63] = NULL;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "kvmmctl: calibrate: fork: %s\n",
			strerror(errno));
		return 1;
	}
	if (pid == 0) {
		execv(path, args);
		fprintf(stderr, "kvmmctl: calibrate: %s: %s\n", path,
			strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "kvmmctl: calibrate: waitpid: %s\n",
				strerror(errno));
			return 1;
		}
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "kvmmctl: %s killed by signal %d (%s)\n", path,
			WTERMSIG(status), strsignal(WTERMSIG(status)));
		return 128 + WTERMSIG(status);
	}
	return WEXITSTATUS(status);
}

/* Fail early on a socket nobody answers on: measuring takes minutes. */
static int check_daemon(struct kvmmctl_ctx *ctx)
{
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	int err;

	if (kvmmctl_connect(ctx, &c))
		return -ENOTCONN;
	err = kvmmctl_fetch_status(c, &st, NULL, NULL);
	kvmm_disconnect(c);
	if (err)
		fprintf(stderr, "kvmmctl: calibrate: %s\n",
			kvmmctl_strerror(ctx, err));
	return err;
}

int cmd_calibrate(int argc, char **argv, struct kvmmctl_ctx *ctx)
{
	char path[PATH_MAX], self[PATH_MAX];
	int rc;

	/* after the command too: kvmm-calibrate, which gets the rest of the
	 * line, would refuse it as an unknown option of its own */
	for (int i = 1; i < argc && !ctx->json; i++)
		ctx->json = !strcmp(argv[i], "--json");
	if (ctx->json) {
		fprintf(stderr,
			"kvmmctl: calibrate has no --json output (the profile is the result)\n");
		return 2;
	}
	if (find_calibrate(path, sizeof(path), self, sizeof(self))) {
		fprintf(stderr,
			"kvmmctl: calibrate: %s not found next to kvmmctl (%s) or in $PATH: build it with `make`, which needs nvcc (the CUDA toolkit; without it the build skips %s)\n",
			CALIBRATE_BIN, self[0] ? self : "?",
			"build/" CALIBRATE_BIN);
		return 1;
	}
	if (ctx->socket && check_daemon(ctx))
		return 1;
	rc = run(path, argc, argv);
	if (rc || !ctx->socket)
		return rc;
	return calibrate_report(ctx, out_path(argc, argv)) ? 1 : 0;
}
