/* SPDX-License-Identifier: MIT */
/*
 * Helpers the benchmarks share (host-tier.c, nvme-tier.c, scope.c, ipc.c,
 * cache-drop-*.c): wall and CPU clocks, the load they ran under, and the
 * median they report of their rounds.
 */
#ifndef KVMM_BENCH_BENCH_H
#define KVMM_BENCH_BENCH_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/*
 * --help or -h among a benchmark's arguments: its usage on stdout, and
 * true (the caller exits 0).  Before, six benchmarks took --help for an
 * option they did not know and ran the whole measurement (tel-poll-delta
 * for minutes, as root), which is not what an operator asking for help
 * expects.
 */
static inline bool bench_help(int argc, char **argv, const char *usage)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return true;
		}
	}
	return false;
}

/* An argument it does not take: say so and the usage, on stderr (exit 2). */
static inline int bench_usage_error(const char *name, const char *arg,
				    const char *usage)
{
	fprintf(stderr, "%s: %s: not an option it takes\n%s", name, arg, usage);
	return 2;
}

/* CLOCK_MONOTONIC in seconds. */
static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds (user + system) of every thread of this process. */
static inline double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* The 1-minute load average, or -1 where /proc/loadavg cannot be read:
 * printed next to a ratio, since this machine's figures move with it. */
static inline double bench_loadavg(void)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double l = -1;

	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of n values (sorts v). */
static inline double median(double *v, unsigned int n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
