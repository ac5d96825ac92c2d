/* SPDX-License-Identifier: MIT */
/*
 * vmm_log: one line per message on stderr, "TIME LEVEL prog[pid]: text".
 *
 * The line is formatted into a local buffer and written with a single
 * write(2) so lines from several threads or processes sharing stderr do not
 * interleave.  The level is a process-wide threshold; KVMM_LOG_LEVEL
 * (err|warn|info|debug or 0..3) sets the initial one, vmm_log_set_level()
 * overrides it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "vmm/vmm.h"

/* -1 until first use, then the threshold; races only ever store the same
 * value computed from the environment. */
static int log_level = -1;

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
	size_t n, off = 0;
	int saved_errno = errno;
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

	for (size_t done = 0; done < off;) {
		ssize_t w = write(STDERR_FILENO, buf + done, off - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	errno = saved_errno;
}
