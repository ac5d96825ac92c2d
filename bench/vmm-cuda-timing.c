/* SPDX-License-Identifier: MIT */
/*
 * vmm-cuda-timing: what one 2 MiB page costs through the cuda backend:
 * cuMemCreate (page_create), cuMemMap (map), cuMemSetAccess (set_access),
 * cuMemUnmap (unmap), cuMemRelease (page_release), plus export/import of
 * the POSIX fd.  Each call is timed on its own, over many pages; the table
 * shows the median and the 90th percentile in microseconds, and the ratio
 * to the same operation on the host backend with the same page size (the
 * baseline, measured in the same run).  Times include the backend's
 * validation and the context push/pop around each call, i.e. what kvmm
 * pays, not only the driver.
 *
 *   build/bench/vmm-cuda-timing [--pages N]     (exits 77 without a GPU)
 *   build/bench/vmm-cuda-timing --backend host  (checks this program on a
 *                                                machine without a GPU)
 *
 * "fd over a Unix socket" is one exported fd sent to this process over a
 * socketpair with SCM_RIGHTS and received, as kvmmd hands a page to a
 * client.  One more line times cuMemSetAccess once over all N pages,
 * mapped afresh (one call for the range), per page: whether a client that
 * maps a run of pages gains by setting their access in one call.
 *
 * KVMM_LIBCUDA overrides the libcuda path.  Ends with one JSON line.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/lib/wire.h"
#include "kvmm/uapi.h"
#include "vmm/vmm.h"

#define PAGE_2M (2u << 20)

enum step {
	S_CREATE,
	S_EXPORT,
	S_PASS,
	S_IMPORT,
	S_MAP,
	S_ACCESS,
	S_UNMAP,
	S_RELEASE,
	S_COUNT
};
static const char *const step_names[S_COUNT] = {
	"cuMemCreate",
	"cuMemExportToShareableHandle",
	"fd over a Unix socket",
	"cuMemImportFromShareableHandle",
	"cuMemMap",
	"cuMemSetAccess",
	"cuMemUnmap",
	"cuMemRelease",
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[(size_t)(p * (n - 1) + 0.5)];
}

#define TIMED(slot, call)                                                   \
	do {                                                                \
		double _t0 = now_us();                                      \
		int _e = (call);                                            \
		(slot) = now_us() - _t0;                                    \
		if (_e) {                                                   \
			fprintf(stderr, "vmm-cuda-timing: %s: %s\n", #call, \
				strerror(-_e));                             \
			return _e;                                          \
		}                                                           \
	} while (0)

/* Send fd to ourselves over sv[0] with SCM_RIGHTS and receive it on
 * sv[1] (kvmm's wire helpers, as kvmmd hands a page to a client): the
 * received fd, or -errno. */
static int pass_fd(const int sv[2], int fd)
{
	unsigned int nfds = 0;
	char c = 0;
	int out;
	ssize_t r;

	r = kw_send(sv[0], &c, 1, &fd, 1, 0);
	if (r)
		return (int)r;
	r = kw_recv(sv[1], &c, 1, &out, &nfds, 1, 0);
	if (r < 0)
		return (int)r;
	return r == 1 && nfds == 1 ? out : -EPROTO;
}

/* pass_fd() in place: *fd becomes the received copy (0 or -errno). */
static int pass_one(const int sv[2], int *fd)
{
	int r = pass_fd(sv, *fd);

	if (r < 0)
		return r;
	close(*fd);
	*fd = r;
	return 0;
}

/* cuMemSetAccess over a whole range of pages, one call (microseconds). */
static double range_access_us;
/* All n fds sent to another process in messages of up to 253, as kvmmd
 * sends a reply's pages, until it has them all (microseconds); that
 * process a plain one, and one that opened the cuda backend first, as an
 * engine has. */
static double batch_pass_us, batch_pass_cuda_us;

/* The receiving process (this program run again with --receive-fds):
 * open the backend if asked, say ready, take n fds, close them, say done. */
static int receive_fds(int sock, size_t n, bool cuda)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_CUDA };
	struct vmm_backend *b = NULL;
	size_t got = 0;
	char c = 0;

	if (cuda) {
		cfg.libcuda_path = getenv("KVMM_LIBCUDA");
		if (vmm_backend_open(&cfg, &b))
			return 1;
	}
	if (write(sock, &c, 1) != 1)
		return 1;
	while (got < n) {
		int fds[KVMM_MSG_MAX_FDS];
		unsigned int nfds = 0;
		char byte;

		if (kw_recv(sock, &byte, 1, fds, &nfds, KVMM_MSG_MAX_FDS, 0) !=
			    1 ||
		    !nfds)
			return 1;
		kw_close_fds(fds, nfds);
		got += nfds;
	}
	if (write(sock, &c, 1) != 1)
		return 1;
	if (b)
		vmm_backend_close(b);
	return 0;
}

static int pass_batch(const int *fds, size_t n, bool cuda, double *us)
{
	char arg_n[32], arg_fd[16], c = 0;
	double t0;
	int sv[2], st = 0;
	pid_t p;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	snprintf(arg_n, sizeof(arg_n), "%zu", n);
	snprintf(arg_fd, sizeof(arg_fd), "%d", sv[1]);
	p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		/* a fresh process: CUDA cannot be used after a fork */
		fcntl(sv[1], F_SETFD, 0);
		execl("/proc/self/exe", "vmm-cuda-timing", "--receive-fds",
		      arg_n, arg_fd, cuda ? "cuda" : "plain", (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	if (read(sv[0], &c, 1) != 1) { /* ready */
		st = -EPROTO;
		goto out;
	}
	t0 = now_us();
	for (size_t i = 0; i < n; i += KVMM_MSG_MAX_FDS) {
		size_t k = n - i < KVMM_MSG_MAX_FDS ? n - i : KVMM_MSG_MAX_FDS;

		st = kw_send(sv[0], &c, 1, fds + i, (unsigned int)k, 0);
		if (st)
			goto out;
	}
	if (read(sv[0], &c, 1) != 1) /* done */
		st = -EPROTO;
	*us = now_us() - t0;
out:
	close(sv[0]);
	waitpid(p, NULL, 0);
	return st;
}

/* Time every step for n pages on b; t[step][i] in microseconds. */
static int run(struct vmm_backend *b, size_t n, double *t[S_COUNT])
{
	vmm_handle_t *pages = calloc(n, sizeof(*pages));
	vmm_handle_t *imported = calloc(n, sizeof(*imported));
	size_t ps = b->page_size;
	uint64_t va;
	int *fds = calloc(n, sizeof(*fds)), sv[2];

	if (!pages || !imported || !fds)
		return -ENOMEM;
	TIMED(t[S_CREATE][0], b->ops->reserve(b, n * ps, &va));
	for (size_t i = 0; i < n; i++)
		TIMED(t[S_CREATE][i], b->ops->page_create(b, &pages[i]));
	for (size_t i = 0; i < n; i++)
		TIMED(t[S_EXPORT][i],
		      b->ops->page_export(b, pages[i], &fds[i]));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	for (size_t i = 0; i < n; i++)
		TIMED(t[S_PASS][i], pass_one(sv, &fds[i]));
	close(sv[0]);
	close(sv[1]);
	{
		int e = pass_batch(fds, n, false, &batch_pass_us);

		if (!e && b->kind == VMM_BACKEND_CUDA)
			e = pass_batch(fds, n, true, &batch_pass_cuda_us);
		if (e)
			return e;
	}
	for (size_t i = 0; i < n; i++) {
		TIMED(t[S_IMPORT][i],
		      b->ops->page_import(b, fds[i], &imported[i]));
		close(fds[i]);
	}
	for (size_t i = 0; i < n; i++)
		TIMED(t[S_MAP][i], b->ops->map(b, va + i * ps, pages[i]));
	for (size_t i = 0; i < n; i++)
		TIMED(t[S_ACCESS][i],
		      b->ops->set_access(b, va + i * ps, ps, VMM_PROT_RW));
	for (size_t i = 0; i < n; i++)
		TIMED(t[S_UNMAP][i], b->ops->unmap(b, va + i * ps));
	/* the same pages mapped afresh, their access set by one call */
	for (size_t i = 0; i < n; i++) {
		int e = b->ops->map(b, va + i * ps, pages[i]);

		if (e)
			return e;
	}
	TIMED(range_access_us, b->ops->set_access(b, va, n * ps, VMM_PROT_RW));
	for (size_t i = 0; i < n; i++)
		b->ops->unmap(b, va + i * ps);
	for (size_t i = 0; i < n; i++) {
		/* each import is a reference of its own, also where the
		 * driver gave the created page's handle: the created one's
		 * release (timed) is then the one that reaches the driver */
		b->ops->page_release(b, imported[i]);
		TIMED(t[S_RELEASE][i], b->ops->page_release(b, pages[i]));
	}
	b->ops->free_range(b, va, n * ps);
	free(pages);
	free(imported);
	free(fds);
	return 0;
}

int main(int argc, char **argv)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_CUDA };
	struct vmm_config hcfg = { .kind = VMM_BACKEND_HOST,
				   .page_size = PAGE_2M };
	double *tc[S_COUNT], *th[S_COUNT], med[S_COUNT], p90[S_COUNT],
		hmed[S_COUNT];
	struct vmm_backend *cuda, *host;
	double range_us, batch_us, batch_cuda_us;
	size_t n = 256;
	int err;

	if (argc == 5 && !strcmp(argv[1], "--receive-fds"))
		return receive_fds(atoi(argv[3]), strtoul(argv[2], NULL, 0),
				   !strcmp(argv[4], "cuda"));
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--pages") && i + 1 < argc)
			n = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--backend") && i + 1 < argc &&
			 !strcmp(argv[i + 1], "host"))
			cfg = hcfg, i++;
		else {
			fprintf(stderr,
				"usage: %s [--pages N] [--backend host]\n",
				argv[0]);
			return 2;
		}
	}
	if (n < 2)
		n = 2;
	cfg.libcuda_path = getenv("KVMM_LIBCUDA");
	err = vmm_backend_open(&cfg, &cuda);
	if (err) {
		printf("skip: no GPU (the cuda backend did not open: %s)\n",
		       strerror(-err));
		return 77;
	}
	if (cuda->page_size != PAGE_2M) {
		/* Ask for 2 MiB pages when the granularity divides it. */
		vmm_backend_close(cuda);
		cfg.page_size = PAGE_2M;
		err = vmm_backend_open(&cfg, &cuda);
		if (err) {
			printf("skip: granularity does not divide 2 MiB (%s)\n",
			       strerror(-err));
			return 77;
		}
	}
	err = vmm_backend_open(&hcfg, &host);
	if (err)
		return 1;
	for (int s = 0; s < S_COUNT; s++) {
		tc[s] = calloc(n, sizeof(double));
		th[s] = calloc(n, sizeof(double));
		if (!tc[s] || !th[s])
			return 1;
	}
	/* One warm-up pass each (driver lazy init, page tables). */
	if (run(cuda, 2, tc) || run(host, 2, th))
		return 1;
	if (run(cuda, n, tc))
		return 1;
	range_us = range_access_us;
	batch_us = batch_pass_us;
	batch_cuda_us = batch_pass_cuda_us;
	if (run(host, n, th))
		return 1;

	printf("vmm-cuda-timing: %s, %zu pages of %zu bytes, microseconds per page\n",
	       cuda->device_name, n, cuda->page_size);
	printf("  %-32s %10s %10s %12s %8s\n", "operation", "median", "p90",
	       "host median", "ratio");
	for (int s = 0; s < S_COUNT; s++) {
		med[s] = pct(tc[s], n, 0.5);
		p90[s] = pct(tc[s], n, 0.9);
		hmed[s] = pct(th[s], n, 0.5);
		printf("  %-32s %10.2f %10.2f %12.2f %8.2f\n", step_names[s],
		       med[s], p90[s], hmed[s],
		       hmed[s] > 0 ? med[s] / hmed[s] : 0.0);
	}
	printf("  %-32s %10.2f %10s %12.2f %8.2f\n",
	       "cuMemSetAccess, one call for all", range_us / n, "-",
	       range_access_us / n,
	       range_access_us > 0 ? range_us / range_access_us : 0.0);
	printf("  %-32s %10.2f %10s %12.2f %8.2f\n",
	       "fds to a process, 253 a message", batch_us / n, "-",
	       batch_pass_us / n,
	       batch_pass_us > 0 ? batch_us / batch_pass_us : 0.0);
	printf("  %-32s %10.2f %10s %12s %8s\n",
	       "  the same, to a CUDA process", batch_cuda_us / n, "-", "-",
	       "-");
	printf("  (ratio = cuda median / host-backend median, same page size;\n"
	       "   the last two: one call over the %zu pages, and all their fds\n"
	       "   sent to another process, per page)\n",
	       n);
	printf("{\"bench\":\"vmm-cuda-timing\",\"device\":\"%s\",\"page_size\":%zu,"
	       "\"pages\":%zu,\"baseline\":\"host backend\"",
	       cuda->device_name, cuda->page_size, n);
	for (int s = 0; s < S_COUNT; s++)
		printf(",\"%s_median_us\":%.3f,\"%s_p90_us\":%.3f,\"%s_host_median_us\":%.3f",
		       step_names[s], med[s], step_names[s], p90[s],
		       step_names[s], hmed[s]);
	printf(",\"cuMemSetAccess_range_per_page_us\":%.3f,\"fd_batch_per_fd_us\":%.3f,\"fd_batch_to_cuda_process_per_fd_us\":%.3f}\n",
	       range_us / n, batch_us / n, batch_cuda_us / n);
	vmm_backend_close(cuda);
	vmm_backend_close(host);
	for (int s = 0; s < S_COUNT; s++) {
		free(tc[s]);
		free(th[s]);
	}
	return 0;
}
