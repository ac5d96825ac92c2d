/* SPDX-License-Identifier: MIT */
/*
 * vmm_log: one line per message on stderr, "TIME LEVEL prog[pid]: text".
 *
 * The line is formatted into a local buffer and written with a single
 * write(2) so lines from several threads or processes sharing stderr do not
 * interleave.  The level is a process-wide threshold; KVMM_LOG_LEVEL
 * (err|warn|info|debug or 0..3) sets the initial one, vmm_log_set_level()
 * overrides it.
 *
 * A daemon sends its lines elsewhere once it leaves the terminal: to a
 * file (vmm_log_to_fd()) or to syslog (vmm_log_to_syslog(), the level as
 * the priority; syslog adds its own time and ident[pid]).  While it
 * starts, vmm_log_stderr_too() keeps a copy on stderr, so whoever
 * started it still reads why a start failed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "vmm/vmm.h"

/* -1 until first use, then the threshold; races only ever store the same
 * value computed from the environment. */
static int log_level = -1;

/* Where the lines go (set while the process starts, read by every
 * thread: relaxed atomics, as log_level): log_fd unless log_syslog, and
 * stderr as well with log_stderr_too. */
static int log_fd = STDERR_FILENO;
static bool log_syslog;
static bool log_stderr_too;

static const int syslog_prio[] = {
	[VMM_LOG_ERR] = LOG_ERR,
	[VMM_LOG_WARN] = LOG_WARNING,
	[VMM_LOG_INFO] = LOG_INFO,
	[VMM_LOG_DEBUG] = LOG_DEBUG,
};

static const char *const level_names[] = {
	[VMM_LOG_ERR] = "ERR",
	[VMM_LOG_WARN] = "WARN",
	[VMM_LOG_INFO] = "INFO",
	[VMM_LOG_DEBUG] = "DEBUG",
};

static int level_from_env(void)
{
	const char *s = getenv("KVMM_LOG_LEVEL");
	unsigned int i;

	if (!s || !*s)
		return VMM_LOG_INFO;
	if (s[0] >= '0' && s[0] <= '3' && !s[1])
		return s[0] - '0';
	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (!strcasecmp(s, level_names[i]) ||
		    (i == VMM_LOG_ERR && !strcasecmp(s, "error")) ||
		    (i == VMM_LOG_WARN && !strcasecmp(s, "warning")))
			return (int)i;
	return VMM_LOG_INFO;
}

void vmm_log_set_level(enum vmm_log_level level)
{
	if ((int)level < VMM_LOG_ERR)
		level = VMM_LOG_ERR;
	if (level > VMM_LOG_DEBUG)
		level = VMM_LOG_DEBUG;
	__atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

void vmm_log_to_fd(int fd)
{
	__atomic_store_n(&log_fd, fd, __ATOMIC_RELAXED);
	__atomic_store_n(&log_syslog, false, __ATOMIC_RELAXED);
}

void vmm_log_to_syslog(const char *ident)
{
	/* LOG_NDELAY: connect now, so the first line does not wait on it;
	 * glibc reconnects by itself if syslogd restarts */
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	__atomic_store_n(&log_syslog, true, __ATOMIC_RELAXED);
}

void vmm_log_stderr_too(bool on)
{
	__atomic_store_n(&log_stderr_too, on, __ATOMIC_RELAXED);
}

static void write_all(int fd, const char *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, buf + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
}

static int current_level(void)
{
	int l = __atomic_load_n(&log_level, __ATOMIC_RELAXED);

	if (l < 0) {
		l = level_from_env();
		__atomic_store_n(&log_level, l, __ATOMIC_RELAXED);
	}
	return l;
}

void vmm_log(enum vmm_log_level level, const char *fmt, ...)
{
	char buf[1024];
	struct timespec ts;
	struct tm tm;
	size_t n, off = 0, text;
	int saved_errno = errno, fd;
	bool to_syslog;
	va_list ap;
	int r;

	if ((int)level > current_level())
		return;
	if ((int)level < VMM_LOG_ERR || level > VMM_LOG_DEBUG)
		level = VMM_LOG_ERR;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	off = n;
	r = snprintf(buf + off, sizeof(buf) - off,
		     ".%06ldZ %-5s %s[%d]: ", ts.tv_nsec / 1000,
		     level_names[level], program_invocation_short_name,
		     (int)getpid());
	if (r > 0)
		off += (size_t)r < sizeof(buf) - off ? (size_t)r :
						       sizeof(buf) - off - 1;

	text = off;
	va_start(ap, fmt);
	r = vsnprintf(buf + off, sizeof(buf) - off, fmt, ap);
	va_end(ap);
	if (r > 0)
		off += (size_t)r < sizeof(buf) - off ? (size_t)r :
						       sizeof(buf) - off - 1;
	/* Room for the newline even when the text was cut. */
	if (off > sizeof(buf) - 2)
		off = sizeof(buf) - 2;
	if (off == 0 || buf[off - 1] != '\n')
		buf[off++] = '\n';

	fd = __atomic_load_n(&log_fd, __ATOMIC_RELAXED);
	to_syslog = __atomic_load_n(&log_syslog, __ATOMIC_RELAXED);
	if (to_syslog)
		syslog(syslog_prio[level], "%.*s", (int)(off - text - 1),
		       buf + text);
	else
		write_all(fd, buf, off);
	if (__atomic_load_n(&log_stderr_too, __ATOMIC_RELAXED) &&
	    (to_syslog || fd != STDERR_FILENO))
		write_all(STDERR_FILENO, buf, off);
	errno = saved_errno;
}
