// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * The whole cache path on the backend the machine has: a real kvmmd on the
 * cuda backend when a GPU answers (GPU memory, 2 MiB pages), else on the
 * host backend, with libkvmm clients in separate processes that touch the
 * blocks only through the backend's copies (cuMemcpy*Async on cuda), as an
 * engine's kernels would:
 *   - writer processes fill two blocks per content through the mapped
 *     K/V ranges and publish them; with 2 cached blocks on the GPU, 8 host
 *     slots and 7 NVMe slots the older contents go GPU -> host -> NVMe;
 *   - reader processes open each content by its hashes and read every
 *     byte back: shared zero-copy from the GPU (the writer's physical
 *     pages imported into another process), restored from host and from
 *     NVMe into fresh pages, all byte-identical; each reader then opens
 *     the same blocks in a second sequence, shared from the GPU with the
 *     pages it imported already (mapped again, not imported), and reads
 *     them too, then unshares block 0 of the second sequence (ABI 1.20:
 *     kvmmd copies it, cuMemcpyDtoD on cuda), writes a page of it, and
 *     finds the first sequence's (the cache's) bytes unchanged; the
 *     reader's import, map and access calls are counted
 *     (access: one call per (layer, K|V) range) and timed;
 *   - with every client gone no page is mapped or quarantined, only the
 *     cached GPU blocks hold pages, and the daemon stops cleanly.
 * KVMM_ROUNDTRIP_LAYERS (default 2) sets the region's layers, so blocks
 * of a real model's size (32: 64 pages a block) can be timed; each open's
 * time is printed.
 * KVMM_TEST_BACKEND=cuda requires the cuda backend (fails without it;
 * bench/gpu-check.sh sets it), =host forces the host backend; unset, the
 * test takes cuda when it opens and host otherwise.  The NVMe part is left
 * out (said in the output) when $KVMM_NVME_TEST_DIR (default /var/tmp)
 * does not take O_DIRECT io_uring (tests/lib/nvme_probe.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_layout.h"
#include "tests/lib/nvme_probe.h"
#include "tests/lib/test.h"
#include "vmm/vmm.h"

#define KV_HEADS 8
#define HEAD_DIM 128
#define DTYPE 2
#define TOKEN_BYTES (KV_HEADS * HEAD_DIM * DTYPE) /* per layer, K or V */
#define NB 2 /* blocks per content */
#define NCONTENT 5
#define PPB (2 * sh->layers) /* pages per block */

/* What the children report back (MAP_SHARED, set up before any fork). */
struct shared {
	size_t page_size; /* from the probe */
	uint32_t layers; /* KVMM_ROUNDTRIP_LAYERS, default 2 */
	int probe_err;
	uint32_t shared[NCONTENT], host[NCONTENT], nvme[NCONTENT];
	double open_ms[NCONTENT];
	/* a second open of the same blocks in the same process (pages
	 * imported already): its time and what it shared */
	double open2_ms[NCONTENT];
	/* wall clock (CLOCK_REALTIME, us) when the first open began and
	 * when its reply's recvmsg returned, to set beside kvmmd's log */
	uint64_t open_wall_us[NCONTENT], recv_wall_us[NCONTENT];
	uint32_t shared2[NCONTENT];
	/* the reader's backend calls during each open (microseconds) */
	struct vmm_time {
		double import_us, map_us, access_us, close_us, recv_us;
		uint32_t imports, maps, accesses, closes, recvs;
	} vt[NCONTENT], vt2[NCONTENT];
};

static struct shared *sh;
static const char *sock;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t hash_of(int k, uint32_t b)
{
	return 0x6b766d6d00000000ull + (uint64_t)k * 64 + b + 1;
}

/* The 64-bit word i of content k, block b, page pg (layer pg / 2, K or
 * V): every word of every page differs from every other's. */
static uint64_t word(int k, uint32_t b, uint32_t pg, size_t i)
{
	uint64_t x = ((uint64_t)k << 56) ^ ((uint64_t)b << 48) ^
		     ((uint64_t)pg << 40) ^ i;

	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ull;
	return x ^ (x >> 29);
}

static uint64_t page_va(struct kvmm_region *r, uint32_t seq, uint32_t b,
			uint32_t pg)
{
	uint64_t base = pg & 1 ? kvmm_seq_v_ptr(r, seq, pg / 2) :
				 kvmm_seq_k_ptr(r, seq, pg / 2);

	return base + (uint64_t)b * sh->page_size;
}

/*
 * The reader's backend with its import, map and access calls timed, so
 * the open's time splits into this process's VMM calls and the rest (the
 * daemon's work, the socket, the fds).
 */
static const struct vmm_ops *plain_ops;
static uint64_t recv_wall;

static uint64_t wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static struct vmm_ops timed_ops;
static struct vmm_time *vt_now;

static int timed_import(struct vmm_backend *b, int fd, vmm_handle_t *h)
{
	double t0 = now_ms();
	int r = plain_ops->page_import(b, fd, h);

	if (vt_now) { /* not timed outside the opens */
		vt_now->import_us += (now_ms() - t0) * 1e3;
		vt_now->imports++;
	}
	return r;
}

static int timed_map(struct vmm_backend *b, uint64_t va, vmm_handle_t h)
{
	double t0 = now_ms();
	int r = plain_ops->map(b, va, h);

	if (vt_now) {
		vt_now->map_us += (now_ms() - t0) * 1e3;
		vt_now->maps++;
	}
	return r;
}

static int timed_access(struct vmm_backend *b, uint64_t va, size_t size,
			int prot)
{
	double t0 = now_ms();
	int r = plain_ops->set_access(b, va, size, prot);

	if (vt_now) {
		vt_now->access_us += (now_ms() - t0) * 1e3;
		vt_now->accesses++;
	}
	return r;
}

/*
 * close() and recvmsg() of this program (libkvmm is linked in) timed
 * during the opens as well: the fds of new pages arrive by recvmsg and
 * each is closed once imported, and on a GPU those are the other costs a
 * first open pays per page.  The calls go straight to the kernel.
 */
int close(int fd)
{
	double t0 = vt_now ? now_ms() : 0;
	int r = (int)syscall(SYS_close, fd);

	if (vt_now) {
		vt_now->close_us += (now_ms() - t0) * 1e3;
		vt_now->closes++;
	}
	return r;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	double t0 = vt_now ? now_ms() : 0;
	ssize_t r = syscall(SYS_recvmsg, fd, msg, flags);

	if (vt_now) {
		vt_now->recv_us += (now_ms() - t0) * 1e3;
		vt_now->recvs++;
		recv_wall = wall_us();
	}
	return r;
}

static void time_backend(struct vmm_backend *b)
{
	plain_ops = b->ops;
	timed_ops = *b->ops;
	timed_ops.page_import = timed_import;
	timed_ops.map = timed_map;
	timed_ops.set_access = timed_access;
	b->ops = &timed_ops;
}

/* Runs fn(k) in a child process (no CUDA state in the parent, which CUDA
 * needs for the child to use it); its exit status must be 0. */
static void in_child(void (*fn)(int), int k)
{
	pid_t p = fork();
	int st;

	t_assert(p >= 0);
	if (p == 0) {
		fn(k);
		_exit(0);
	}
	t_assert_eq(waitpid(p, &st, 0), p);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		t_fail("child for content %d: status %#x", k, st);
}

static void probe_cuda(int unused)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_CUDA };
	struct vmm_backend *b;

	sh->probe_err = vmm_backend_open(&cfg, &b);
	if (sh->probe_err)
		return;
	sh->page_size = b->page_size;
	vmm_backend_close(b);
}

static void open_region(struct kvmm_conn **c, struct kvmm_region **r)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = "roundtrip" };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = sh->layers,
				       .kv_heads = KV_HEADS,
				       .head_dim = HEAD_DIM,
				       .dtype_bytes = DTYPE,
				       .max_seqs = 4,
				       .max_tokens = NB * (sh->page_size /
							   TOKEN_BYTES) };

	t_ok(kvmm_connect(&co, c));
	t_assert_eq((*c)->page_size, sh->page_size);
	t_ok(kvmm_region_create(*c, &ro, r));
	t_assert_eq(kvmm_region_tokens_per_block(*r),
		    sh->page_size / TOKEN_BYTES);
}

static void writer(int k)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct vmm_backend *be;
	uint64_t h[NB], *buf;
	uint32_t seq, tpb;
	size_t words = sh->page_size / 8;

	open_region(&c, &r);
	be = c->backend;
	tpb = kvmm_region_tokens_per_block(r);
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, NB * tpb));
	buf = malloc(sh->page_size * PPB);
	t_assert(buf);
	/* one host buffer per page: the async copies read it later */
	for (uint32_t b = 0; b < NB; b++) {
		for (uint32_t pg = 0; pg < PPB; pg++) {
			uint64_t *w = buf + (size_t)pg * words;

			for (size_t i = 0; i < words; i++)
				w[i] = word(k, b, pg, i);
			t_ok(be->ops->copy_host_to_va_async(
				be, page_va(r, seq, b, pg), w, sh->page_size));
		}
		t_ok(be->ops->synchronize(be));
		h[b] = hash_of(k, b);
	}
	free(buf);
	t_assert_eq(kvmm_block_publish(r, seq, 0, NB, 0, h), NB);
	t_ok(kvmm_seq_close(r, seq));
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
}

/* Every word of blocks [0, NB) of seq holds content k's. */
static void check_seq(struct vmm_backend *be, struct kvmm_region *r,
		      uint32_t seq, int k, const uint8_t *actions)
{
	size_t words = sh->page_size / 8;
	uint64_t *buf = malloc(sh->page_size);

	t_assert(buf);
	for (uint32_t b = 0; b < NB; b++)
		for (uint32_t pg = 0; pg < PPB; pg++) {
			memset(buf, 0, sh->page_size);
			t_ok(be->ops->copy_va_to_host_async(
				be, buf, page_va(r, seq, b, pg),
				sh->page_size));
			t_ok(be->ops->synchronize(be));
			for (size_t i = 0; i < words; i++)
				if (buf[i] != word(k, b, pg, i))
					t_fail("content %d (%s) block %u page %u word %zu: %#llx, expected %#llx",
					       k,
					       kvmm_block_action_string(
						       actions[b]),
					       b, pg, i,
					       (unsigned long long)buf[i],
					       (unsigned long long)word(k, b,
									pg, i));
		}
	free(buf);
}

/*
 * Copy-on-write (ABI 1.20): block 0 of seq unshared (kvmmd copies it, a
 * cuMemcpyDtoD on cuda) keeps its bytes (the caller checks), is writable,
 * and takes a page of new words through the backend.
 */
static void unshare_and_write(struct vmm_backend *be, struct kvmm_region *r,
			      uint32_t seq)
{
	uint64_t *buf = malloc(sh->page_size), *back = malloc(sh->page_size);
	size_t words = sh->page_size / 8;

	t_assert(buf && back);
	t_assert_eq(kvmm_seq_block_readonly(r, seq, 0), 1);
	t_ok(kvmm_seq_block_unshare(r, seq, 0));
	t_assert_eq(kvmm_seq_block_readonly(r, seq, 0), 0);
	for (size_t i = 0; i < words; i++)
		buf[i] = 0x5eed000000000000ull | i;
	t_ok(be->ops->copy_host_to_va_async(be, page_va(r, seq, 0, 1), buf,
					    sh->page_size));
	t_ok(be->ops->copy_va_to_host_async(be, back, page_va(r, seq, 0, 1),
					    sh->page_size));
	t_ok(be->ops->synchronize(be));
	t_assert(!memcmp(buf, back, sh->page_size));
	free(buf);
	free(back);
}

static void reader(int k)
{
	/* 0 is no action: a block the open did not report reads as none */
	uint8_t actions[NB] = { 0 }, actions2[NB] = { 0 };
	struct kvmm_prefix_opts po = { .size = sizeof(po), .actions = actions };
	struct kvmm_prefix_opts po2 = { .size = sizeof(po2),
					.actions = actions2 };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct vmm_backend *be;
	uint64_t h[NB];
	uint32_t seq, seq2, nb;
	double t0;

	open_region(&c, &r);
	be = c->backend;
	time_backend(be);
	for (uint32_t b = 0; b < NB; b++)
		h[b] = hash_of(k, b);
	vt_now = &sh->vt[k];
	sh->open_wall_us[k] = wall_us();
	t0 = now_ms();
	t_ok(kvmm_seq_open_prefix_opts(r, h, NB, &seq, &nb, &po));
	sh->open_ms[k] = now_ms() - t0;
	vt_now = NULL;
	sh->recv_wall_us[k] = recv_wall;
	if (nb != NB)
		t_fail("content %d: a prefix of %u blocks, expected %d", k, nb,
		       NB);
	for (uint32_t b = 0; b < NB; b++)
		if (actions[b] == KVMM_BLOCK_RECOMPUTE)
			t_fail("content %d block %u: recompute, expected a reload",
			       k, b);
	sh->shared[k] = po.shared;
	sh->host[k] = po.reloaded_host;
	sh->nvme[k] = po.reloaded_nvme;
	check_seq(be, r, seq, k, actions);

	/* the same blocks again, in a second sequence of this process:
	 * shared from the GPU, the pages imported already */
	vt_now = &sh->vt2[k];
	t0 = now_ms();
	t_ok(kvmm_seq_open_prefix_opts(r, h, NB, &seq2, &nb, &po2));
	sh->open2_ms[k] = now_ms() - t0;
	vt_now = NULL;
	t_assert_eq(nb, NB);
	sh->shared2[k] = po2.shared;
	t_assert_eq(sh->vt2[k].imports, 0);
	check_seq(be, r, seq2, k, actions2);
	unshare_and_write(be, r, seq2);
	check_seq(be, r, seq, k, actions); /* the cache's copy unchanged */
	t_ok(kvmm_seq_close(r, seq2));
	t_ok(kvmm_seq_close(r, seq));
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
}

/* Wait until nothing moves between tiers (cc_settled_stats()), so that
 * each open is timed alone rather than against the moves the one before
 * it started; the wait in ms. */
static double settle(const struct td_daemon *d)
{
	struct kvmm_tier_stats_reply ts;
	double t0 = now_ms();

	cc_settled_stats(d->sock, &ts);
	return now_ms() - t0;
}

/* Whether dir takes the NVMe tier (an O_DIRECT file and io_uring). */
static bool direct_io_ok(const char *dir)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/kvmm-roundtrip-probe-%d", dir,
		 (int)getpid());
	return t_nvme_usable(path);
}

int main(void)
{
	const char *want = getenv("KVMM_TEST_BACKEND");
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	const char *layers_env;
	char ps[32], gpu_mem[32], host_mem[32], nvme_size[32], nvme[256];
	const char *args[20];
	struct kvmm_status_reply st;
	struct td_daemon d;
	bool cuda, use_nvme;
	size_t block_bytes;
	uint32_t tot_shared = 0, tot_host = 0, tot_nvme = 0;
	int n = 0, r, ncontent;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(sh != MAP_FAILED);
	if (want && strcmp(want, "host") && strcmp(want, "cuda"))
		t_fail("KVMM_TEST_BACKEND=%s: not host or cuda", want);
	cuda = false;
	if (!want || !strcmp(want, "cuda")) {
		in_child(probe_cuda, 0);
		cuda = sh->probe_err == 0;
		if (!cuda && want)
			t_fail("KVMM_TEST_BACKEND=cuda but the cuda backend does not open: %s",
			       strerror(-sh->probe_err));
	}
	if (!cuda)
		sh->page_size = 64 * 1024;
	sh->layers = 2;
	layers_env = getenv("KVMM_ROUNDTRIP_LAYERS");
	if (layers_env) {
		sh->layers = (uint32_t)atoi(layers_env);
		if (sh->layers < 1 || sh->layers > 128)
			t_fail("KVMM_ROUNDTRIP_LAYERS=%s: not 1..128",
			       layers_env);
	}
	block_bytes = PPB * sh->page_size;
	dir = dir && *dir ? dir : "/var/tmp";
	use_nvme = direct_io_ok(dir);
	printf("backend %s, %zu KiB pages, %u layers, %zu KiB blocks, NVMe tier %s\n",
	       cuda ? "cuda" : "host", sh->page_size >> 10, sh->layers,
	       block_bytes >> 10,
	       use_nvme ? dir : "left out (no O_DIRECT there)");

	snprintf(ps, sizeof(ps), "%zu", sh->page_size);
	snprintf(gpu_mem, sizeof(gpu_mem), "%zu", 16 * block_bytes);
	snprintf(host_mem, sizeof(host_mem), "%zu", 8 * block_bytes);
	nt_size_arg(nvme_size, sizeof(nvme_size), 7, block_bytes); /* 7 slots */
	snprintf(nvme, sizeof(nvme), "%s/kvmm-roundtrip-%d", dir,
		 (int)getpid());
	args[n++] = "--backend";
	args[n++] = cuda ? "cuda" : "host";
	args[n++] = "--page-size";
	args[n++] = ps;
	args[n++] = "--gpu-mem";
	args[n++] = gpu_mem;
	args[n++] = "--cache-gpu-blocks";
	args[n++] = "2";
	args[n++] = "--host-mem";
	args[n++] = host_mem;
	if (use_nvme) {
		args[n++] = "--nvme-path";
		args[n++] = nvme;
		args[n++] = "--nvme-size";
		args[n++] = nvme_size;
	}
	/* restores are what this checks: the restore plan would recompute
	 * the first block of a 2-block NVMe prefix while the second loads */
	args[n++] = "--restore-mode";
	args[n++] = "reload";
	args[n] = NULL;
	r = td_start(&d, args);
	if (r)
		t_fail("kvmmd did not start: %s", strerror(-r));
	sock = d.sock;
	t_ok(td_status(&d, &st));
	t_assert_eq(st.backend, cuda ? VMM_BACKEND_CUDA : VMM_BACKEND_HOST);
	t_assert_eq(st.page_size, sh->page_size);
	printf("device: %s\n", st.device);
	{
		/* the host slab was made (and on cuda pinned) at start: its
		 * size and time, for bench/gpu-check.sh's summary */
		static char log[1 << 16];
		const char *m, *e;

		t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
		m = strstr(log, "host tier: ");
		t_assert(m != NULL && strstr(m, "made in"));
		e = strchr(m, '\n');
		printf("%.*s\n", e ? (int)(e - m) : (int)strlen(m), m);
	}

	/* without NVMe, a fifth content would push the first out of the cache */
	ncontent = use_nvme ? NCONTENT : NCONTENT - 1;
	for (int k = 0; k < ncontent; k++)
		in_child(writer, k);
	/* newest first: the GPU's, then host's three, then NVMe's */
	for (int k = ncontent - 1; k >= 0; k--) {
		double wait_ms = settle(&d);
		uint64_t parked;

		t_ok(td_status(&d, &st));
		parked = st.cmds_parked;
		in_child(reader, k);
		t_ok(td_status(&d, &st));
		printf("content %d: the moves before it took %.1f ms; its open %s\n",
		       k, wait_ms,
		       st.cmds_parked > parked ?
			       "waited for demotions to give pages back" :
			       "did not wait for demotions");
		printf("content %d: %u shared, %u from host, %u from NVMe, open %.2f ms (%.1f GB/s of blocks; here %u imports %.2f ms, %u maps %.2f ms, %u access calls %.2f ms, %u recvmsg %.2f ms, %u close %.2f ms); again in the same process: %u shared, %.2f ms (%u maps %.2f ms, %u access calls %.2f ms)\n",
		       k, sh->shared[k], sh->host[k], sh->nvme[k],
		       sh->open_ms[k],
		       NB * block_bytes / (sh->open_ms[k] * 1e6),
		       sh->vt[k].imports, sh->vt[k].import_us / 1e3,
		       sh->vt[k].maps, sh->vt[k].map_us / 1e3,
		       sh->vt[k].accesses, sh->vt[k].access_us / 1e3,
		       sh->vt[k].recvs, sh->vt[k].recv_us / 1e3,
		       sh->vt[k].closes, sh->vt[k].close_us / 1e3,
		       sh->shared2[k], sh->open2_ms[k], sh->vt2[k].maps,
		       sh->vt2[k].map_us / 1e3, sh->vt2[k].accesses,
		       sh->vt2[k].access_us / 1e3);
		if (getenv("KVMMD_SLOW_CMD_US"))
			printf("content %d: open sent at %llu.%06llu, its reply received at %llu.%06llu (CLOCK_REALTIME)\n",
			       k,
			       (unsigned long long)sh->open_wall_us[k] /
				       1000000,
			       (unsigned long long)sh->open_wall_us[k] %
				       1000000,
			       (unsigned long long)sh->recv_wall_us[k] /
				       1000000,
			       (unsigned long long)sh->recv_wall_us[k] %
				       1000000);
		t_assert_eq(sh->shared2[k], NB);
		t_assert_eq(sh->vt[k].imports, NB * PPB);
		t_assert_eq(sh->vt2[k].maps, NB * PPB);
		/* access is set once per (layer, K|V) range: its run of NB */
		t_assert_eq(sh->vt[k].accesses, PPB);
		t_assert_eq(sh->vt2[k].accesses, PPB);
		tot_shared += sh->shared[k];
		tot_host += sh->host[k];
		tot_nvme += sh->nvme[k];
	}
	/* the newest content is still on the GPU and read in place; the
	 * next three come from host, the oldest from NVMe */
	for (int k = 0; k < ncontent; k++) {
		uint32_t want_tier = k == ncontent - 1 ? 0 :
				     k >= ncontent - 4 ? 1 :
							 2;

		t_assert_eq(sh->shared[k], want_tier == 0 ? NB : 0);
		t_assert_eq(sh->host[k], want_tier == 1 ? NB : 0);
		t_assert_eq(sh->nvme[k], want_tier == 2 ? NB : 0);
	}

	/* every client gone: only the 2 cached GPU blocks hold pages */
	for (int i = 0;; i++) {
		t_ok(td_status(&d, &st));
		if (!st.pages_mapped && !st.pages_quarantined &&
		    !st.sequences && st.pages_allocated <= 2 * PPB)
			break;
		if (i == 1000)
			t_fail("daemon not idle: %llu pages allocated, %llu mapped, %llu quarantined, %llu sequences",
			       (unsigned long long)st.pages_allocated,
			       (unsigned long long)st.pages_mapped,
			       (unsigned long long)st.pages_quarantined,
			       (unsigned long long)st.sequences);
		usleep(10000);
	}
	if (getenv("KVMMD_SLOW_CMD_US")) {
		/* kvmmd's slow-command lines (a diagnostic: see session.c) */
		static char log[1 << 20];

		if (td_read_log(&d, log, sizeof(log)) > 0)
			for (char *l = strtok(log, "\n"); l;
			     l = strtok(NULL, "\n"))
				if (strstr(l, " took ") &&
				    (strstr(l, "0x51") || strstr(l, "0x50")))
					printf("kvmmd: %s\n", l);
	}
	r = td_stop(&d);
	if (r)
		td_dump_log(&d);
	t_assert_eq(r, 0);
	unlink(nvme);
	printf("roundtrip ok on %s: %u blocks shared, %u from host, %u from NVMe\n",
	       cuda ? "cuda" : "host", tot_shared, tot_host, tot_nvme);
	return 0;
}
