// SPDX-License-Identifier: MIT
/*
 * kvmmd's log sink.  vmm_log() writes the lines; this decides where they
 * go.  In the foreground they go to stderr (under systemd, the journal).
 * A daemonized kvmmd used to send stdout and stderr to /dev/null once its
 * socket accepted, and every later line, a WARN, the port --metrics-listen
 * 0 picked, was lost; now it logs to syslog (facility daemon, "kvmmd[PID]")
 * or, with --log-file PATH, to that file, in the foreground too.
 *
 * Until the socket accepts, the lines go to stderr as well: whoever
 * started kvmmd reads why a start failed.  Then the log file becomes
 * stderr too, so that anything else written there (a library's message)
 * lands in it, and SIGHUP reopens it for logrotate: the handler does only
 * open(), dup2() and close(), all async-signal-safe, so it may run on any
 * thread (none blocks SIGHUP).  vmm_log keeps writing to the same fd
 * number, which dup2() points at the new file in one step: a line that
 * another thread writes meanwhile goes to the old file or the new one,
 * never to a closed fd or to one reused for something else.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/log_sink.h"
#include "kvmm/kvmmd/paths.h"

/* the log file's fd (vmm_log's sink), -1 without one */
static int log_fd = -1;
/* the path SIGHUP reopens: cfg->log_file, absolute once daemonized */
static char reopen_path[sizeof(((struct kd_config *)0)->log_file)];

/* O_NONBLOCK only for the open: a FIFO with no reader would hang it */
static int open_log(const char *path)
{
	int fd = open(path,
		      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY |
			      O_NONBLOCK,
		      0640);
	int fl;

	if (fd < 0)
		return -1;
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

int kd_log_start(const struct kd_config *cfg)
{
	if (cfg->log_file[0]) {
		log_fd = open_log(cfg->log_file);
		if (log_fd < 0) {
			int err = -errno;

			/* the rule for a refused start (admin.md): a path
			 * the operator must change (a directory, a missing
			 * directory: it was exit 1 too) is exit 2 */
			(void)kd_path_refused("--log-file", cfg->log_file, err);
			return err;
		}
		vmm_log_to_fd(log_fd);
	} else if (!cfg->foreground) {
		vmm_log_to_syslog("kvmmd");
	} else {
		return 0;
	}
	vmm_log_stderr_too(true);
	return 0;
}

static void on_sighup(int sig)
{
	int e = errno, fd = open_log(reopen_path);

	(void)sig;
	/* one that cannot be opened (a directory gone) keeps the old */
	if (fd >= 0) {
		dup2(fd, log_fd);
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
	errno = e;
}

static void null_stdio(bool err_too)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	if (err_too)
		dup2(fd, STDERR_FILENO);
	close(fd);
}

void kd_log_ready(const struct kd_config *cfg)
{
	struct sigaction sa = { .sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	vmm_log_stderr_too(false);
	if (log_fd >= 0) {
		dup2(log_fd, STDERR_FILENO);
		snprintf(reopen_path, sizeof(reopen_path), "%s", cfg->log_file);
		sa.sa_handler = on_sighup;
	} else if (!cfg->foreground) {
		/* nothing to reopen, and a stray HUP must not stop it */
		sa.sa_handler = SIG_IGN;
	}
	if (!cfg->foreground)
		null_stdio(!cfg->log_file[0]);
	if (sa.sa_handler && sigaction(SIGHUP, &sa, NULL) < 0)
		vmm_log(VMM_LOG_WARN, "SIGHUP: %s (the log is not reopened)",
			strerror(errno));
}
