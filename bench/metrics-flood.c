// SPDX-License-Identifier: MIT
/*
 * What scrapes of kvmmd --metrics-listen cost the clients of its event
 * loop: the ring NOP latency of a libkvmm client (one NOP every 200 us)
 * with the endpoint idle (the baseline), then during 8-thread floods of
 * HEAD /metrics, GET /metrics, GET with Cache-Control: no-cache,
 * GET /x (a 404, which builds nothing: what the flood itself costs the
 * machine) and GET with Accept-Encoding: gzip (as a Prometheus scrapes:
 * a tenth of the bytes to copy), each at --rate requests/s in all.  Tenant limits on uids
 * 2001.. make a large exposition (255 rows: ~240 KB).  kvmmd runs with
 * --log-level debug and the benchmark adds up the builds it logs
 * ("... bytes built in U us"): how many each flood caused and how much
 * loop time they took (with the compressions of the gzip flood,
 * "metrics: gzip N: ... in U us").  Prints each flood's p99 over the idle p99 and
 * ends with one JSON line.  Documentation/admin.md quotes it.
 *
 *   build/bench/metrics-flood [--rate R (800; 0: as fast as 8 threads go)]
 *                             [--tenants N (255)] [--nops N (10000)]
 *
 * KVMM_BUILD=DIR runs DIR/kvmmd and DIR/kvmmctl (e.g. an older build).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/metrics.h"

#define THREADS 8

static const struct {
	const char *name, *req;
} kinds[] = {
	{ "head", "HEAD /metrics HTTP/1.1\r\n\r\n" },
	{ "get", "GET /metrics HTTP/1.1\r\n\r\n" },
	{ "fresh", "GET /metrics HTTP/1.1\r\nCache-Control: no-cache\r\n\r\n" },
	{ "404", "GET /x HTTP/1.1\r\n\r\n" },
	/* what a Prometheus sends: the text compressed once per build */
	{ "gzip", "GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n" },
};
#define KINDS (sizeof(kinds) / sizeof(kinds[0]))

struct flood {
	int port;
	const char *req;
	double rate;
	int id;
	volatile int *stop;
	unsigned long done;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* One scraper: a request on a fresh connection, read to the close. */
static void *flood_thread(void *arg)
{
	struct flood *f = arg;
	double period = f->rate > 0 ? THREADS / f->rate : 0;
	double next = tm_now() + period * f->id / THREADS;
	char buf[65536];

	while (!*f->stop) {
		int fd;

		if (period) {
			double d = next - tm_now();

			if (d > 0)
				usleep(d * 1e6);
			next += period;
		}
		fd = tm_connect(f->port);
		if (send(fd, f->req, strlen(f->req), MSG_NOSIGNAL) > 0)
			while (recv(fd, buf, sizeof(buf), 0) > 0)
				;
		close(fd);
		f->done++;
	}
	return NULL;
}

/* NOP latency in us: p50, p99, max of n NOPs 200 us apart. */
static void nops(struct kvmm_conn *c, int n, double out[3])
{
	uint64_t *t = malloc(n * sizeof(*t));

	if (!t)
		exit(1);
	for (int i = 0; i < n; i++) {
		double t0 = tm_now();

		if (kvmm_nop(c, 0)) {
			fprintf(stderr, "metrics-flood: NOP failed\n");
			exit(1);
		}
		t[i] = (tm_now() - t0) * 1e9;
		usleep(200);
	}
	qsort(t, n, sizeof(*t), cmp_u64);
	out[0] = t[n / 2] / 1e3;
	out[1] = t[n * 99 / 100] / 1e3;
	out[2] = t[n - 1] / 1e3;
	free(t);
}

/* The builds kvmmd has logged so far and their loop time in us. */
static void builds(const struct td_daemon *d, unsigned long *n,
		   unsigned long long *us)
{
	char line[1024];
	FILE *f = fopen(d->log, "r");
	const char *p;

	*n = 0;
	*us = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		/* "metrics: gzip N: A bytes to B in U us": loop time too */
		if (strstr(line, "metrics: gzip ") &&
		    (p = strstr(line, " in ")) && strstr(p, " us")) {
			*us += strtoull(p + 4, NULL, 10);
			continue;
		}
		p = strstr(line, "bytes built in ");
		if (!p || !strstr(line, "metrics: "))
			continue;
		(*n)++;
		*us += strtoull(p + 15, NULL, 10);
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	static const char *const extra[] = { "--metrics-listen", "127.0.0.1:0",
					     "--log-level", "debug", NULL };
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.name = "metrics-flood" };
	double rate = 800, idle[3], lat[KINDS][3], rps[KINDS];
	unsigned long nb[KINDS];
	unsigned long long bus[KINDS];
	int tenants = 255, n = 10000, port, err;
	struct kvmm_conn *c;
	struct td_daemon d;
	char cmd[1024], ctl[256];
	struct tm_resp r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			rate = atof(argv[++i]);
		else if (!strcmp(argv[i], "--tenants") && i + 1 < argc)
			tenants = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--nops") && i + 1 < argc)
			n = atoi(argv[++i]);
		else {
			fprintf(stderr,
				"usage: metrics-flood [--rate R] [--tenants N] [--nops N]\n");
			return 2;
		}
	}
	if (n < 100)
		n = 100;
	err = td_start(&d, extra);
	if (err) {
		fprintf(stderr, "metrics-flood: kvmmd: %s\n", strerror(-err));
		return 1;
	}
	port = tm_port(&d);
	snprintf(
		cmd, sizeof(cmd),
		"for u in $(seq 2001 %d); do %s --socket %s tenant-limit $u gpu:4 >/dev/null || exit 1; done",
		2000 + tenants, td_build_path("kvmmctl", ctl, sizeof(ctl)),
		d.sock);
	if (tenants > 0 && system(cmd)) {
		fprintf(stderr, "metrics-flood: kvmmctl tenant-limit failed\n");
		td_stop(&d);
		return 1;
	}
	tm_http(port, kinds[1].req, strlen(kinds[1].req), &r);
	printf("exposition: %zu bytes (%d tenant rows); floods of %d threads at %s%.0f requests/s\n",
	       r.body_len, tenants, THREADS, rate > 0 ? "" : "(unlimited) ",
	       rate);
	tm_resp_free(&r);
	if (kvmm_connect(&co, &c)) {
		fprintf(stderr, "metrics-flood: kvmm_connect failed\n");
		td_stop(&d);
		return 1;
	}
	nops(c, n / 10, idle); /* warm up */
	nops(c, n, idle);
	printf("idle:          NOP p50 %7.1f us  p99 %8.1f us  max %8.1f us\n",
	       idle[0], idle[1], idle[2]);
	for (size_t k = 0; k < KINDS; k++) {
		struct flood f[THREADS];
		pthread_t th[THREADS];
		volatile int stop = 0;
		unsigned long b0, done = 0;
		unsigned long long u0;
		double t0;

		builds(&d, &b0, &u0);
		t0 = tm_now();
		for (int i = 0; i < THREADS; i++) {
			f[i] = (struct flood){ .port = port,
					       .req = kinds[k].req,
					       .rate = rate,
					       .id = i,
					       .stop = &stop };
			pthread_create(&th[i], NULL, flood_thread, &f[i]);
		}
		usleep(300000);
		nops(c, n, lat[k]);
		stop = 1;
		for (int i = 0; i < THREADS; i++) {
			pthread_join(th[i], NULL);
			done += f[i].done;
		}
		rps[k] = done / (tm_now() - t0);
		builds(&d, &nb[k], &bus[k]);
		nb[k] -= b0;
		bus[k] -= u0;
		printf("%-5s %5.0f/s: NOP p50 %7.1f us  p99 %8.1f us  max %8.1f us  p99/idle %6.2f; %lu builds, %.1f ms of loop time (%.2f%%)\n",
		       kinds[k].name, rps[k], lat[k][0], lat[k][1], lat[k][2],
		       lat[k][1] / idle[1], nb[k], bus[k] / 1e3,
		       bus[k] / 1e4 / (tm_now() - t0));
	}
	kvmm_disconnect(c);
	td_stop(&d);
	printf("{\"bench\":\"metrics-flood\",\"rate\":%.0f,\"tenants\":%d,\"idle_p99_us\":%.1f",
	       rate, tenants, idle[1]);
	for (size_t k = 0; k < KINDS; k++)
		printf(",\"%s_rps\":%.0f,\"%s_p99_us\":%.1f,\"%s_p99_over_idle\":%.2f,\"%s_builds\":%lu,\"%s_build_ms\":%.1f",
		       kinds[k].name, rps[k], kinds[k].name, lat[k][1],
		       kinds[k].name, lat[k][1] / idle[1], kinds[k].name, nb[k],
		       kinds[k].name, bus[k] / 1e3);
	printf("}\n");
	return 0;
}
